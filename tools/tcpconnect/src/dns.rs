// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `-d`: the name each connect's destination was looked up by, BCC's QUERY column.
//!
//! BCC reads DNS answers off UDP port 53 with kprobes; this tool probes the C library's `getaddrinfo()` instead
//! (a uprobe on entry and one on return, no kernel function needed), so names from `/etc/hosts` and any other
//! source the resolver uses count too. Each successful lookup sends its name and first addresses through the
//! connects' ring buffer, so it arrives before the connects made with it; [`Names`] keeps the last name of each
//! address, as BCC's cache does (10240 addresses, for a day), and [`Names::query`] words the column as BCC does.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use common::domain::net::ip_addr;
use common::output::name::Name;
use common::process::elf::ElfSymbols;
use common::process::procmaps;
use libbpf_rs::{Link, UprobeOpts};

use crate::bpf::types::lookup;
use crate::bpf::BpfSkel;

// SAFETY: a #[repr(C)] struct of integers and integer arrays; the BPF side zeroes it before filling it.
unsafe impl plain::Plain for lookup {}

/// Addresses whose name is kept (BCC's `DNS_CACHE_SIZE`).
const CAPACITY: usize = 10240;
/// How long a name is kept (BCC's `DEFAULT_TTL`, a day), in nanoseconds.
const TTL_NS: u64 = 86_400 * 1_000_000_000;
/// A connect this long after its lookup shows the delay after the name (BCC's `DELAY_DNS`, 100 ms).
const DELAY_NS: u64 = 100_000_000;

/// The C library whose `getaddrinfo()` is probed: the traced process's own with `-p`, else the system's.
pub fn libc(pid: Option<u32>) -> Result<PathBuf> {
    match pid {
        Some(pid) => procmaps::process_libc(pid),
        None => procmaps::system_libc(),
    }
}

/// The file offset of `getaddrinfo()` in `libc`.
pub fn getaddrinfo_offset(libc: &Path) -> Result<u64> {
    let symbols = ElfSymbols::read_named(libc, &["getaddrinfo"])?;
    let f = symbols.find("getaddrinfo").with_context(|| format!("{} has no getaddrinfo()", libc.display()))?;
    Ok(f.file_offset)
}

/// Attaches the return probe, then the entry probe (so that every entry recorded sees its return), to
/// `getaddrinfo()` at `offset` of `libc`, in every process.
pub fn attach(skel: &BpfSkel<'static>, libc: &Path, offset: u64) -> Result<Vec<Link>> {
    let mut links = Vec::new();
    for (prog, retprobe) in [(&skel.progs.getaddrinfo_return, true), (&skel.progs.getaddrinfo_entry, false)] {
        let opts = UprobeOpts { retprobe, ..Default::default() };
        let link = prog
            .attach_uprobe_with_opts(-1, libc, offset as usize, opts)
            .with_context(|| format!("attaching to getaddrinfo() in {}", libc.display()))?;
        links.push(link);
    }
    Ok(links)
}

/// The name last looked up for each address, and when.
#[derive(Debug, Default)]
pub struct Names {
    by_addr: HashMap<IpAddr, (String, u64)>,
}

impl Names {
    /// Keeps the name of every address of a lookup record; when full, the oldest address is forgotten. A
    /// numeric "name" (`getaddrinfo("10.0.0.1")`) was no lookup, and names nothing.
    pub fn learn(&mut self, data: &[u8]) {
        let l: lookup = common::attach::maps::from_bytes(data);
        let name = Name::from_c(&l.name);
        if name.text().parse::<IpAddr>().is_ok() {
            return;
        }
        // Whoever answers the lookup chooses the name: kept escaped, as every column shows it.
        let name = name.shown();
        let count = (l.count as usize).min(l.addrs.len());
        for a in &l.addrs[..count] {
            let Some(addr) = ip_addr(a.family, &a.addr) else { continue };
            if self.by_addr.len() >= CAPACITY && !self.by_addr.contains_key(&addr) {
                if let Some(oldest) = self.by_addr.iter().min_by_key(|(_, (_, ts))| *ts).map(|(a, _)| *a) {
                    self.by_addr.remove(&oldest);
                }
            }
            self.by_addr.insert(addr, (name.clone(), l.ts_ns));
        }
    }

