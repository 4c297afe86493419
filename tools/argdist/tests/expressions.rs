// SPDX-License-Identifier: Apache-2.0 OR MIT
//! argdist's expressions against a helper whose calls are known (tests/src/exprs.c): entry parameters in return
//! probes (`$entry(size)`, or `size` itself), arithmetic in expressions and filters, struct members, STRCMP.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use corebpf_tests::libc;
use corebpf_tests::{build_c_helper, Finished, KillOnDrop, Running, EXPRS_C};

/// Runs argdist with `-p HELPER -c -i 1` and `args` (`{exe}` is the helper's path) around one run of the helper.
fn counted(args: &[&str]) -> Finished {
    let exe = build_c_helper("argdist-exprs", EXPRS_C, &["-O1"]);
    let child = Command::new(&exe).stdin(Stdio::piped()).spawn().expect("starting the helper");
    let mut helper = KillOnDrop(child);
    let mut all = vec!["-p".to_owned(), helper.0.id().to_string(), "-c".to_owned(), "-i".to_owned(), "1".to_owned()];
    all.extend(args.iter().map(|a| a.replace("{exe}", &exe.display().to_string())));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut run = Running::start("argdist", &all);
    run.wait_for_line("[", Duration::from_secs(60));
    helper.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.0.wait().unwrap().success(), "helper failed");
    // One more interval, so the last report holds every call.
    std::thread::sleep(Duration::from_millis(1200));
    run.signal(libc::SIGINT);
    let done = run.finish(Duration::from_secs(30));
    done.assert_success();
    done.assert_no_programs_left();
    done
}

/// The `COUNT EVENT` rows of the last report under the probe titled `title`, sorted by event.
fn rows(stdout: &str, title: &str) -> Vec<(u64, String)> {
    let start = stdout.rfind("\n[").map_or(0, |i| i + 1);
    let report = &stdout[start..];
    let mut out = Vec::new();
    let mut inside = false;
    for line in report.lines() {
        if !line.starts_with('\t') {
            inside = line.trim() == title;
            continue;
        }
        if !inside {
            continue;
        }
        let l = line.trim();
        if let Some((count, event)) = l.split_once(' ') {
            if let Ok(count) = count.parse::<u64>() {
                out.push((count, event.trim().to_owned()));
            }
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

#[test]
fn entry_parameters_in_return_probes() {
    let done = counted(&[
        "-C",
        "r:{exe}:scaled(long size):long:$entry(size)#entry",
        "-C",
        "r:{exe}:scaled(long size):long,long:size,$retval-size:size>100#plain",
    ]);
    assert_eq!(
        rows(&done.stdout, "entry"),
        vec![(1, "$entry(size) = 100".into()), (2, "$entry(size) = 200".into()), (3, "$entry(size) = 300".into())],
        "{}",
        done.stdout
    );
    assert_eq!(
        rows(&done.stdout, "plain"),
        vec![(2, "size = 200, $retval-size = 200".into()), (3, "size = 300, $retval-size = 300".into())],
        "{}",
        done.stdout
    );
}

#[test]
fn arithmetic_members_and_strcmp_in_keys_and_filters() {
    let done = counted(&[
        "-C",
        "p:{exe}:fail_or(long n):long:n%3:n>20 && (n&1)==0#mod",
        "-C",
        "p:{exe}:take_ts(struct timespec *ts):long:ts->tv_nsec/1000:ts->tv_sec>=3#ts",
        "-C",
        r#"p:{exe}:take_name(char *name, long len):long:len:STRCMP("beta", name) || STRCMP("alpha", name)#names"#,
    ]);
    // n in 22, 24, 26, 28, 30: n % 3 is 1, 0, 2, 1, 0.
    assert_eq!(
        rows(&done.stdout, "mod"),
        vec![(2, "n%3 = 0".into()), (2, "n%3 = 1".into()), (1, "n%3 = 2".into())],
        "{}",
        done.stdout
    );
    assert_eq!(
        rows(&done.stdout, "ts"),
        vec![(1, "ts->tv_nsec/1000 = 3".into()), (1, "ts->tv_nsec/1000 = 4".into())],
        "{}",
        done.stdout
    );
    assert_eq!(rows(&done.stdout, "names"), vec![(5, "len = 4".into()), (3, "len = 5".into())], "{}", done.stdout);
}

#[test]
fn usdt_arguments_counted() {
    let done = counted(&["-C", "u:{exe}:tick():char*,long:arg2,arg1%2:arg1<=4#ticks"]);
    assert_eq!(
        rows(&done.stdout, "ticks"),
        vec![(2, "arg2 = even, arg1%2 = 0".into()), (2, "arg2 = odd, arg1%2 = 1".into())],
        "{}",
        done.stdout
    );
}
