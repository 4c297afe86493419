// SPDX-License-Identifier: Apache-2.0 OR MIT
//! ksnoop's function specifications, `name` or `name(value, value...)`, resolved against the kernel's BTF.
//!
//! A value is an argument (`skb`), the return value (`return`) or a member of the struct an argument points to
//! (`skb->len`), with an optional comparison with an integer (`skb->len > 128`: `==`, `!=`, `<`, `<=`, `>`, `>=`).
//! Without a list, every argument (the first five, those a kprobe can read) and the return value are traced.
//! A pointer's value is what it points to; an integer's, itself. Anything else is a [`SpecError`] (exit 2).

use libbpf_rs::btf::types::{Composite, Func, FuncProto, Int, IntEncoding, MemberAttr};
use libbpf_rs::btf::{Btf, BtfKind, BtfType, TypeId};
use libbpf_rs::AsRawLibbpf;

use crate::bpf::consts::{MAX_ARGS, MAX_VALUES};

/// The base of the return value (BASE_RETURN) and the most bytes copied of one value (MAX_DATA).
pub const BASE_RETURN: u32 = crate::bpf::consts::BASE_RETURN as u32;
const MAX_DATA: u32 = crate::bpf::consts::MAX_DATA as u32;

pub use common::probe::expr::CmpOp as Op;
use common::probe::{SpecError, SpecResult};

macro_rules! spec_err {
    ($($arg:tt)*) => { SpecError(format!($($arg)*)) };
}

/// The name of the return value in a specification (a C keyword, so no argument can have it).
pub const RETURN: &str = "return";

/// The constant the BPF side knows a comparison by (PRED_*).
pub fn pred_code(op: Op) -> u8 {
    use crate::bpf::consts::*;
    (match op {
        Op::Eq => PRED_EQ,
        Op::Ne => PRED_NE,
        Op::Lt => PRED_LT,
        Op::Le => PRED_LE,
        Op::Gt => PRED_GT,
        Op::Ge => PRED_GE,
    }) as u8
}

/// One traced value of a function, resolved.
#[derive(Debug, Clone)]
pub struct Value {
    /// As written (`skb->len`), or the argument's name.
    pub name: String,
    /// The argument it comes from (0-based), or BASE_RETURN.
    pub base: u32,
    /// What a pointer points to (or the value itself, for an integer): its type, as btf_dump prints it.
    pub type_id: u32,
    /// The value is a pointer: the record holds what it points to.
    pub ptr: bool,
    /// A member of the struct the argument points to, at this byte offset.
    pub member: Option<u32>,
    /// The size of `type_id` (bytes; 0 when nothing can be copied: void, a function).
    pub size: u32,
    /// The optional comparison, with the constant as the BPF side compares it.
    pub pred: Option<(Op, i64)>,
    /// The compared width (bytes) and signedness.
    pub pred_width: (u8, bool),
}

impl Value {
    pub fn at_entry(&self) -> bool {
        self.base != BASE_RETURN
    }

    /// Bytes copied into a record.
    pub fn copied(&self) -> u32 {
        self.size.min(MAX_DATA)
    }
}

/// A function to trace, resolved.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    /// Its arity in BTF (fentry's context slots), and whether every argument fits one slot (fentry can take it).
    pub nr_args: u32,
    pub fentry_ok: bool,
    /// The declaration, as `ksnoop info` prints it.
    pub declaration: String,
    pub values: Vec<Value>,
}

impl Function {
    /// Comparisons over both entry and return values: entries are held until the return decides.
    pub fn hold(&self) -> bool {
        self.values.iter().any(|v| v.pred.is_some())
            && self.values.iter().any(Value::at_entry)
            && self.values.iter().any(|v| !v.at_entry())
    }
}

/// The kernel's BTF, with what ksnoop asks of it.
pub struct Types {
    pub btf: Btf<'static>,
}

/// A parameter of a function prototype: name and type.
struct Param {
    name: String,
    ty: u32,
}

impl Types {
    pub fn load() -> anyhow::Result<Types> {
        use anyhow::Context;
        let btf = Btf::from_vmlinux().context("reading the kernel's BTF (/sys/kernel/btf/vmlinux)")?;
        Ok(Types { btf })
    }

