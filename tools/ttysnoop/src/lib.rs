// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ttysnoop: print what is written to one tty or pts device, as it appears there (BCC's tool, CO-RE).
//!
//! The device is named by path, or by number for /dev/pts/N; its inode number and file system are found with
//! stat() and written into the BPF object before load. The BPF side (`ttysnoop.bpf.c`) copies each write to that
//! file in chunks of at most `-s` bytes, `-c` chunks a write, from the entry of the kernel's `tty_write` and
//! `redirected_tty_write` (/dev/console's) (fentry, else kprobe, as BCC) or, where kernel functions cannot be traced, from the write system calls' tracepoints.
//! This front end clears the screen (unless -C), then prints the bytes as they come, or one JSON object a write.

mod bpf;
mod report;

use std::ffi::OsString;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::attach::events::EventStream;
use common::attach::features::Attach;
use common::attach::links::Links;
use common::attach::loader::{attach_tracepoint, autoload_by_section, load_first_working, open_skeleton, rodata};
use common::host::Host;
use common::output::stdout::Output;
use common::run::Signals;
use libbpf_rs::skel::OpenSkel;

use bpf::consts::{MAX_DATACOUNT, MAX_DATASIZE};
use bpf::{BpfSkel, BpfSkelBuilder};
use report::Report;

const EXAMPLES: &str = include_str!(concat!(env!("OUT_DIR"), "/examples.txt"));

/// Print what is written to a tty or pts device (a shell's session, the console), as it appears there
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, after_help = EXAMPLES)]
struct Args {
    /// Do not clear the screen first (the default writes the terminal's clear sequence before any output)
    #[arg(short = 'C', long)]
    noclear: bool,
    /// Bytes copied in one chunk of a write
    #[arg(short = 's', long, value_name = "SIZE", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=MAX_DATASIZE as i64))]
    datasize: u32,
    /// Chunks copied of one write at most: later bytes of a longer write are not shown
    #[arg(short = 'c', long, value_name = "COUNT", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=MAX_DATACOUNT as i64))]
    datacount: u32,
    /// JSON output: one object per write
    #[arg(short = 'j', long)]
    json: bool,
    #[command(flatten)]
    verbose: common::cli::Verbose,
    /// The device: a path (/dev/tty0, /dev/console, /dev/pts/2) or a number N for /dev/pts/N
    device: String,
}

/// fentry and kprobe of tty_write see every write to the device (BCC's hook); the write system calls' tracepoints
/// serve where kernel functions cannot be traced.
pub const TOOL: common::tool::Tool = common::tool!(main, [Attach::Fentry, Attach::Kprobe, Attach::Tracepoint]);

fn main(argv: Vec<OsString>, host: Host) -> ExitCode {
    let args: Args = common::cli::parse(argv, &host);
    host.bpf_main(args.verbose, |signals| ttysnoop(args, signals))
}

/// The device's identity as the kernel sees it: inode number and the device of its file system (kernel dev_t).
struct Target {
    path: PathBuf,
    ino: u64,
    dev: u32,
}

fn ttysnoop(args: Args, signals: Signals) -> Result<()> {
    let target = find_device(&args.device)?;
    let ((skel, _links), mech) =
        load_first_working(TOOL.attach, args.verbose.on(), |mech| load_and_attach(&args, &target, mech))?;
    if args.verbose.on() {
        eprintln!("watching {} (inode {}, device {:#x}) ({mech})", target.path.display(), target.ino, target.dev);
    }
    let mut out = Output::new();
    let mut report = Report::new(args.json);
    if !args.noclear && !args.json {
        report::clear_screen(&mut out)?;
    }
    let bss = skel.maps.bss_data.as_deref().context("BPF object has no .bss")?;
    let stream = EventStream::new(&skel.maps.events, &bss.lost, "chunks of writes").also_dropped(
        &bss.inflight_full,
        "writes",
        "too many in progress",
    );
    stream.print(&signals, &mut out, args.json, |out, data| report.chunk(out, data))?;
    report.finish(&mut out)
}

/// BCC's rule: an argument starting with '/' is a path, anything else the number of a /dev/pts device.
fn device_path(arg: &str) -> PathBuf {
    if arg.starts_with('/') {
        PathBuf::from(arg)
    } else {
        PathBuf::from(format!("/dev/pts/{arg}"))
    }
}

fn find_device(arg: &str) -> Result<Target> {
    let path = device_path(arg);
    let meta = std::fs::metadata(&path).with_context(|| format!("{}", path.display()))?;
    if !meta.file_type().is_char_device() || !is_tty_device(meta.rdev()) {
        bail!("{}: not a tty or pts device", path.display());
    }
    Ok(Target { path, ino: meta.ino(), dev: kernel_dev(meta.dev()) })
}

/// The major and minor numbers of a dev_t as stat() gives it (glibc's encoding).
fn major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// The kernel's own dev_t (super_block.s_dev): 12 bits of major above 20 bits of minor.
fn kernel_dev(dev: u64) -> u32 {
    let (major, minor) = major_minor(dev);
    ((major << 20) | (minor & 0xf_ffff)) as u32
}

/// True if character device `rdev` belongs to a tty driver: one of /proc/tty/drivers' major numbers and minor
/// ranges.
fn is_tty_device(rdev: u64) -> bool {
    let (major, minor) = major_minor(rdev);
    let Ok(drivers) = std::fs::read_to_string("/proc/tty/drivers") else {
        // No /proc/tty: take the character device for a tty.
        return true;
    };
    drivers.lines().any(|line| tty_driver_has(line, major, minor))
}

