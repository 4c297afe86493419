// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Kernel function parameters from the kernel's BTF: names and C types by position, so that a kernel function
//! spec can name its arguments without a signature (`p::vfs_write():size_t:count`).

use libbpf_rs::btf::types::{Func, FuncProto, Int, IntEncoding};
use libbpf_rs::btf::{Btf, BtfKind, BtfType, TypeId};

use super::ctype::CType;

/// A kernel function's parameter: its name, its C type, and its type in the kernel's BTF (for members).
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub ctype: CType,
    pub btf: TypeId,
}

/// The parameters of kernel function `name`, in order, if the kernel's BTF describes it. A parameter whose type
/// is not an integer, enum or pointer (a struct passed by value) is typed as an unsigned 64-bit value.
pub fn kernel_params(name: &str) -> Option<Vec<Param>> {
    let btf = Btf::from_vmlinux().ok()?;
    let func: Func<'_> = btf.type_by_name(name)?;
    let proto = FuncProto::try_from(func.next_type()?.skip_mods_and_typedefs()).ok()?;
    let params = proto
        .iter()
        .map(|p| {
            let name = p.name.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let ctype = btf.type_by_id::<BtfType<'_>>(p.ty).map_or(CType::U64, |t| ctype_of(&t));
            Param { name, ctype, btf: p.ty }
        })
        .collect();
    Some(params)
}

/// A BTF pointer type to struct `name` (`task_struct` for `$task`), if the kernel's BTF has one.
pub fn named_pointer_type(name: &str) -> Option<TypeId> {
    let btf = Btf::from_vmlinux().ok()?;
    let target = btf.type_by_name::<BtfType<'_>>(name)?.type_id();
    let mut id = 1u32;
    while let Some(t) = btf.type_by_id::<BtfType<'_>>(TypeId::from(id)) {
        if t.kind() == BtfKind::Ptr && t.next_type().is_some_and(|p| p.type_id() == target) {
            return Some(t.type_id());
        }
        id += 1;
    }
    None
}

/// The return type of kernel function `name` (its C type and BTF type), if the kernel's BTF describes it and it
/// returns a value.
pub fn kernel_return(name: &str) -> Option<(CType, TypeId)> {
    let btf = Btf::from_vmlinux().ok()?;
    let func: Func<'_> = btf.type_by_name(name)?;
    let proto = FuncProto::try_from(func.next_type()?.skip_mods_and_typedefs()).ok()?;
    let ret = proto.next_type()?;
    Some((ctype_of(&ret), ret.type_id()))
}

/// The number of context slots of kernel function `name`'s arguments for an fentry or fexit program (the fexit
/// return value comes after them), if its BTF describes it and every argument fits one 64-bit slot (an integer,
/// enum or pointer: a struct passed by value, or a variadic function, cannot take fentry here).
pub fn kernel_arg_slots(name: &str) -> Option<u32> {
    let btf = Btf::from_vmlinux().ok()?;
    let func: Func<'_> = btf.type_by_name(name)?;
    let proto = FuncProto::try_from(func.next_type()?.skip_mods_and_typedefs()).ok()?;
    let mut slots = 0;
    for p in proto.iter() {
        let t = btf.type_by_id::<BtfType<'_>>(p.ty)?.skip_mods_and_typedefs();
        let fits = match t.kind() {
            BtfKind::Int => Int::try_from(t).is_ok_and(|i| i.bits <= 64),
            BtfKind::Enum | BtfKind::Ptr => true,
            _ => false,
        };
        if !fits {
            return None;
        }
        slots += 1;
    }
    Some(slots)
}

/// The C type of a BTF integer, enum or pointer (`char *` is a string); anything else as an unsigned 64-bit value.
pub(crate) fn ctype_of(t: &BtfType<'_>) -> CType {
    let t = t.skip_mods_and_typedefs();
    match t.kind() {
        BtfKind::Int => match Int::try_from(t) {
            Ok(i) => CType {
                size: (u32::from(i.bits) / 8).clamp(1, 8),
                signed: matches!(i.encoding, IntEncoding::Signed),
                string: false,
            },
            Err(_) => CType::U64,
        },
        BtfKind::Enum => CType::U32,
        BtfKind::Enum64 => CType::U64,
        BtfKind::Ptr => {
            let pointee = t.next_type().map(|p| p.skip_mods_and_typedefs());
            let is_char = pointee.as_ref().is_some_and(|p| {
                Int::try_from(*p).is_ok_and(|i| {
                    i.bits == 8 && matches!(i.encoding, IntEncoding::Char | IntEncoding::Signed | IntEncoding::None)
                }) && p.name().is_some_and(|n| n.to_string_lossy().contains("char"))
            });
            if is_char {
                CType::STRING
            } else {
                CType::U64
            }
        }
        _ => CType::U64,
    }
}

#[cfg(test)]
mod tests {
    use super::kernel_arg_slots;

    #[test]
    fn argument_slots_from_btf() {
        // vfs_write(struct file *, const char __user *, size_t, loff_t *): four slots; fexit's return value is the
        // fifth.
        assert_eq!(kernel_arg_slots("vfs_write"), Some(4));
        assert_eq!(kernel_arg_slots("no_such_kernel_function_here"), None);
    }
}