    fn ty(&self, id: u32) -> Option<BtfType<'_>> {
        self.btf.type_by_id::<BtfType<'_>>(TypeId::from(id))
    }

    /// Skips const, volatile, restrict and type tags (not typedefs: btf_dump prints their names).
    fn skip_mods(&self, id: u32) -> u32 {
        let mut id = id;
        while let Some(t) = self.ty(id) {
            if !t.is_mod() {
                break;
            }
            match t.next_type() {
                Some(n) => id = n.type_id().into(),
                None => return 0,
            }
        }
        id
    }

    /// The size of type `id` in bytes (0 for void, functions and anything without a size).
    pub fn size(&self, id: u32) -> u32 {
        if id == 0 {
            return 0;
        }
        // SAFETY: the pointer is the live BTF object this struct owns.
        let n = unsafe { libbpf_rs::libbpf_sys::btf__resolve_size(self.btf.as_libbpf_object().as_ptr(), id) };
        u32::try_from(n).unwrap_or(0)
    }

    /// Width and signedness of an integer-like type (through typedefs): enums and pointers are unsigned.
    fn width(&self, id: u32) -> (u8, bool) {
        let Some(t) = self.ty(id).map(|t| t.skip_mods_and_typedefs()) else { return (8, false) };
        match t.kind() {
            BtfKind::Int => match Int::try_from(t) {
                Ok(i) => ((i.bits / 8).clamp(1, 8), matches!(i.encoding, IntEncoding::Signed)),
                Err(_) => (8, false),
            },
            BtfKind::Enum | BtfKind::Enum64 => ((self.size(t.type_id().into()) as u8).clamp(1, 8), false),
            _ => (8, false),
        }
    }

    /// Whether `id` (through typedefs) is signed, for JSON's integers.
    pub fn signed(&self, id: u32) -> bool {
        self.width(id).1
    }

    /// Whether `id` (through typedefs) is an integer, an enum or a pointer: a number in JSON.
    pub fn is_number(&self, id: u32) -> bool {
        self.ty(id)
            .map(|t| t.skip_mods_and_typedefs())
            .is_some_and(|t| matches!(t.kind(), BtfKind::Int | BtfKind::Enum | BtfKind::Enum64 | BtfKind::Ptr))
    }

    /// The function's parameters and return type, if BTF has it as a function.
    fn signature(&self, name: &str) -> Option<(Vec<Param>, u32)> {
        let func: Func<'_> = self.btf.type_by_name(name)?;
        let proto_t = func.next_type()?;
        let ret = self.btf.type_by_id::<BtfType<'_>>(proto_t.type_id())?.next_type().map_or(0, |t| t.type_id().into());
        let proto = FuncProto::try_from(proto_t).ok()?;
        let params = proto
            .iter()
            .map(|p| Param {
                name: p.name.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                ty: p.ty.into(),
            })
            .collect();
        Some((params, ret))
    }

    /// A value of type `id` named `name` (an argument or the return value): a pointer is followed one level.
    fn value(&self, name: &str, base: u32, id: u32) -> Value {
        let id = self.skip_mods(id);
        let (type_id, ptr) = match self.ty(id) {
            Some(t) if t.kind() == BtfKind::Ptr => {
                (self.skip_mods(t.next_type().map_or(0, |n| n.type_id().into())), true)
            }
            _ => (id, false),
        };
        let size = match self.ty(type_id).map(|t| t.skip_mods_and_typedefs().kind()) {
            Some(BtfKind::FuncProto) | Some(BtfKind::Fwd) | None => 0,
            _ => self.size(type_id),
        };
        let pred_width = if ptr { (8, false) } else { self.width(type_id) };
        Value { name: name.to_owned(), base, type_id, ptr, member: None, size, pred: None, pred_width }
    }

    /// The C name of type `id`, as ksnoop writes it (`struct sk_buff `, `int `: with the space before a name).
    pub fn type_name(&self, id: u32) -> String {
        if id == 0 {
            return "void ".into();
        }
        let Some(t) = self.ty(id) else { return "? ".into() };
        let name = || t.name().map(|n| n.to_string_lossy().into_owned()).filter(|n| !n.is_empty());
        match t.kind() {
            BtfKind::Const | BtfKind::Volatile | BtfKind::Restrict | BtfKind::TypeTag => {
                self.type_name(t.next_type().map_or(0, |n| n.type_id().into()))
            }
            BtfKind::Ptr => {
                let inner = self.type_name(t.next_type().map_or(0, |n| n.type_id().into()));
                format!("{inner}*")
            }
            BtfKind::Array => {
                let elem = libbpf_rs::btf::types::Array::try_from(t).map(|a| a.contained_type().type_id().into());
                format!("{}[]", self.type_name(elem.unwrap_or(0)).trim_end())
            }
            BtfKind::Struct => format!("struct {} ", name().unwrap_or_else(|| "{...}".into())),
            BtfKind::Union => format!("union {} ", name().unwrap_or_else(|| "{...}".into())),
            BtfKind::Enum | BtfKind::Enum64 => format!("enum {} ", name().unwrap_or_else(|| "{...}".into())),
            BtfKind::FuncProto => "void (*)() ".into(),
            _ => format!("{} ", name().unwrap_or_else(|| "?".into())),
        }
    }

    /// `type name` of a value as `info` prints it: `struct sk_buff *skb`, `int len` (the return value unnamed).
    pub fn declare(&self, v: &Value) -> String {
        let mut s = self.type_name(v.type_id);
        if v.ptr {
            s.push('*');
        }
        if v.name != RETURN {
            s.push_str(&v.name);
        }
        s
    }

    /// Resolves one function specification (`name` or `name(values)`).
    pub fn function(&self, spec: &str) -> SpecResult<Function> {
        let text: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
        let (name, list) = match text.split_once('(') {
            Some((name, rest)) => {
                let list = rest.strip_suffix(')').ok_or_else(|| spec_err!("'{spec}': no ')' at the end"))?;
                (name, Some(list))
            }
            None => (text.as_str(), None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            return Err(spec_err!("'{spec}' is not a function specification: name or name(arg, ...)"));
        }
        let (params, ret) =
            self.signature(name).ok_or_else(|| spec_err!("no kernel function '{name}' in the kernel's BTF"))?;
        let nr_args = params.len() as u32;
        let fentry_ok = common::probe::kfunc::kernel_arg_slots(name).is_some();
        let args: Vec<Value> =
            params.iter().take(MAX_ARGS).enumerate().map(|(i, p)| self.value(&p.name, i as u32, p.ty)).collect();
        let retval = self.value(RETURN, BASE_RETURN, ret);
        let mut declaration = format!("{}{name}(", self.declare(&retval));
        let all: Vec<Value> = params.iter().enumerate().map(|(i, p)| self.value(&p.name, i as u32, p.ty)).collect();
        declaration.push_str(&all.iter().map(|v| self.declare(v)).collect::<Vec<_>>().join(", "));
        if params.len() > MAX_ARGS {
            declaration.push_str(&format!(" /* and {} more args that are not traceable */", params.len() - MAX_ARGS));
        }
        declaration.push_str(");");

        let values = match list {
            None | Some("") => {
                let mut values = args.clone();
                if ret != 0 {
                    values.push(retval.clone());
                }
                values
            }
            Some(list) => {
                let mut values = Vec::new();
                for item in list.split(',') {
                    if values.len() == MAX_VALUES {
                        return Err(spec_err!("'{spec}': at most {MAX_VALUES} values a function"));
                    }
                    values.push(self.item(name, item, &args, &retval)?);
                }
                values
            }
        };
        Ok(Function { name: name.to_owned(), nr_args, fentry_ok, declaration, values })
    }

    /// One value of a list: `arg`, `arg->member`, `return`, each with an optional comparison.
    fn item(&self, func: &str, item: &str, args: &[Value], retval: &Value) -> SpecResult<Value> {
        // The comparison starts at the first of = ! < > that is not the '>' of '->'.
        let b = item.as_bytes();
        let split = (0..b.len())
            .find(|&i| matches!(b[i], b'=' | b'!' | b'<') || (b[i] == b'>' && (i == 0 || b[i - 1] != b'-')))
            .unwrap_or(b.len());
        let (what, pred) = item.split_at(split);
        let (arg, member) = match what.split_once("->") {
            Some((a, m)) => (a, Some(m)),
            None => (what, None),
        };
        let named = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !named(arg) || member.is_some_and(|m| !named(m)) {
            return Err(spec_err!("'{item}' is not a value: arg, arg->member or return, then maybe a comparison"));
        }
        let base = if arg == RETURN {
            if retval.type_id == 0 && !retval.ptr {
                return Err(spec_err!("{func} returns nothing (void)"));
            }
            retval
        } else {
            args.iter().find(|a| a.name == arg).ok_or_else(|| {
                let names: Vec<&str> = args.iter().map(|a| a.name.as_str()).collect();
                spec_err!("{func} has no argument '{arg}' (it has: {}, return)", names.join(", "))
            })?
        };
        let mut v = match member {
            None => base.clone(),
            Some(m) => self.member(func, base, m)?,
        };
        v.name = what.to_owned();
        if !pred.is_empty() {
            v.pred = Some(parse_pred(item, pred)?);
            if !v.ptr && (v.size == 0 || v.size > 8) {
                return Err(spec_err!("'{what}' is not an integer or a pointer: it cannot be compared"));
            }
        }
        Ok(v)
    }

    /// Member `name` of the struct or union `base` points to (looking into unnamed structs and unions).
    fn member(&self, func: &str, base: &Value, name: &str) -> SpecResult<Value> {
        let t = self.ty(base.type_id).map(|t| t.skip_mods_and_typedefs());
        let composite = t.filter(|_| base.ptr).and_then(|t| Composite::try_from(t).ok());
        let Some(c) = composite else {
            return Err(spec_err!("'{}' of {func} is not a pointer to a struct or union", base.name));
        };
        let (offset_bits, ty) = self
            .find_member(&c, name)
            .ok_or_else(|| spec_err!("'{}' has no member '{name}'", self.type_name(base.type_id).trim_end()))?;
        let Some(offset_bits) = offset_bits else {
            return Err(spec_err!("member '{name}' is a bitfield, which ksnoop cannot read"));
        };
        let mut v = self.value(name, base.base, ty);
        v.member = Some(offset_bits / 8);
        Ok(v)
    }

    /// The bit offset (None for a bitfield) and type of member `name`, searching unnamed members too.
    fn find_member(&self, c: &Composite<'_>, name: &str) -> Option<(Option<u32>, u32)> {
        for m in c.iter() {
            let offset = match m.attr {
                MemberAttr::Normal { offset } => Some(offset),
                MemberAttr::BitField { .. } => None,
            };
            let mname = m.name.map(|n| n.to_string_lossy()).unwrap_or_default();
            let ty: u32 = m.ty.into();
            if mname == name {
                return Some((offset, ty));
            }
            if mname.is_empty() {
                let inner = self.ty(ty).map(|t| t.skip_mods_and_typedefs()).and_then(|t| Composite::try_from(t).ok());
                if let Some(found) = inner.and_then(|i| self.find_member(&i, name)) {
                    return Some((found.0.and_then(|o| offset.map(|base| base + o)), found.1));
                }
            }
        }
        None
    }
}

