// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Struct members through pointers (`ts->tv_nsec`, `args->rqtp->tv_nsec`, `file->f_path.dentry->d_iname`), laid
//! out by the kernel's BTF: the offsets to read at, in order, and the type of what is reached. The start is a BTF
//! type (a kernel function's parameter or return value) or a C type as written (a tracepoint field's type in its
//! format file, a parameter of a user function's signature); a struct named in C is looked up by name in the
//! kernel's BTF, so a user program's `struct timespec *` is read with the kernel's layout of the same name (or of
//! `__kernel_timespec`, which the user ABI's `timespec` is on 64-bit kernels).

use libbpf_rs::btf::types::{Array, Composite, Int, MemberAttr};
use libbpf_rs::btf::{Btf, BtfKind, BtfType, TypeId};

use super::ctype::CType;
use super::SpecResult;

/// Where a member path starts.
#[derive(Debug, Clone, Copy)]
pub enum Start<'a> {
    /// A BTF type of the kernel's BTF.
    Btf(TypeId),
    /// A C type as written: `struct __kernel_timespec *`, `const struct timespec *`.
    C(&'a str),
}

/// A member path resolved: the offsets of the reads after the start value (all but the last read 8 bytes: a
/// pointer), and what the last gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked {
    pub offsets: Vec<i32>,
    /// The last offset is added, not read: the member is a `char` array, its string is at that address.
    pub address: bool,
    /// The member's type: an integer, a pointer, or a string (`char *` or `char[]`).
    pub ctype: CType,
}

/// The user ABI's struct names with no kernel struct of the same name, and the kernel struct with their layout.
const USER_ALIASES: [(&str, &str); 2] = [("timespec", "__kernel_timespec"), ("timeval", "__kernel_old_timeval")];

/// Follows `steps` (`(true, "f")` for `->f`, `(false, "f")` for `.f`) from a value of type `start`.
pub fn walk(start: Start<'_>, steps: &[(bool, String)], path: &str) -> SpecResult<Walked> {
    let Ok(btf) = Btf::from_vmlinux() else {
        spec_bail!("'{path}': struct members need the kernel's BTF (/sys/kernel/btf/vmlinux)");
    };
    // What the value reached so far is: a pointer held in the value (`pointee`), or a thing in memory at
    // `pending` bytes into what the value points to.
    let mut pointee: Option<BtfType<'_>> = match start {
        Start::Btf(id) => match btf.type_by_id::<BtfType<'_>>(id).map(|t| t.skip_mods_and_typedefs()) {
            Some(t) if t.kind() == BtfKind::Ptr => t.next_type().map(|n| n.skip_mods_and_typedefs()),
            Some(_) => spec_bail!("'{path}': '->' follows something that is not a pointer"),
            None => spec_bail!("'{path}': no such type in the kernel's BTF"),
        },
        Start::C(text) => Some(c_struct(&btf, text, path)?),
    };
    let mut offsets: Vec<i32> = Vec::new();
    let mut pending: Option<(i64, BtfType<'_>)> = None;
    for (arrow, member) in steps {
        if *arrow {
            if let Some((off, t)) = pending.take() {
                // A pointer in memory: read it, and go on from what it points to.
                let t = t.skip_mods_and_typedefs();
                if t.kind() != BtfKind::Ptr {
                    spec_bail!("'{path}': '->{member}' follows something that is not a pointer");
                }
                offsets.push(off as i32);
                pointee = t.next_type().map(|n| n.skip_mods_and_typedefs());
            }
            let Some(target) = pointee.take() else {
                spec_bail!("'{path}': '->{member}' through a pointer of no known type (void *)");
            };
            pending = Some(member_of(&btf, target, member, path)?);
        } else {
            let Some((base, t)) = pending else {
                spec_bail!("'{path}': '.{member}' needs a struct in memory: use '->' on a pointer");
            };
            let (off, mty) = member_of(&btf, t.skip_mods_and_typedefs(), member, path)?;
            pending = Some((base + off, mty));
        }
    }
    let Some((last, ty)) = pending else { spec_bail!("'{path}': no member named") };
    let t = ty.skip_mods_and_typedefs();
    if let Ok(a) = Array::try_from(t) {
        let elem = a.contained_type().skip_mods_and_typedefs();
        if Int::try_from(elem).is_ok_and(|i| i.bits == 8) {
            offsets.push(last as i32);
            return Ok(Walked { offsets, address: true, ctype: CType::STRING });
        }
        spec_bail!("'{path}' is an array: only char arrays (strings) can be read");
    }
    let ctype = match t.kind() {
        BtfKind::Int | BtfKind::Enum | BtfKind::Enum64 | BtfKind::Ptr => super::kfunc::ctype_of(&t),
        BtfKind::Struct | BtfKind::Union => spec_bail!("'{path}' is a struct: name one of its members"),
        _ => spec_bail!("'{path}' is not an integer, a pointer or a string"),
    };
    offsets.push(last as i32);
    Ok(Walked { offsets, address: false, ctype })
}

