// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Socket addresses as BPF programs hand them over: an address family number and 16 raw bytes.
//!
//! Network tools copy `skc_rcv_saddr`/`skc_daddr` (IPv4, in the first 4 bytes) or the IPv6 addresses of a socket
//! into a fixed 16-byte field next to the socket's `AF_INET`/`AF_INET6` family. [`Family`] names the family (and
//! gives the `4`/`6` of BCC's `IP` column) and [`ip_addr`] turns the bytes into an [`IpAddr`], whose `Display`
//! prints what BCC's `inet_ntop` does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `AF_INET` and `AF_INET6` as the kernel numbers them.
pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;

/// An IP address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The family of the kernel's `AF_*` number, if it is an IP family.
    pub fn from_af(af: u16) -> Option<Family> {
        match af {
            AF_INET => Some(Family::V4),
            AF_INET6 => Some(Family::V6),
            _ => None,
        }
    }

    /// The kernel's `AF_*` number.
    pub fn af(self) -> u16 {
        match self {
            Family::V4 => AF_INET,
            Family::V6 => AF_INET6,
        }
    }

    /// `"ipv4"` or `"ipv6"`: the `family` field of every network tool's JSON records.
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }

    /// `4` or `6`, as in BCC's `IP` column.
    pub fn version(self) -> u8 {
        match self {
            Family::V4 => 4,
            Family::V6 => 6,
        }
    }
}

/// The address in `raw` (network byte order; IPv4 in the first 4 bytes) for family `af`.
pub fn ip_addr(af: u16, raw: &[u8; 16]) -> Option<IpAddr> {
    match Family::from_af(af)? {
        Family::V4 => Some(IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))),
        Family::V6 => Some(IpAddr::V6(Ipv6Addr::from(*raw))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_print_like_inet_ntop() {
        let mut raw = [0u8; 16];
        raw[..4].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(ip_addr(AF_INET, &raw).unwrap().to_string(), "127.0.0.1");
        let mut raw = [0u8; 16];
        raw[15] = 1;
        assert_eq!(ip_addr(AF_INET6, &raw).unwrap().to_string(), "::1");
        let mapped: [u8; 16] = Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped().octets();
        assert_eq!(ip_addr(AF_INET6, &mapped).unwrap().to_string(), "::ffff:10.1.2.3");
        assert_eq!(ip_addr(1, &raw), None);
    }

    #[test]
    fn families() {
        assert_eq!(Family::from_af(10), Some(Family::V6));
        assert_eq!(Family::V4.af(), AF_INET);
        assert_eq!(Family::V6.version(), 6);
        assert_eq!(Family::from_af(0), None);
        assert_eq!(Family::V4.name(), "ipv4");
    }
}
