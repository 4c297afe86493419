// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A spec compiled into what the generic BPF program needs: the values to read (deduplicated), the values the
//! entry program saves for a return probe, and the expression program (a stack machine's instructions, see
//! `bpf/include/probe.bpf.h`) that computes the outputs and applies the predicate.
//!
//! Types follow C where a user would expect them to: integer constants are signed, an operation is unsigned when
//! one operand is an unsigned value of 4 bytes or more, and a comparison means the same whatever a format prints.
//! The return value of a kernel function has its type from BTF; a user function's is a signed 64-bit value, so
//! `retval < 0` finds its error returns (BCC reads it as an unsigned register, where `< 0` is never true); a cast
//! (`(int)retval`) narrows it.

use std::path::Path;

use super::ctype::CType;
use super::expr::{self, BinOp, Expr as Ast, UnOp};
use super::fields::{Fetch, Resolved, Resolver, Source, StrKind};
use super::spec::{ProbeType, Spec};
use super::SpecResult;

/// The BPF program's array sizes (each tool's copy of probe.h's limits).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Values read per event (MAX_FETCH).
    pub fetches: usize,
    /// Results per event (MAX_OUT, or fewer: argdist's keys).
    pub exprs: usize,
    /// Instructions (MAX_INSNS) and stack depth (VM_DEPTH) of the expression program.
    pub insns: usize,
    pub depth: usize,
    /// STRCMP literals (MAX_LITS) and their longest size with the NUL (LIT_MAX).
    pub lits: usize,
    pub lit_max: usize,
    /// Values the entry program saves (MAX_ENTRY).
    pub entry: usize,
}

/// An instruction of the expression program; `op` is one of probe.h's I_* codes, given by name here and mapped
/// to the codes by `probe_rodata!`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insn {
    Val(usize),
    Imm(i64),
    StrCmp { fetch: usize, lit: usize, len: usize },
    Cast { size: u32, signed: bool },
    Unary(UnOp),
    Binary { op: BinOp, signed: bool },
    Out(usize),
    Keep,
}

/// An expression of the output: its text (as shown), the type it is cast to, its result's slot, and for a string
/// the fetch whose pointer (or place) the string is read through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    pub text: String,
    pub ctype: CType,
    pub slot: usize,
    pub string_fetch: Option<usize>,
}

/// Everything the BPF side needs for one spec.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fetches: Vec<Fetch>,
    pub entry_fetches: Vec<Fetch>,
    pub exprs: Vec<Expr>,
    pub insns: Vec<Insn>,
    /// STRCMP's literals, without their NUL.
    pub lits: Vec<String>,
}

impl Plan {
    /// Whether the return probe needs its entry probe (for `$latency` or saved entry values).
    pub fn needs_entry(&self) -> bool {
        !self.entry_fetches.is_empty() || self.fetches.iter().any(|f| f.source == Source::Latency)
    }
}

/// The type of a value on the expression stack, for C's conversions.
#[derive(Debug, Clone, Copy)]
struct Ty {
    size: u32,
    signed: bool,
    constant: bool,
}

struct Compiler<'a> {
    resolver: Resolver<'a>,
    limits: Limits,
    raw: String,
    plan: Plan,
    depth: usize,
    max_depth: usize,
}

/// Resolves `spec`'s expressions and filter (tracepoint fields from `tracefs`) and compiles them.
pub fn plan(spec: &Spec, tracefs: Option<&Path>, limits: &Limits) -> SpecResult<Plan> {
    if spec.probe == ProbeType::Tracepoint && tracefs.is_none() {
        spec_bail!("in '{}': tracepoints need tracefs", spec.raw);
    }
    let resolver = Resolver::new(spec, tracefs)?;
    let raw = spec.raw.clone();
    if spec.exprs.len() > limits.exprs {
        spec_bail!("in '{raw}': at most {} expressions", limits.exprs);
    }
    let empty =
        Plan { fetches: Vec::new(), entry_fetches: Vec::new(), exprs: Vec::new(), insns: Vec::new(), lits: Vec::new() };
    let mut c = Compiler { resolver, limits: *limits, raw: raw.clone(), plan: empty, depth: 0, max_depth: 0 };
    let in_raw = |e: super::SpecError| super::SpecError(format!("in '{raw}': {e}"));
    // The predicate first: an event it drops computes nothing more.
    if !spec.filter.trim().is_empty() {
        let ast = expr::parse(&spec.filter).map_err(in_raw)?;
        c.emit(&ast)?;
        c.push(Insn::Keep, -1)?;
    }
    for (slot, (text, ctype)) in spec.exprs.iter().enumerate() {
        let ast = expr::parse(text).map_err(in_raw)?;
        // `$COMM` is the command name whatever type a spec gives it (BCC's own examples write `u32:$COMM`).
        let ctype = &if text.trim() == "$COMM" { CType::STRING } else { *ctype };
        if ctype.string {
            let fetch = c.string_operand(&ast, text)?;
            c.plan.exprs.push(Expr { text: text.clone(), ctype: *ctype, slot, string_fetch: Some(fetch) });
            continue;
        }
        c.emit(&ast)?;
        if ctype.size < 8 {
            c.push(Insn::Cast { size: ctype.size, signed: ctype.signed }, 0)?;
        }
        c.push(Insn::Out(slot), -1)?;
        c.plan.exprs.push(Expr { text: text.clone(), ctype: *ctype, slot, string_fetch: None });
    }
    if c.max_depth > limits.depth {
        spec_bail!("in '{raw}': the expressions need a stack of {} values, more than {}", c.max_depth, limits.depth);
    }
    Ok(c.plan)
}

