// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Enumerators of the kernel's anonymous enums, read from its BTF.
//!
//! Some kernel enums have no name (`enum { HI_SOFTIRQ = 0, TIMER_SOFTIRQ, ..., NR_SOFTIRQS };`), so
//! [`crate::attach::features::KernelBtf::enum_members`], which looks an enum up by name, cannot reach them.
//! [`enum_with_member`] finds such an enum by one of its enumerators instead.

use anyhow::{Context, Result};
use libbpf_rs::btf::types::{Enum, Enum64};
use libbpf_rs::btf::Btf;

/// The enumerators, as (name, value) in declaration order, of the kernel enum (named or not) that has an
/// enumerator called `member`; empty if no enum has one.
pub fn enum_with_member(member: &str) -> Result<Vec<(String, i64)>> {
    let btf = Btf::from_vmlinux().context("cannot read kernel BTF from /sys/kernel/btf/vmlinux")?;
    // Names are compared where they lie in the BTF; only the enum that has `member` is copied out.
    let has = |name: Option<&std::ffi::OsStr>| name.is_some_and(|n| n.as_encoded_bytes() == member.as_bytes());
    let named = |name: Option<&std::ffi::OsStr>, value: i64| Some((name?.to_str()?.to_string(), value));
    if let Some(e) = btf.type_by_kind::<Enum<'_>>().find(|e| e.iter().any(|m| has(m.name))) {
        return Ok(e.iter().filter_map(|m| named(m.name, m.value)).collect());
    }
    if let Some(e) = btf.type_by_kind::<Enum64<'_>>().find(|e| e.iter().any(|m| has(m.name))) {
        return Ok(e.iter().filter_map(|m| named(m.name, m.value as i64)).collect());
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_anonymous_softirq_enum() {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return;
        }
        let e = enum_with_member("NET_RX_SOFTIRQ").unwrap();
        assert!(e.iter().any(|(n, v)| n == "HI_SOFTIRQ" && *v == 0), "{e:?}");
        assert!(e.iter().any(|(n, _)| n == "NR_SOFTIRQS"), "{e:?}");
        assert!(enum_with_member("NO_SUCH_ENUMERATOR_ANYWHERE").unwrap().is_empty());
    }
}