/// The member `name` of struct or union `t` (also inside its anonymous members): its byte offset and type.
fn member_of<'b>(btf: &'b Btf<'_>, t: BtfType<'b>, name: &str, path: &str) -> SpecResult<(i64, BtfType<'b>)> {
    let Ok(comp) = Composite::try_from(t) else {
        spec_bail!("'{path}': '{name}' is looked up in something that is not a struct or union");
    };
    if let Some(found) = find_member(btf, comp, name, path)? {
        return Ok(found);
    }
    // include/net/sock.h spells struct sock's common fields as macros (`sk_dport` is `__sk_common.skc_dport`).
    if let Some(rest) = name.strip_prefix("sk_") {
        if let Some((common_off, common)) = find_member(btf, comp, "__sk_common", path)? {
            if let Ok(inner) = Composite::try_from(common.skip_mods_and_typedefs()) {
                if let Some((off, t)) = find_member(btf, inner, &format!("skc_{rest}"), path)? {
                    return Ok((common_off + off, t));
                }
            }
        }
    }
    let sname = t.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "(anonymous)".into());
    spec_bail!("'{path}': struct {sname} has no member '{name}'")
}

fn find_member<'b>(
    btf: &'b Btf<'_>,
    comp: Composite<'b>,
    name: &str,
    path: &str,
) -> SpecResult<Option<(i64, BtfType<'b>)>> {
    for m in comp.iter() {
        let offset_bits = match m.attr {
            MemberAttr::Normal { offset } => offset,
            MemberAttr::BitField { offset, size } => {
                if m.name.is_some_and(|n| n.to_string_lossy() == name) {
                    spec_bail!("'{path}': '{name}' is a bit field ({size} bits), which cannot be read here");
                }
                offset
            }
        };
        let Some(mty) = btf.type_by_id::<BtfType<'_>>(m.ty) else { continue };
        match m.name {
            Some(n) if n.to_string_lossy() == name => return Ok(Some((i64::from(offset_bits / 8), mty))),
            Some(n) if !n.is_empty() => continue,
            _ => {
                // An anonymous struct or union: its members are the outer one's.
                if let Ok(inner) = Composite::try_from(mty.skip_mods_and_typedefs()) {
                    if let Some((off, t)) = find_member(btf, inner, name, path)? {
                        return Ok(Some((i64::from(offset_bits / 8) + off, t)));
                    }
                }
            }
        }
    }
    Ok(None)
}

/// The struct a C pointer type names (`const struct timespec *`), as the kernel's BTF has it.
fn c_struct<'b>(btf: &'b Btf<'_>, text: &str, path: &str) -> SpecResult<BtfType<'b>> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == '*')
        .filter(|w| !w.is_empty() && !matches!(*w, "const" | "volatile" | "__user" | "restrict"))
        .collect();
    let name = match words.as_slice() {
        ["struct" | "union", name] => *name,
        _ => spec_bail!("'{path}': '{text}' is not a pointer to a struct, so it has no members"),
    };
    if text.matches('*').count() != 1 {
        spec_bail!("'{path}': '{text}' is not a pointer to a struct (use '->' on a struct pointer)");
    }
    let alias = USER_ALIASES.iter().find(|(user, _)| *user == name).map(|(_, kernel)| *kernel);
    for candidate in [Some(name), alias].into_iter().flatten() {
        if let Some(t) = btf.type_by_name::<BtfType<'_>>(candidate) {
            if matches!(t.kind(), BtfKind::Struct | BtfKind::Union) {
                return Ok(t);
            }
        }
    }
    spec_bail!("'{path}': struct {name} is not in the kernel's BTF, so its layout is unknown")
}
