// SPDX-License-Identifier: Apache-2.0 OR MIT
//! readahead against files of known size on the root file system (not tmpfs), dropped from the page cache
//! (POSIX_FADV_DONTNEED on that file only) before the workload. The tool is system-wide, as BCC's: other tests
//! running beside it can only add pages, so the assertions are lower bounds set by this test's own file:
//! - reading a file of N pages sequentially after dropping it: every page of it comes in by read-ahead and is
//!   then used, so at least N pages are read ahead and at least N used (the histogram holds at least N);
//! - POSIX_FADV_WILLNEED on a dropped file reads its pages ahead (up to the device's read-ahead size) and nothing
//!   uses them, so at least that many pages are unused;
//! - bad input exits 2 with one line on stderr; -d, SIGINT, SIGTERM and a closed pipe end cleanly with no BPF program left.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
const PAGE: usize = 4096;

/// A file of `pages` pages written, synced and dropped from the page cache.
fn dropped_file(tag: &str, pages: usize) -> ScratchFile {
    let file = ScratchFile::new(tag);
    let mut f = File::create(&file.0).unwrap();
    let block: Vec<u8> = (0..PAGE).map(|i| (i * 7 + 3) as u8).collect();
    for _ in 0..pages {
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
    drop_cache(&file.0);
    file
}

/// Drops `path` from the page cache and checks with mincore(2) that none of it stays (pages still in a CPU's
/// LRU batch can survive one POSIX_FADV_DONTNEED: it is repeated until none is left).
fn drop_cache(path: &Path) {
    let f = File::open(path).unwrap();
    for _ in 0..50 {
        // SAFETY: fadvise on a descriptor we own.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0, "posix_fadvise(DONTNEED)");
        if resident_pages(&f) == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} stays in the page cache after POSIX_FADV_DONTNEED", path.display());
}

/// How many pages of `f` are in the page cache (mincore over a read-only mapping, which faults nothing in).
fn resident_pages(f: &File) -> usize {
    let len = f.metadata().unwrap().len() as usize;
    if len == 0 {
        return 0;
    }
    let pages = len.div_ceil(PAGE);
    let mut vec = vec![0u8; pages];
    // SAFETY: a shared read-only mapping of a file we own, unmapped below; mincore writes `pages` bytes.
    unsafe {
        let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(addr, libc::MAP_FAILED, "mmap");
        let rc = libc::mincore(addr, len, vec.as_mut_ptr());
        libc::munmap(addr, len);
        assert_eq!(rc, 0, "mincore");
    }
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

/// Reads `path` from start to end, one page per read().
fn read_sequentially(path: &Path) -> usize {
    let mut f = File::open(path).unwrap();
    let mut buf = vec![0u8; PAGE];
    let mut pages = 0;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return pages;
        }
        pages += 1;
    }
}

/// The read-ahead size of the device holding `path`, in pages (a partition's is its disk's).
fn device_readahead_pages(path: &Path) -> u64 {
    let dev = std::fs::metadata(path).unwrap().dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = format!("/sys/dev/block/{major}:{minor}");
    let kb = ["queue/read_ahead_kb", "../queue/read_ahead_kb"]
        .iter()
        .find_map(|p| std::fs::read_to_string(format!("{base}/{p}")).ok())
        .unwrap_or_else(|| panic!("no read_ahead_kb for {base}"));
    kb.trim().parse::<u64>().unwrap() / 4
}

/// Starts the tool with `args`, runs `work` once it is attached, and stops it with SIGINT.
fn traced(args: &[&str], work: impl FnOnce()) -> Finished {
    let mut run = Running::start(TOOL, args);
    run.wait_attached(Duration::from_secs(30));
    // Its banner comes after its last attach: in an emulated guest a kprobe can take longer to attach than the
    // pause wait_attached() takes for the end of attaching (6.1 through kprobes once saw none of a read-ahead).
    if !args.iter().any(|a| *a == "-j" || *a == "--json") {
        run.wait_for_line("Tracing", Duration::from_secs(60));
    }
    work();
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    done
}

fn unused_line(text: &str) -> u64 {
    let line = text.lines().find(|l| l.starts_with("Read-ahead unused pages: ")).expect("no unused line");
    line["Read-ahead unused pages: ".len()..].parse().unwrap()
}

#[test]
fn a_sequential_read_is_read_ahead_and_used() {
    const PAGES: usize = 1024;
    let file = dropped_file("readahead-seq", PAGES);
    let done = traced(&[], || assert_eq!(read_sequentially(&file.0), PAGES));
    let text = &done.stdout;
    assert!(text.starts_with("Tracing... Hit Ctrl-C to end.\n"), "{text}");
    assert!(text.contains("\nHistogram of read-ahead used page age (ms):\n\n     age (ms)"), "{text}");
    unused_line(text);
    let used = hist_total(text);
    assert!(used >= PAGES as u64, "{used} pages used, the read alone used {PAGES}:\n{text}");
    done.assert_no_programs_left();
}

