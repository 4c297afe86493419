// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `biolatency --heatmap FILE.svg`: the picture of a run checked against the same run's JSON (one column per
//! interval, every cell's count), parsed as XML, and rendered by headless Chromium into a screenshot that is not
//! blank; runqlat's, cpudist's, hardirqs' and softirqs' (their families' heat maps) against their JSON the same way.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use corebpf_tests::*;

const INTERVALS: usize = 4;

/// (column, slot, count) of every cell.
fn python(script: &str, arg: &Path) -> String {
    let out = Command::new("python3").args(["-c", script]).arg(arg).output().expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Checks the heat map `svg` against the JSON lines of the same run (one per interval, one histogram each): a column
/// per line, and each cell's count that of its bucket. Returns the count of all cells.
fn cells_match_json(svg: &str, lines: &[serde_json::Value]) -> u64 {
    let cells = heatmap_cells(svg);
    let columns = cells.iter().map(|c| c.0).max().unwrap() + 1;
    assert_eq!(columns, lines.len(), "one column per interval");
    let mut total = 0;
    for (column, line) in lines.iter().enumerate() {
        let buckets = line["buckets"].as_array().unwrap();
        for &(_, slot, count) in cells.iter().filter(|c| c.0 == column) {
            let expect = buckets.get(slot).map_or(0, |b| b["count"].as_u64().unwrap());
            assert_eq!(count, expect, "column {column} slot {slot}: {line}");
            total += count;
        }
        // Every non-empty JSON bucket has its cell.
        let non_empty = buckets.iter().filter(|b| b["count"].as_u64() > Some(0)).count();
        assert!(non_empty <= cells.iter().filter(|c| c.0 == column && c.2 > 0).count(), "{line}");
    }
    total
}

#[test]
fn scheduler_histograms_draw_the_same_heat_map_as_their_json() {
    // runqlat and cpudist share the scheduler histogram family's run; a busy loop and sleeps make waits and slices.
    for (tool, extra) in [("runqlat", &[][..]), ("cpudist", &[][..]), ("cpudist", &["-O"][..])] {
        let svg = std::env::temp_dir().join(format!("corebpf-heatmap-{tool}-{}.svg", std::process::id()));
        let svg_arg = svg.to_str().unwrap().to_string();
        let mut args = vec!["-j", "--heatmap", &svg_arg];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["1", "3"]);
        let mut run = Running::start(tool, &args);
        run.wait_attached(Duration::from_secs(30));
        let mut sleeper =
            KillOnDrop(Command::new("sh").args(["-c", "for i in $(seq 200); do sleep 0.01; done"]).spawn().unwrap());
        let done = run.finish(Duration::from_secs(30));
        let _ = sleeper.0.wait();
        done.assert_success();
        let lines = json_lines(&done.stdout);
        assert_eq!(lines.len(), 3, "{tool}: {}", done.stdout);
        let text = std::fs::read_to_string(&svg).unwrap();
        let _ = std::fs::remove_file(&svg);
        let total = cells_match_json(&text, &lines);
        assert!(total > 0, "{tool}: the heat map is empty");
        assert!(text.contains("(usecs)"), "{tool}: the unit is on the axis");
    }
}

#[test]
fn irq_time_heat_maps_add_up_every_irqs_histogram() {
    // hardirqs -d and softirqs -d: each JSON line holds one histogram per IRQ; the column is their sum.
    for (tool, array) in [("hardirqs", "hardirqs"), ("softirqs", "softirqs")] {
        let svg = std::env::temp_dir().join(format!("corebpf-heatmap-{tool}-{}.svg", std::process::id()));
        let svg_arg = svg.to_str().unwrap().to_string();
        let mut run = Running::start(tool, &["-d", "-j", "--heatmap", &svg_arg, "1", "3"]);
        run.wait_attached(Duration::from_secs(30));
        // Disk and timer interrupts while it runs: a few direct writes.
        let file = ScratchFile::new(&format!("heatmap-{tool}"));
        direct_writes(&file.0, 50);
        let done = run.finish(Duration::from_secs(30));
        done.assert_success();
        let summed: Vec<serde_json::Value> = json_lines(&done.stdout)
            .iter()
            .map(|line| {
                let mut counts: Vec<u64> = Vec::new();
                for irq in line[array].as_array().unwrap() {
                    for (slot, b) in irq["buckets"].as_array().unwrap().iter().enumerate() {
                        if counts.len() <= slot {
                            counts.resize(slot + 1, 0);
                        }
                        counts[slot] += b["count"].as_u64().unwrap();
                    }
                }
                serde_json::json!({ "buckets": counts.iter().map(|c| serde_json::json!({ "count": c })).collect::<Vec<_>>() })
            })
            .collect();
        assert_eq!(summed.len(), 3, "{tool}: {}", done.stdout);
        let text = std::fs::read_to_string(&svg).unwrap();
        let _ = std::fs::remove_file(&svg);
        let total = cells_match_json(&text, &summed);
        assert!(total > 0, "{tool}: the heat map is empty");
    }
}

