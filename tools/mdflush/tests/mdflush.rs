// SPDX-License-Identifier: Apache-2.0 OR MIT
//! mdflush against an md array of the test's own: a RAID1 array without superblocks over two loop devices, built
//! by a helper (tests/mdarray.c) through md's ioctls, which then writes a block with O_DIRECT and calls fsync()
//! on the array FLUSHES times. Each fsync of a block device sends it exactly one empty flush request from the
//! calling process, and md receives it in that process: the tool must print exactly FLUSHES lines with the
//! helper's PID, each with its process name and the array's name, in text and in JSON, on every attach path.
//!
//! The md driver is a module on the kernel matrix's kernels: the tests load it (md-mod, raid1, and loop for the
//! devices) from $COREBPF_MD_MODULES (vm/init), which is why its scenarios run alone. This development host has
//! no md driver and no modules to load: there the md tests check only that the driver is indeed absent (the
//! matrix checks the counts), and the one test that needs no md driver, that flushes sent to a disk which is no
//! md array (a loop device) are not reported, runs everywhere.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use corebpf_tests::loopdev::LoopDevice;
use corebpf_tests::*;

const TOOL: &str = env!("CARGO_PKG_NAME");
/// The helper's fsync() calls, each one flush request.
const FLUSHES: usize = 5;
/// Size of each loop device, and of the array, in KiB.
const DEVICE_KIB: u64 = 8192;
const WAIT: Duration = Duration::from_secs(30);

