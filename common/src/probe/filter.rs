// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The filter grammar: comparisons (`==, !=, <, <=, >, >=`) of a name with a constant or another name, joined by
//! `&&` and `||` (`&&` binds tighter; no parentheses).

use super::SpecResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    /// The same comparison with its operands swapped (`3 < x` is `x > 3`).
    pub fn flipped(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            other => other,
        }
    }
}

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operand {
    Name(String),
    Const(i64),
}

/// `lhs op rhs`, and whether `||` follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub lhs: Operand,
    pub op: Op,
    pub rhs: Operand,
    pub or_next: bool,
}

/// Parses a filter; `text` empty gives no comparisons.
pub fn parse(text: &str) -> SpecResult<Vec<Comparison>> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    if let Some(bad) = text.find(['(', ')']) {
        spec_bail!("filter '{text}': cannot take the parentheses at '{}' (use && and || only)", &text[bad..]);
    }
    let mut out = Vec::new();
    for (i, group) in text.split("||").enumerate() {
        if i > 0 {
            if let Some(last) = out.last_mut() {
                let last: &mut Comparison = last;
                last.or_next = true;
            }
        }
        for cmp in group.split("&&") {
            out.push(comparison(text, cmp.trim())?);
        }
    }
    Ok(out)
}

fn comparison(filter: &str, cmp: &str) -> SpecResult<Comparison> {
    const OPS: [(&str, Op); 6] =
        [("==", Op::Eq), ("!=", Op::Ne), ("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)];
    if cmp.is_empty() {
        spec_bail!("filter '{filter}': an empty comparison");
    }
    // The first operator, skipping the '>' of '->'. By characters, not bytes: a name may hold any UTF-8 (it is
    // refused later, as an unknown field), and a slice must start on a character's boundary.
    let mut found = None;
    let mut prev = None;
    for (i, c) in cmp.char_indices() {
        if c == '>' && prev == Some('-') {
            prev = Some(c);
            continue;
        }
        if let Some((tok, op)) = OPS.iter().find(|(tok, _)| cmp[i..].starts_with(tok)) {
            found = Some((i, *tok, *op));
            break;
        }
        prev = Some(c);
    }
    let Some((at, tok, op)) = found else {
        // A bare name is a truth test, as in C: `(retval)` is `retval != 0`.
        let name = cmp.trim();
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "_$->.".contains(c)) {
            if let Operand::Name(n) = operand(name) {
                return Ok(Comparison { lhs: Operand::Name(n), op: Op::Ne, rhs: Operand::Const(0), or_next: false });
            }
        }
        spec_bail!("filter '{filter}': cannot take '{cmp}': a comparison needs ==, !=, <, <=, > or >=");
    };
    let (lhs, rhs) = (cmp[..at].trim(), cmp[at + tok.len()..].trim());
    for side in [lhs, rhs] {
        if let Some(bad) = side.find(['&', '|', '!', '=', '<', '+', '*', '/', '%', '^', '~', '"', '\'']) {
            spec_bail!(
                "filter '{filter}': cannot take '{}' in '{cmp}' (supported: ==, !=, <, <=, >, >=, &&, ||)",
                &side[bad..]
            );
        }
        if side.is_empty() {
            spec_bail!("filter '{filter}': '{cmp}' lacks an operand");
        }
    }
    let (lhs, rhs) = (operand(lhs), operand(rhs));
    Ok(match (lhs, rhs) {
        (Operand::Const(_), Operand::Const(_)) => spec_bail!("filter '{filter}': '{cmp}' compares two constants"),
        (l @ Operand::Const(_), r) => Comparison { lhs: r, op: op.flipped(), rhs: l, or_next: false },
        (l, r) => Comparison { lhs: l, op, rhs: r, or_next: false },
    })
}

fn operand(text: &str) -> Operand {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest.trim()),
        None => (false, text),
    };
    let value = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        digits.trim_end_matches(['u', 'U', 'l', 'L']).parse::<u64>().ok()
    };
    match value {
        Some(v) => Operand::Const(if neg { (v as i64).wrapping_neg() } else { v as i64 }),
        None => Operand::Name(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups() {
        let f = parse("args->count > 100 && fd == 1 || $retval < 0").unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!(f[0].lhs, Operand::Name("args->count".into()));
        assert_eq!(f[0].op, Op::Gt);
        assert!(!f[0].or_next && f[1].or_next && !f[2].or_next);
        assert_eq!(f[2].rhs, Operand::Const(0));
        let g = parse("100 < size").unwrap();
        assert_eq!(g[0].op, Op::Gt);
        assert_eq!(g[0].rhs, Operand::Const(100));
        assert_eq!(parse("x == -1").unwrap()[0].rhs, Operand::Const(-1));
    }

    #[test]
    fn refused() {
        assert!(parse("(a == 1)").is_err());
        assert!(parse("a & 1").is_err());
        assert!(parse("a + 1 > 2").is_err());
        assert_eq!(parse("a").unwrap()[0].op, Op::Ne);
        assert!(parse("a b").is_err());
        assert!(parse("1 == 2").is_err());
    }

    /// Issue 31 item 2: a multi-byte character before the operator made a byte-indexed slice panic.
    #[test]
    fn non_ascii_names_do_not_panic() {
        let f = parse("args->é == 1").unwrap();
        assert_eq!(f[0].lhs, Operand::Name("args->é".into()));
        assert_eq!(f[0].op, Op::Eq);
        assert_eq!(parse("日本>=2 && \u{202e}x<1").unwrap()[1].lhs, Operand::Name("\u{202e}x".into()));
        assert_eq!(parse("a->🦀 > 3").unwrap()[0].op, Op::Gt);
        assert!(parse("é").is_err(), "a bare name outside [A-Za-z0-9_$->.] is no truth test");
        for text in ["é", "日本", "\u{202e}", "🦀", "é(", "x == é)", "é &é", "é <🦀>"] {
            let _ = parse(text);
        }
    }
}
