// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The number of arguments of kernel functions, from the kernel's BTF: what funcslower's fentry and fexit programs
//! need to read the arguments and, after them, the return value.

use anyhow::{Context, Result};
use libbpf_rs::btf::types::{Func, FuncProto};
use libbpf_rs::btf::Btf;

/// The kernel's function prototypes.
pub struct FunctionArity {
    btf: Btf<'static>,
}

impl FunctionArity {
    /// Reads `/sys/kernel/btf/vmlinux`.
    pub fn load() -> Result<Self> {
        Ok(FunctionArity { btf: Btf::from_vmlinux().context("cannot read the kernel's BTF")? })
    }

    /// How many arguments kernel function `name` takes, or None if its BTF has no such function.
    pub fn arity(&self, name: &str) -> Option<usize> {
        let func: Func<'_> = self.btf.type_by_name(name)?;
        let proto = FuncProto::try_from(func.next_type()?.skip_mods_and_typedefs()).ok()?;
        Some(proto.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vfs_read_takes_four_arguments() {
        let Ok(arity) = FunctionArity::load() else { return };
        assert_eq!(arity.arity("vfs_read"), Some(4));
        assert_eq!(arity.arity("no_such_function_at_all_xyz"), None);
    }
}