    /// BCC's QUERY for a connect to `addr` at `ts_ns`: the name it was looked up by, with `(N.NNNms)` after it
    /// when the lookup was more than 100 ms earlier; else `localhost` for 127.0.0.1 and ::1, and `No DNS Query`.
    pub fn query(&self, addr: IpAddr, ts_ns: u64) -> String {
        let found = self.by_addr.get(&addr).filter(|(_, at)| ts_ns.saturating_sub(*at) <= TTL_NS);
        match found {
            Some((name, at)) => {
                let delay = ts_ns.saturating_sub(*at);
                if delay > DELAY_NS {
                    format!("{name} ({:.3}ms)", delay as f64 / 1e6)
                } else {
                    name.clone()
                }
            }
            None if addr.is_loopback() && is_bcc_localhost(addr) => "localhost".into(),
            None => "No DNS Query".into(),
        }
    }
}

/// The two addresses BCC names `localhost` without a lookup.
fn is_bcc_localhost(addr: IpAddr) -> bool {
    addr == IpAddr::from([127, 0, 0, 1]) || addr == IpAddr::from(std::net::Ipv6Addr::LOCALHOST)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, addrs: &[IpAddr], ts_ns: u64) -> Vec<u8> {
        let mut l = lookup { kind: crate::bpf::consts::RECORD_LOOKUP as u32, ts_ns, ..Default::default() };
        for (slot, addr) in l.addrs.iter_mut().zip(addrs) {
            match addr {
                IpAddr::V4(v4) => {
                    slot.family = common::domain::net::AF_INET;
                    slot.addr[..4].copy_from_slice(&v4.octets());
                }
                IpAddr::V6(v6) => {
                    slot.family = common::domain::net::AF_INET6;
                    slot.addr = v6.octets();
                }
            }
            l.count += 1;
        }
        l.name[..name.len()].copy_from_slice(&name.bytes().map(|b| b as _).collect::<Vec<_>>());
        // SAFETY: lookup is Plain.
        unsafe { plain::as_bytes(&l) }.to_vec()
    }

    #[test]
    fn queries_read_as_bcc_prints_them() {
        let a: IpAddr = "10.1.2.3".parse().unwrap();
        let b: IpAddr = "2001:db8::7".parse().unwrap();
        let mut names = Names::default();
        names.learn(&record("www.example.com", &[a, b], 1_000_000_000));
        assert_eq!(names.query(a, 1_050_000_000), "www.example.com");
        assert_eq!(names.query(b, 1_123_342_000), "www.example.com (123.342ms)");
        assert_eq!(names.query("10.9.9.9".parse().unwrap(), 0), "No DNS Query");
        assert_eq!(names.query("127.0.0.1".parse().unwrap(), 0), "localhost");
        assert_eq!(names.query("::1".parse().unwrap(), 0), "localhost");
        assert_eq!(names.query("127.0.0.2".parse().unwrap(), 0), "No DNS Query");
        // An address given by number was not looked up.
        names.learn(&record("10.9.9.9", &["10.9.9.9".parse().unwrap()], 1_000_000_000));
        assert_eq!(names.query("10.9.9.9".parse().unwrap(), 1_000_000_000), "No DNS Query");
        // A later lookup renames the address; a day later the name is forgotten.
        names.learn(&record("api.example.com", &[a], 2_000_000_000));
        assert_eq!(names.query(a, 2_000_000_000), "api.example.com");
        assert_eq!(names.query(a, 2_000_000_000 + TTL_NS + 1), "No DNS Query");
    }

    #[test]
    fn the_oldest_address_is_forgotten_when_full() {
        let mut names = Names::default();
        for i in 0..CAPACITY as u32 + 1 {
            let addr = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            names.learn(&record("n", &[addr], u64::from(i) + 1));
        }
        assert_eq!(names.by_addr.len(), CAPACITY);
        assert_eq!(names.query("10.0.0.0".parse().unwrap(), 10), "No DNS Query");
        assert_eq!(names.query("10.0.0.1".parse().unwrap(), 10), "n");
    }
}
