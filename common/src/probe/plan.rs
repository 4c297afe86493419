// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A spec turned into what the generic BPF program needs: the values to fetch (deduplicated), the key
//! expressions over them, and the filter's comparisons.

use std::path::Path;

use super::ctype::CType;
use super::fields::{Fetch, Resolver, Source};
use super::filter::{self, Op, Operand};
use super::spec::{ProbeType, Spec};
use super::SpecResult;

/// The most values one probe fetches, comparisons and key expressions (the BPF program's array sizes).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub fetches: usize,
    pub cmps: usize,
    pub exprs: usize,
}

/// One comparison over fetched values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cmp {
    pub lhs: usize,
    pub op: Op,
    /// A fetch index, or a constant.
    pub rhs: Rhs,
    pub signed: bool,
    pub or_next: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rhs {
    Fetch(usize),
    Const(i64),
}

/// An expression of the output: its text (as shown), the fetch it reads and the type it is cast to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    pub text: String,
    pub fetch: usize,
    pub ctype: CType,
}

/// Everything the BPF side needs for one spec.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fetches: Vec<Fetch>,
    pub exprs: Vec<Expr>,
    pub cmps: Vec<Cmp>,
}

impl Plan {
    /// Whether the return probe needs an entry probe (for `$latency`).
    pub fn needs_entry(&self) -> bool {
        self.fetches.iter().any(|f| f.source == Source::Latency)
    }

    fn fetch(&mut self, f: Fetch, limits: &Limits, raw: &str) -> SpecResult<usize> {
        if let Some(i) = self.fetches.iter().position(|x| *x == f) {
            return Ok(i);
        }
        if self.fetches.len() >= limits.fetches {
            spec_bail!("in '{raw}': more than {} distinct values to read", limits.fetches);
        }
        self.fetches.push(f);
        Ok(self.fetches.len() - 1)
    }
}

/// Resolves `spec`'s expressions and filter (tracepoint fields from `tracefs`).
pub fn plan(spec: &Spec, tracefs: Option<&Path>, limits: &Limits) -> SpecResult<Plan> {
    let resolver = Resolver::new(spec, tracefs)?;
    let raw = &spec.raw;
    let mut plan = Plan { fetches: Vec::new(), exprs: Vec::new(), cmps: Vec::new() };
    if spec.exprs.len() > limits.exprs {
        spec_bail!("in '{raw}': at most {} expressions", limits.exprs);
    }
    for (text, ctype) in &spec.exprs {
        let fetch = resolver.resolve(text)?;
        if ctype.string && fetch.string.is_none() {
            spec_bail!("in '{raw}': '{text}' is not a string, so it cannot be char*");
        }
        if !ctype.string && fetch.string == Some(super::fields::StrKind::Inline) {
            spec_bail!("in '{raw}': '{text}' is a char array: give its type as char*");
        }
        let index = plan.fetch(fetch, limits, raw)?;
        plan.exprs.push(Expr { text: text.clone(), fetch: index, ctype: *ctype });
    }
    let comparisons = filter::parse(&spec.filter).map_err(|e| super::SpecError(format!("in '{raw}': {e}")))?;
    if comparisons.len() > limits.cmps {
        spec_bail!("in '{raw}': filter '{}' has more than {} comparisons", spec.filter, limits.cmps);
    }
    for c in comparisons {
        let Operand::Name(lhs_name) = &c.lhs else { unreachable!("filter::parse puts a name on the left") };
        let lf = resolver.resolve(lhs_name)?;
        if lf.string.is_some() {
            spec_bail!("in '{raw}': filter on the string '{lhs_name}' is not supported (integers only)");
        }
        let lhs = plan.fetch(lf, limits, raw)?;
        let (rhs, rsigned) = match &c.rhs {
            Operand::Const(v) => (Rhs::Const(*v), false),
            Operand::Name(n) => {
                let rf = resolver.resolve(n)?;
                if rf.string.is_some() {
                    spec_bail!("in '{raw}': filter on the string '{n}' is not supported (integers only)");
                }
                (Rhs::Fetch(plan.fetch(rf, limits, raw)?), rf.signed)
            }
        };
        plan.cmps.push(Cmp { lhs, op: c.op, rhs, signed: lf.signed || rsigned, or_next: c.or_next });
    }
    if spec.probe == ProbeType::Tracepoint && tracefs.is_none() {
        spec_bail!("in '{raw}': tracepoints need tracefs");
    }
    Ok(plan)
}