/// Makes the md driver (with its RAID1 personality) and the loop driver present: in the kernel matrix's guests,
/// by loading this kernel's modules from $COREBPF_MD_MODULES. False where there is no md driver and no module
/// to load (this development host).
fn md_driver() -> bool {
    static LOADING: Mutex<()> = Mutex::new(());
    let _guard = LOADING.lock().unwrap();
    let loaded = |m: &str| Path::new(&format!("/sys/module/{}", m.replace('-', "_"))).exists();
    let Ok(dir) = std::env::var("COREBPF_MD_MODULES") else {
        return loaded("md-mod") && loaded("raid1");
    };
    for module in ["md-mod", "raid1", "loop"] {
        if loaded(module) {
            continue;
        }
        let out = Command::new("insmod").arg(format!("{dir}/{module}.ko")).output().expect("insmod");
        assert!(out.status.success(), "insmod {module}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !Path::new("/dev/loop-control").exists() {
        assert!(Instant::now() < deadline, "/dev/loop-control did not appear after loading {dir}/loop.ko");
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Where md arrays cannot be built: the driver must really be missing (not merely unloaded where modules could
/// be loaded), and this must not be a matrix guest, where the tests must run.
fn assert_no_md_driver_here() {
    assert!(std::env::var_os(HELPER_DIR_ENV).is_none(), "no md driver in the matrix guest (COREBPF_MD_MODULES unset?)");
    assert!(!Path::new("/sys/module/md_mod").exists());
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let modules = format!("/lib/modules/{}/kernel/drivers/md", release.trim());
    assert!(!Path::new(&modules).exists(), "{modules} exists: load md-mod and raid1 to run this test");
    eprintln!("{TOOL}: this kernel has no md driver: the md array tests run in the kernel matrix");
}

/// The helper, over an md array it built (`name`), or over a plain disk; waiting for "go".
struct Workload {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    comm: String,
}

/// The helper, built first thing in every test (the kernel matrix prebuilds it on the host, where the md tests
/// go no further).
fn helper() -> PathBuf {
    build_c_helper("mdflush-mdarray", include_str!("mdarray.c"), &["-O1"])
}

impl Workload {
    /// `name` "-": no array, the helper writes to `devices[0]` itself.
    fn start(exe: &Path, name: &str, devices: [&Path; 2]) -> Workload {
        let mut child = Command::new(exe)
            .arg(name)
            .args(devices)
            .arg(DEVICE_KIB.to_string())
            .arg(FLUSHES.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let child = KillOnDrop(child);
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid: u32 = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the helper could not set up its disk: {line:?}"));
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap().trim_end().to_string();
        Workload { child, stdin, stdout, pid, comm }
    }

    /// The writes and fsyncs; returns once they are done.
    fn flush(&mut self) {
        writeln!(self.stdin.as_mut().unwrap(), "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n", "the helper failed");
    }
}

impl Drop for Workload {
    /// End of stdin: the helper stops its array and exits (killed if it has not within 10 s).
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An md RAID1 array over two loop devices of its own, named after the test; stopped and gone when dropped.
struct MdArray {
    workload: Workload,
    name: String,
    _devices: [LoopDevice; 2],
}

impl MdArray {
    fn build(exe: &Path, tag: &str) -> MdArray {
        let devices = [LoopDevice::new(&format!("md-{tag}-a")), LoopDevice::new(&format!("md-{tag}-b"))];
        let name = format!("md_cb{tag}{}", std::process::id());
        fs::write("/sys/module/md_mod/parameters/new_array", &name).expect("creating an md array (new_array)");
        let workload = Workload::start(exe, &name, [&devices[0].path, &devices[1].path]);
        MdArray { workload, name, _devices: devices }
    }
}

/// Starts the tool, waits until it traces, lets the helper flush, stops the tool.
fn traced(args: &[&str], workload: &mut Workload) -> Finished {
    let mut run = Running::start(TOOL, args);
    run.wait_attached(WAIT);
    workload.flush();
    run.signal(libc::SIGINT);
    let done = run.finish(WAIT);
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The text lines of process `pid`: (TIME, COMM, DEVICE).
fn text_lines_of(stdout: &str, pid: u32) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[1] == pid.to_string()).then(|| (f[0].to_string(), f[2].to_string(), f[3].to_string()))
        })
        .collect()
}

#[test]
fn md_array_flushes_are_each_one_line() {
    let exe = helper();
    if !md_driver() {
        return assert_no_md_driver_here();
    }
    let mut array = MdArray::build(&exe, "t");
    let done = traced(&["-v"], &mut array.workload);
    let mut lines = done.stdout.lines();
    assert_eq!(lines.next(), Some("Tracing md flush requests... Hit Ctrl-C to end."), "{}", done.stdout);
    assert_eq!(
        lines.next().map(str::split_whitespace).map(Iterator::collect::<Vec<_>>),
        Some(vec!["TIME", "PID", "COMM", "DEVICE"])
    );
    let mine = text_lines_of(&done.stdout, array.workload.pid);
    assert_eq!(mine.len(), FLUSHES, "stdout:\n{}\nstderr:\n{}", done.stdout, done.stderr);
    for (time, comm, device) in &mine {
        let hms: Vec<&str> = time.split(':').collect();
        assert!(hms.len() == 3 && hms.iter().all(|p| p.len() == 2 && p.parse::<u8>().is_ok()), "TIME {time}");
        assert_eq!(comm, &array.workload.comm);
        assert_eq!(device, &array.name);
    }
}

#[test]
fn json_lines_hold_each_flush() {
    let exe = helper();
    if !md_driver() {
        return assert_no_md_driver_here();
    }
    let mut array = MdArray::build(&exe, "j");
    let done = traced(&["-j"], &mut array.workload);
    let pid = u64::from(array.workload.pid);
    let all = json_lines(&done.stdout);
    let mine: Vec<&serde_json::Value> = all.iter().filter(|v| v["pid"].as_u64() == Some(pid)).collect();
    assert_eq!(mine.len(), FLUSHES, "{}", done.stdout);
    for v in mine {
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 5, "{v}");
        assert_eq!(v["tid"].as_u64(), Some(pid), "{v}");
        assert_eq!(v["comm"], array.workload.comm.as_str());
        assert_eq!(v["device"], array.name.as_str());
        assert!(v["time"].as_str().is_some_and(|t| t.len() >= 19 && t.contains('T')), "{v}");
    }
}

/// The loop device's completed flush requests (the 16th field of its stat file, 5.5+).
fn flushes_completed(dev: &LoopDevice) -> u64 {
    let stat = fs::read_to_string(format!("/sys/block/{}/stat", dev.name())).unwrap();
    stat.split_whitespace().nth(15).and_then(|f| f.parse().ok()).unwrap_or_else(|| panic!("no flush field in {stat:?}"))
}

/// Where the kernel has no md driver at all (neither built in or loaded nor a module to load: this host), no
/// array can ever exist, so no flush can come: mdflush says so in one line and exits 1.
#[test]
fn no_md_driver_is_refused_in_one_line() {
    if md_driver() {
        return;
    }
    assert_no_md_driver_here();
    usage::assert_refused(TOOL, &[], 1, "no md driver");
    usage::assert_refused(TOOL, &["-j"], 1, "no md driver");
}

#[test]
fn non_md_flushes_are_not_reported() {
    let exe = helper();
    // In the guests, the loop driver is one of the modules md_driver() loads.
    if !md_driver() {
        // mdflush refuses to run here (no_md_driver_is_refused_in_one_line).
        assert_no_md_driver_here();
        return;
    }
    let disk = LoopDevice::new("mdflush-plain");
    let mut workload = Workload::start(&exe, "-", [&disk.path, &disk.path]);
    let before = flushes_completed(&disk);
    let done = traced(&[], &mut workload);
    let flushed = flushes_completed(&disk) - before;
    assert!(flushed >= FLUSHES as u64, "the loop device completed {flushed} flushes, not the helper's {FLUSHES}");
    assert_eq!(text_lines_of(&done.stdout, workload.pid), vec![], "{}", done.stdout);
}