#[test]
fn heat_map_columns_and_cells_match_the_json_of_the_same_run() {
    let svg = std::env::temp_dir().join(format!("corebpf-heatmap-{}.svg", std::process::id()));
    let svg_arg = svg.to_str().unwrap().to_string();
    let mut run = Running::start("biolatency", &["-j", "--heatmap", &svg_arg, "1", &INTERVALS.to_string()]);
    // Fast 4 KiB writes, then slower 1 MiB ones, while the intervals run.
    let file = ScratchFile::new("heatmap");
    std::thread::sleep(Duration::from_millis(1200));
    direct_writes(&file.0, 400);
    let big = Command::new("dd")
        .args(["if=/dev/zero", &format!("of={}", file.0.display()), "bs=1M", "count=40", "oflag=direct"])
        .args(["status=none"])
        .status()
        .unwrap();
    assert!(big.success());
    run.note_programs();
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    let lines = json_lines(&done.stdout);
    assert_eq!(lines.len(), INTERVALS, "{}", done.stdout);

    let text = std::fs::read_to_string(&svg).unwrap();
    let total = cells_match_json(&text, &lines);
    assert!(total >= 300, "the writes are in the picture: {total}");
    assert!(text.contains("latency (usecs)") && text.contains("id=\"legend\""));

    // A real XML parser accepts it.
    let root = python("import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().tag)", &svg);
    assert_eq!(root, "{http://www.w3.org/2000/svg}svg");

    // Chromium draws it: the screenshot has more than one colour.
    let png = PathBuf::from(format!("{}.png", svg.display()));
    let profile = std::env::temp_dir().join(format!("corebpf-heatmap-chromium-{}", std::process::id()));
    let status = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=800,600")
        .arg(format!("file://{}", svg.display()))
        .output()
        .expect("chromium (Debian's package) installed");
    assert!(png.exists(), "no screenshot: {}", String::from_utf8_lossy(&status.stderr));
    let colours = python(
        r#"
import sys, struct, zlib
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n'
i, idat, w, h, ct = 8, b'', 0, 0, 0
while i < len(d):
    n, t = struct.unpack('>I4s', d[i:i+8]); body = d[i+8:i+8+n]; i += 12 + n
    if t == b'IHDR': w, h, bd, ct = struct.unpack('>IIBB', body[:10])
    if t == b'IDAT': idat += body
raw = zlib.decompress(idat)
bpp = {2: 3, 6: 4}[ct]
stride = w * bpp + 1
seen = set()
prev = bytearray(w * bpp)
for y in range(h):
    f, row = raw[y*stride], bytearray(raw[y*stride+1:(y+1)*stride])
    for x in range(len(row)):
        a = row[x-bpp] if x >= bpp else 0; b = prev[x]; c = prev[x-bpp] if x >= bpp else 0
        if f == 1: row[x] = (row[x] + a) & 255
        elif f == 2: row[x] = (row[x] + b) & 255
        elif f == 3: row[x] = (row[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p-a), abs(p-b), abs(p-c)
            row[x] = (row[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = row
    for x in range(0, len(row), bpp * 4):
        seen.add(bytes(row[x:x+3]))
print(len(seen))
"#,
        &png,
    );
    let colours: usize = colours.parse().unwrap();
    let _ = std::fs::remove_file(&png);
    let _ = std::fs::remove_dir_all(&profile);
    let _ = std::fs::remove_file(&svg);
    assert!(colours >= 5, "the screenshot is blank or nearly: {colours} colours");
}

#[test]
fn an_unwritable_heat_map_is_one_line() {
    // Refused before anything is loaded, as a usage error (issue 31 item 15: it failed after the trace).
    let done = run_tool("biolatency", &["--heatmap", "/nonexistent-dir/x.svg", "1", "1"]);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    assert!(done.prog_ids.is_empty(), "programs were loaded: {}", done.stderr);
    assert_eq!(done.stderr.trim().lines().count(), 1, "{}", done.stderr);
    assert!(done.stderr.contains("/nonexistent-dir/x.svg"), "{}", done.stderr);
}