#[test]
fn json_counts_a_sequential_read() {
    const PAGES: usize = 2048;
    let file = dropped_file("readahead-json", PAGES);
    let done = traced(&["-j"], || assert_eq!(read_sequentially(&file.0), PAGES));
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    let j = &lines[0];
    let (total, used, unused) =
        (j["total_pages"].as_u64().unwrap(), j["used_pages"].as_u64().unwrap(), j["unused_pages"].as_u64().unwrap());
    assert!(total >= PAGES as u64, "{total} pages read ahead, the file alone has {PAGES}: {j}");
    assert!(used >= PAGES as u64, "{used} pages used, the read alone used {PAGES}: {j}");
    assert_eq!(total.saturating_sub(used), unused, "{j}");
    let in_buckets: u64 = j["buckets"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(in_buckets, used, "{j}");
    assert_eq!(j["unit"], "ms");
}

/// The tracepoint path sees mmap faults (mm_filemap_fault, mm_filemap_map_pages); BCC's functions do not (mmap
/// faults do not call folio_mark_accessed), so this runs the tracepoint path only, where the kernel has it. A
/// 4 MiB file is read ahead in folios smaller than the 2 MiB ones the kernel maps whole without a filemap event.
#[test]
fn mmap_faults_use_read_ahead_pages_on_the_tracepoint_path() {
    const PAGES: usize = 1024;
    if !Path::new("/sys/kernel/btf/vmlinux").exists()
        || !std::fs::read("/sys/kernel/btf/vmlinux")
            .unwrap()
            .windows(b"btf_trace_page_cache_ra_unbounded".len())
            .any(|w| w == b"btf_trace_page_cache_ra_unbounded")
    {
        eprintln!("this kernel has no readahead tracepoints: nothing to check");
        return;
    }
    let file = dropped_file("readahead-mmap", PAGES);
    let mut run = Running::start_with_env(TOOL, &["-j"], &[("COREBPF_ATTACH", "tracepoint")]);
    run.wait_attached(Duration::from_secs(30));
    let f = File::open(&file.0).unwrap();
    let len = PAGES * PAGE;
    let mut sum = 0u64;
    // SAFETY: a shared read-only mapping of a file we own, read within its length and unmapped below.
    unsafe {
        let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(addr, libc::MAP_FAILED, "mmap");
        for page in 0..PAGES {
            sum += u64::from(std::ptr::read_volatile((addr as *const u8).add(page * PAGE)));
        }
        libc::munmap(addr, len);
    }
    assert!(sum > 0);
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), 1, "{}", done.stdout);
    assert_eq!(lines[0]["attach"], "tracepoint");
    let used = lines[0]["used_pages"].as_u64().unwrap();
    assert!(used >= PAGES as u64, "{used} pages used, touching the mapping alone used {PAGES}: {}", lines[0]);
}

#[test]
fn willneed_pages_stay_unused() {
    const PAGES: u64 = 256;
    let file = dropped_file("readahead-willneed", PAGES as usize);
    let expected = PAGES.min(device_readahead_pages(&file.0));
    assert!(expected > 0, "the device has read-ahead turned off");
    let done = traced(&[], || {
        let f = File::open(&file.0).unwrap();
        // SAFETY: fadvise on a descriptor we own.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
        assert_eq!(rc, 0, "posix_fadvise(WILLNEED)");
        // The read-ahead is submitted before fadvise returns; let its pages arrive before stopping the tool.
        std::thread::sleep(Duration::from_millis(300));
    });
    let unused = unused_line(&done.stdout);
    assert!(unused >= expected, "{unused} unused pages, this file alone left {expected}:\n{}", done.stdout);
}

#[test]
fn duration_ends_the_run_with_one_report() {
    let done = run_tool(TOOL, &["-d", "1", "-j"]);
    done.assert_success();
    assert_eq!(json_lines(&done.stdout).len(), 1, "{}", done.stdout);
}

/// `--prometheus`: the same counts as the report, as counters and a histogram of ages in seconds.
#[test]
fn prometheus_counts_a_sequential_read() {
    const PAGES: usize = 1024;
    let file = dropped_file("readahead-prom", PAGES);
    let (run, addr) = corebpf_tests::prom::serving(TOOL, &[]);
    assert_eq!(read_sequentially(&file.0), PAGES);
    let text = corebpf_tests::prom::scrape(&addr);
    run.signal(libc::SIGINT);
    run.finish(Duration::from_secs(20)).assert_success();
    corebpf_tests::prom::promtool_accepts(&text);
    let sample =
        |series: &str| corebpf_tests::prom::sample(&text, series).unwrap_or_else(|| panic!("{series}: {text}"));
    let used = sample("corebpf_readahead_pages_used_total");
    assert!(used >= PAGES as f64, "{used} pages used, the read alone used {PAGES}:\n{text}");
    assert!(sample("corebpf_readahead_pages_read_ahead_total") >= used, "{text}");
    // Pages used after the scrape's two reads could differ by the few used between them: the histogram's count
    // is one read of the same counter.
    assert!(sample("corebpf_readahead_used_page_age_seconds_count") >= PAGES as f64, "{text}");
    assert!(text.contains("corebpf_attach_info{tool=\"readahead\",mechanism=\""), "{text}");
}

#[test]
fn bad_input_is_a_usage_error() {
    for args in [&["-d", "0"][..], &["-d", "x"], &["-d"], &["--bogus"], &["5"], &["--prometheus", "9", "-d", "1"]] {
        let done = run_tool(TOOL, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", done.stderr);
        assert_eq!(done.stderr.lines().count(), 1, "{args:?}: {}", done.stderr);
        assert!(done.stderr.starts_with("readahead: "), "{args:?}: {}", done.stderr);
    }
}

#[test]
fn sigterm_and_a_closed_pipe_end_cleanly() {
    let mut run = Running::start(TOOL, &[]);
    run.wait_attached(Duration::from_secs(30));
    run.signal(libc::SIGTERM);
    let done = run.finish(Duration::from_secs(20));
    done.assert_success();
    assert!(done.stderr.is_empty(), "stderr: {}", done.stderr);
    assert!(done.stdout.contains("Read-ahead unused pages: "), "{}", done.stdout);
    done.assert_no_programs_left();
    pipe::assert_head_1_ends_cleanly(TOOL, "-d 1", "Tracing... Hit Ctrl-C to end.");
}