/// A comparison: an operator and a C integer (decimal, 0x hexadecimal, 0 octal, negative).
fn parse_pred(item: &str, pred: &str) -> SpecResult<(Op, i64)> {
    let (op, rest) = [("==", Op::Eq), ("!=", Op::Ne), ("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)]
        .into_iter()
        .find_map(|(s, op)| pred.strip_prefix(s).map(|r| (op, r)))
        .ok_or_else(|| spec_err!("'{item}': the comparison must be ==, !=, <, <=, > or >= and an integer"))?;
    parse_int(rest).map(|n| (op, n)).ok_or_else(|| spec_err!("'{item}': '{rest}' is not an integer"))
}

/// A C integer constant: decimal, 0x hexadecimal or 0 octal, maybe negative; up to 64 bits (as strtoul takes them).
fn parse_int(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let n = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<u64>().ok()?
    };
    let n = n as i64;
    Some(if neg { n.checked_neg()? } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_comparisons() {
        assert_eq!(parse_int("1234"), Some(1234));
        assert_eq!(parse_int("0x10"), Some(16));
        assert_eq!(parse_int("010"), Some(8));
        assert_eq!(parse_int("-1"), Some(-1));
        assert_eq!(parse_int("0"), Some(0));
        assert_eq!(parse_int("0xffffffffffffffff"), Some(-1));
        assert_eq!(parse_int("x"), None);
        assert_eq!(parse_pred("a>=3", ">=3").unwrap(), (Op::Ge, 3));
        assert_eq!(parse_pred("a!=0", "!=0").unwrap(), (Op::Ne, 0));
        assert!(parse_pred("a=3", "=3").is_err());
    }

    #[test]
    fn vfs_write_from_btf() {
        let types = Types::load().unwrap();
        let f = types.function("vfs_write").unwrap();
        assert_eq!(f.nr_args, 4);
        assert_eq!(f.values.len(), 5);
        assert_eq!(f.declaration, "ssize_t vfs_write(struct file *file, char *buf, size_t count, loff_t *pos);");
        let f = types.function("vfs_write(count == 1234, file->f_pos, return)").unwrap();
        assert!(f.hold());
        assert_eq!(f.values[0].pred, Some((Op::Eq, 1234)));
        assert_eq!(f.values[0].pred_width, (8, false));
        assert!(f.values[1].member.is_some() && !f.values[1].ptr);
        assert!(types.function("vfs_write(nope)").is_err());
        assert!(types.function("no_such_function_here").is_err());
        assert!(types.function("vfs_write(count =! 1)").is_err());
    }
}
