// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Modules of frames: kernel frames in a kernel module or a BPF program, from the text symbols of
//! /proc/kallsyms, and unnamed user frames from the executable mappings of a running process ([`add_modules`]).

use std::collections::HashMap;
use std::fs::File;

use super::{Frame, Sample, Stack};

/// Names the module of the frames the symbolizer leaves without one, as BCC's `show_module` does: kernel frames
/// in a kernel module or a BPF program (`[nf_tables]`, `[bpf]`, from /proc/kallsyms: the module of the nearest
/// text symbol at or below the address; core kernel frames keep none and print as `[kernel]`), and unnamed user
/// frames inside an executable file mapping of a process that still runs (`[unknown] [libfoo.so]`).
pub fn add_modules(samples: &mut [Sample<Frame>]) {
    let tasks = || samples.iter().flat_map(|s| std::iter::once(&s.task).chain(&s.waker));
    if tasks().any(|t| t.kernel.has_frames()) {
        set_kernel_modules(samples, &kallsyms_modules());
    }
    let mut maps: HashMap<u32, Vec<(u64, u64, String)>> = HashMap::new();
    for sample in samples.iter_mut() {
        for task in std::iter::once(&mut sample.task).chain(sample.waker.as_mut()) {
            if let Stack::Frames(frames) = &mut task.user {
                let pid = task.pid;
                for frame in frames.iter_mut().filter(|f| f.module.is_none()) {
                    let mappings = maps.entry(pid).or_insert_with(|| executable_mappings(pid));
                    if let Some((_, _, path)) = mappings.iter().find(|(lo, hi, _)| (*lo..*hi).contains(&frame.addr)) {
                        frame.module = Some(path.clone());
                    }
                }
            }
        }
    }
}

/// Sets the module of each kernel frame from `modules` (see [`kallsyms_modules`]).
fn set_kernel_modules(samples: &mut [Sample<Frame>], modules: &[(u64, Option<String>)]) {
    for sample in samples.iter_mut() {
        for task in std::iter::once(&mut sample.task).chain(sample.waker.as_mut()) {
            if let Stack::Frames(frames) = &mut task.kernel {
                for frame in frames.iter_mut().filter(|f| f.module.is_none()) {
                    let at = modules.partition_point(|(addr, _)| *addr <= frame.addr);
                    if let Some((_, Some(module))) = at.checked_sub(1).map(|i| &modules[i]) {
                        frame.module = Some(module.clone());
                    }
                }
            }
        }
    }
}

/// Where the modules are, from the text symbols of /proc/kallsyms: (address, module) at each address where the
/// module of the nearest symbol changes (`None`: the core kernel), sorted by address.
fn kallsyms_modules() -> Vec<(u64, Option<String>)> {
    match File::open("/proc/kallsyms") {
        Ok(file) => parse_kallsyms_modules(std::io::BufReader::with_capacity(1 << 16, file)),
        Err(_) => Vec::new(),
    }
}

fn parse_kallsyms_modules(mut reader: impl std::io::BufRead) -> Vec<(u64, Option<String>)> {
    // Module names are few: symbols carry an index into them (0: the core kernel).
    let mut names: Vec<String> = vec![String::new()];
    let mut symbols: Vec<(u64, u16)> = Vec::new();
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        let mut fields = line.split_whitespace();
        let addr = fields.next().and_then(|a| u64::from_str_radix(a, 16).ok()).unwrap_or(0);
        // Data symbols are not functions (BCC skips them too).
        let text = fields.next().is_some_and(|k| !matches!(k, "b" | "B" | "d" | "D" | "r" | "R"));
        if addr != 0 && text {
            let module = fields.nth(1).map(|m| m.trim_start_matches('[').trim_end_matches(']'));
            let index = match module {
                None => 0,
                Some(m) => names.iter().position(|n| n == m).unwrap_or_else(|| {
                    names.push(m.to_string());
                    names.len() - 1
                }),
            };
            symbols.push((addr, u16::try_from(index).unwrap_or(0)));
        }
        line.clear();
    }
    symbols.sort_unstable_by_key(|&(addr, _)| addr);
    symbols.dedup_by_key(|&mut (_, module)| module);
    symbols.into_iter().map(|(addr, i)| (addr, (i > 0).then(|| names[i as usize].clone()))).collect()
}

/// The executable file mappings of a running process: (start, end, path).
fn executable_mappings(pid: u32) -> Vec<(u64, u64, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (lo, hi) = fields.next()?.split_once('-')?;
            let perms = fields.next()?;
            let path = fields.nth(3)?;
            (perms.contains('x') && path.starts_with('/'))
                .then(|| Some((u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?, path.to_string())))
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::Task;

    #[test]
    fn kernel_frames_take_the_module_of_the_nearest_text_symbol() {
        let kallsyms = "\
ffffffff81000000 T _stext
ffffffff81000100 T vfs_read
ffffffff82000000 D some_data
ffffffffc0001000 t nft_do_chain\t[nf_tables]
ffffffffc0001800 t nft_other\t[nf_tables]
ffffffffc0002000 t bpf_prog_1234_do_perf_event\t[bpf]
ffffffffc0003000 r ro_data\t[nf_tables]
";
        let modules = parse_kallsyms_modules(kallsyms.as_bytes());
        let frame = |addr| Frame { addr, name: "f".into(), offset: 0, module: None };
        let mut samples = vec![Sample {
            task: Task {
                pid: 0,
                shown_id: 0,
                comm: "x".into(),
                user: Stack::Absent,
                kernel: Stack::Frames(vec![
                    frame(0xffff_ffff_8100_0110),
                    frame(0xffff_ffff_c000_1900),
                    frame(0xffff_ffff_c000_2010),
                    frame(0xffff_ffff_c000_3010),
                ]),
            },
            waker: None,
            value: 1,
        }];
        set_kernel_modules(&mut samples, &modules);
        let Stack::Frames(frames) = &samples[0].task.kernel else { panic!() };
        let got: Vec<Option<&str>> = frames.iter().map(|f| f.module.as_deref()).collect();
        assert_eq!(got, vec![None, Some("nf_tables"), Some("bpf"), Some("bpf")]);
    }
}