/// One line of /proc/tty/drivers (`name  /dev/path  major  minor-range  type`) covers device major:minor.
fn tty_driver_has(line: &str, major: u64, minor: u64) -> bool {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let n = fields.len();
    if n < 4 || fields[n - 3].parse::<u64>().ok() != Some(major) {
        return false;
    }
    let range = fields[n - 2];
    let (low, high) = range.split_once('-').unwrap_or((range, range));
    matches!((low.parse::<u64>(), high.parse::<u64>()), (Ok(low), Ok(high)) if (low..=high).contains(&minor))
}

/// Opens the BPF object, sets the device and sizes, keeps the programs of one mechanism (and of tty_write's form
/// on this kernel), loads and attaches them.
fn load_and_attach(args: &Args, target: &Target, mech: Attach) -> Result<(BpfSkel<'static>, Links)> {
    let mut open = open_skeleton::<BpfSkelBuilder>()?;
    let ro = rodata(&mut open.maps.rodata_data)?;
    ro.target_ino = target.ino;
    ro.target_dev = target.dev;
    ro.datasize = args.datasize;
    ro.datacount = args.datacount;
    autoload_by_section(open.open_object_mut(), mech);
    // tty_write(file, buf, count, ppos) before 5.11, tty_write(iocb, from) since.
    let old_form = matches!(mech, Attach::Fentry | Attach::Kprobe)
        && common::probe::kfunc::kernel_params("tty_write").map(|p| p.len()) == Some(4);
    let p = &mut open.progs;
    if matches!(mech, Attach::Fentry | Attach::Kprobe) {
        let (fentry, kprobe) = (mech == Attach::Fentry, mech == Attach::Kprobe);
        p.tty_write_fentry.set_autoload(fentry && !old_form);
        p.console_write_fentry.set_autoload(fentry && !old_form);
        p.tty_write_old_fentry.set_autoload(fentry && old_form);
        p.console_write_old_fentry.set_autoload(fentry && old_form);
        p.tty_write_kprobe.set_autoload(kprobe && !old_form);
        p.console_write_kprobe.set_autoload(kprobe && !old_form);
        p.tty_write_old_kprobe.set_autoload(kprobe && old_form);
        p.console_write_old_kprobe.set_autoload(kprobe && old_form);
    }
    let skel = open.load().with_context(|| format!("loading the BPF program ({mech})"))?;
    let p = &skel.progs;
    let links = match (mech, old_form) {
        (Attach::Fentry, false) => vec![
            p.tty_write_fentry.attach().context("attaching to tty_write (fentry)")?,
            p.console_write_fentry.attach().context("attaching to redirected_tty_write (fentry)")?,
        ],
        (Attach::Fentry, true) => vec![
            p.tty_write_old_fentry.attach().context("attaching to tty_write (fentry)")?,
            p.console_write_old_fentry.attach().context("attaching to redirected_tty_write (fentry)")?,
        ],
        (Attach::Kprobe, false) => vec![
            p.tty_write_kprobe.attach_kprobe(false, "tty_write").context("kprobe tty_write")?,
            p.console_write_kprobe
                .attach_kprobe(false, "redirected_tty_write")
                .context("kprobe redirected_tty_write")?,
        ],
        (Attach::Kprobe, true) => vec![
            p.tty_write_old_kprobe.attach_kprobe(false, "tty_write").context("kprobe tty_write")?,
            p.console_write_old_kprobe
                .attach_kprobe(false, "redirected_tty_write")
                .context("kprobe redirected_tty_write")?,
        ],
        _ => vec![
            // The exits first, so that no write is kept at its start with nobody to take it.
            attach_tracepoint(&p.write_exit, "syscalls", "sys_exit_write", Attach::Tracepoint)?,
            attach_tracepoint(&p.writev_exit, "syscalls", "sys_exit_writev", Attach::Tracepoint)?,
            attach_tracepoint(&p.pwritev2_exit, "syscalls", "sys_exit_pwritev2", Attach::Tracepoint)?,
            attach_tracepoint(&p.write_enter, "syscalls", "sys_enter_write", Attach::Tracepoint)?,
            attach_tracepoint(&p.writev_enter, "syscalls", "sys_enter_writev", Attach::Tracepoint)?,
            attach_tracepoint(&p.pwritev2_enter, "syscalls", "sys_enter_pwritev2", Attach::Tracepoint)?,
        ],
    };
    Ok((skel, links.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_name_pts_devices() {
        assert_eq!(device_path("2"), PathBuf::from("/dev/pts/2"));
        assert_eq!(device_path("/dev/tty0"), PathBuf::from("/dev/tty0"));
    }

    #[test]
    fn device_numbers_are_recoded_for_the_kernel() {
        // 136:5 in glibc's encoding, and a minor above 255 (pts 300).
        assert_eq!(major_minor(0x8805), (136, 5));
        assert_eq!(kernel_dev(0x8805), (136 << 20) | 5);
        assert_eq!(major_minor((1 << 12 << 8) | 0x882c), (136, 300));
    }

    #[test]
    fn tty_drivers_lines() {
        assert!(tty_driver_has("pty_slave            /dev/pts      136 0-1048575 pty:slave", 136, 7));
        assert!(tty_driver_has("/dev/console         /dev/console    5       1 system:console", 5, 1));
        assert!(!tty_driver_has("/dev/console         /dev/console    5       1 system:console", 5, 2));
        assert!(!tty_driver_has("serial               /dev/ttyS       4      64 serial", 1, 3));
    }
}