impl Compiler<'_> {
    fn push(&mut self, insn: Insn, stack: i32) -> SpecResult<()> {
        if self.plan.insns.len() >= self.limits.insns {
            spec_bail!("in '{}': the expressions and predicate need more than {} steps", self.raw, self.limits.insns);
        }
        self.plan.insns.push(insn);
        self.depth = (self.depth as i32 + stack).max(0) as usize;
        self.max_depth = self.max_depth.max(self.depth);
        Ok(())
    }

    fn fetch(&mut self, f: Fetch) -> SpecResult<usize> {
        if let Some(i) = self.plan.fetches.iter().position(|x| *x == f) {
            return Ok(i);
        }
        if self.plan.fetches.len() >= self.limits.fetches {
            spec_bail!("in '{}': more than {} distinct values to read", self.raw, self.limits.fetches);
        }
        self.plan.fetches.push(f);
        Ok(self.plan.fetches.len() - 1)
    }

    /// A value now, or one the entry program saves (a fetch of its saved slot).
    fn fetch_resolved(&mut self, r: Resolved) -> SpecResult<usize> {
        match r {
            Resolved::Now(f) => self.fetch(f),
            Resolved::AtEntry(f) => {
                let at = match self.plan.entry_fetches.iter().position(|x| *x == f) {
                    Some(i) => i,
                    None => {
                        if self.plan.entry_fetches.len() >= self.limits.entry {
                            spec_bail!("in '{}': more than {} values saved at entry", self.raw, self.limits.entry);
                        }
                        // A pointer is kept as its value: its string may be gone by the return.
                        self.plan.entry_fetches.push(Fetch { string: None, ..f });
                        self.plan.entry_fetches.len() - 1
                    }
                };
                self.fetch(Fetch::new(Source::Entry(at as u32), 8, f.signed, None))
            }
        }
    }

    /// The fetch a string output or STRCMP operand reads through: a name (or a cast of one to `char *`).
    fn string_operand(&mut self, ast: &Ast, text: &str) -> SpecResult<usize> {
        let name = match ast {
            Ast::Name(n) => n,
            Ast::Call(f, args) if f == "$entry" && args.len() == 1 => match &args[0] {
                Ast::Name(n) => n,
                _ => spec_bail!("in '{}': $entry takes one parameter name", self.raw),
            },
            Ast::Cast(_, ct, inner) if ct.string => match &**inner {
                Ast::Name(n) => n,
                _ => spec_bail!("in '{}': '{text}' is not a string: only a name can be printed as one", self.raw),
            },
            _ => spec_bail!("in '{}': '{text}' is not a string: only a name can be printed as one", self.raw),
        };
        let mut f = match self.resolver.resolve(name)? {
            Resolved::Now(f) => f,
            // A parameter kept from the entry: its pointer is saved, and its string read at the return (the
            // memory is the caller's, as BCC reads it).
            saved @ Resolved::AtEntry(entry) => {
                let idx = self.fetch_resolved(saved)?;
                let kind =
                    entry.string.unwrap_or(if self.resolver.is_user() { StrKind::User } else { StrKind::Kernel });
                let mut f = self.plan.fetches[idx];
                f.string = Some(kind);
                return self.fetch(f);
            }
        };
        if f.string.is_none() {
            // A pointer printed as a string: user memory for a user function, else kernel memory.
            f.string = Some(if self.resolver.is_user() { StrKind::User } else { StrKind::Kernel });
            f.size = 8;
            f.signed = false;
        }
        self.fetch(f)
    }

    /// Emits `ast`, leaving its value on the stack; returns its type.
    fn emit(&mut self, ast: &Ast) -> SpecResult<Ty> {
        let raw = self.raw.clone();
        match ast {
            Ast::Num { value, unsigned } => {
                self.push(Insn::Imm(*value), 1)?;
                Ok(Ty { size: 8, signed: !unsigned, constant: true })
            }
            Ast::Str(s) => spec_bail!("in '{raw}': the string \"{s}\" can only be compared with STRCMP(\"{s}\", name)"),
            Ast::Name(name) => {
                let r = self.resolver.resolve(name)?;
                let f = match r {
                    Resolved::Now(f) | Resolved::AtEntry(f) => f,
                };
                if matches!(f.string, Some(StrKind::DataLoc | StrKind::Inline | StrKind::Comm))
                    || (f.string.is_some() && f.deref.address)
                {
                    spec_bail!("in '{raw}': '{name}' is a string: compare it with STRCMP(\"text\", {name})");
                }
                let idx = self.fetch_resolved(r)?;
                self.push(Insn::Val(idx), 1)?;
                Ok(Ty { size: f.size.clamp(1, 8), signed: f.signed, constant: false })
            }
            Ast::Cast(_, ct, inner) => {
                let t = self.emit(inner)?;
                if ct.size < 8 {
                    self.push(Insn::Cast { size: ct.size, signed: ct.signed }, 0)?;
                }
                Ok(Ty { size: ct.size, signed: ct.signed && !ct.string, constant: t.constant })
            }
            Ast::Unary(op, inner) => {
                let t = self.emit(inner)?;
                self.push(Insn::Unary(*op), 0)?;
                Ok(match op {
                    UnOp::Not => Ty { size: 4, signed: true, constant: t.constant },
                    UnOp::Neg => Ty { size: 8, signed: true, constant: t.constant },
                    UnOp::BitNot => t,
                })
            }
            Ast::Binary(op, a, b) => {
                let ta = self.emit(a)?;
                let tb = self.emit(b)?;
                // C: unsigned when an operand is an unsigned value of int's size or more; constants adapt.
                let unsigned_operand = |t: Ty| !t.constant && !t.signed && t.size >= 4;
                let unsigned_const = |t: Ty| t.constant && !t.signed;
                let signed =
                    !(unsigned_operand(ta) || unsigned_operand(tb) || unsigned_const(ta) || unsigned_const(tb));
                let signed = if *op == BinOp::Shr { ta.signed || (ta.constant && !unsigned_const(ta)) } else { signed };
                self.push(Insn::Binary { op: *op, signed }, -1)?;
                Ok(if op.is_boolean() {
                    Ty { size: 4, signed: true, constant: ta.constant && tb.constant }
                } else {
                    Ty { size: 8, signed, constant: ta.constant && tb.constant }
                })
            }
            Ast::Call(f, args) => match (f.as_str(), args.as_slice()) {
                ("STRCMP", [Ast::Str(lit), operand] | [operand, Ast::Str(lit)]) => {
                    if lit.len() + 1 > self.limits.lit_max {
                        spec_bail!(
                            "in '{raw}': STRCMP's literal \"{lit}\" is longer than {} bytes",
                            self.limits.lit_max - 1
                        );
                    }
                    let text = match operand {
                        Ast::Name(n) => n.clone(),
                        _ => "STRCMP's second operand".to_owned(),
                    };
                    let fetch = self.string_operand(operand, &text)?;
                    let lit_at = match self.plan.lits.iter().position(|l| l == lit) {
                        Some(i) => i,
                        None => {
                            if self.plan.lits.len() >= self.limits.lits {
                                spec_bail!("in '{raw}': more than {} STRCMP literals", self.limits.lits);
                            }
                            self.plan.lits.push(lit.clone());
                            self.plan.lits.len() - 1
                        }
                    };
                    self.push(Insn::StrCmp { fetch, lit: lit_at, len: lit.len() + 1 }, 1)?;
                    Ok(Ty { size: 4, signed: true, constant: false })
                }
                ("STRCMP", _) => {
                    spec_bail!("in '{raw}': STRCMP takes a \"literal\" and a name: STRCMP(\"text\", arg1)")
                }
                ("$entry", [Ast::Name(n)]) => {
                    if self.resolver.probe() != ProbeType::Return {
                        spec_bail!("in '{raw}': $entry({n}) is only available in return probes ('r')");
                    }
                    self.emit(&Ast::Name(n.clone()))
                }
                ("$entry", _) => spec_bail!("in '{raw}': $entry takes one parameter name: $entry(size)"),
                (other, _) => spec_bail!("in '{raw}': cannot call '{other}' (only STRCMP and $entry)"),
            },
        }
    }
}
