// SPDX-License-Identifier: Apache-2.0 OR MIT
//! trace's printf-style formats: the conversions BCC's trace takes (`%d %u %x %c %s` with the `h`, `l` and `ll`
//! length modifiers, a `-` or `0` flag and a width), each giving the C type its argument is read as, and the
//! rendering of the fetched values.

use super::ctype::CType;
use super::SpecResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conv {
    Signed,
    Unsigned,
    Hex,
    Char,
    Str,
    /// %K: a kernel address, printed as its symbol (the caller resolves it: a [`Value::Str`]).
    KernelSym,
    /// %U: a user address of the event's process, printed as its symbol and module.
    UserSym,
}

/// What a %K or %U conversion asks the caller to resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    Kernel,
    User,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Lit(String),
    Conv { conv: Conv, ctype: CType, left: bool, zero: bool, width: usize },
}

/// A parsed format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pieces: Vec<Piece>,
}

/// A value to print: an integer as fetched (64 bits, cast here to the conversion's type), or a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(u64),
    Str(String),
}

impl Format {
    /// Parses `text` (without its quotes).
    pub fn parse(text: &str) -> SpecResult<Format> {
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                lit.push(c);
                continue;
            }
            if chars.peek() == Some(&'%') {
                chars.next();
                lit.push('%');
                continue;
            }
            let mut spec = String::from("%");
            let (mut left, mut zero, mut width) = (false, false, 0usize);
            while let Some(&f) = chars.peek() {
                match f {
                    '-' => left = true,
                    '0' if width == 0 => zero = true,
                    d if d.is_ascii_digit() => width = width * 10 + d.to_digit(10).unwrap_or(0) as usize,
                    _ => break,
                }
                spec.push(f);
                chars.next();
            }
            let mut length = String::new();
            while let Some(&l) = chars.peek() {
                if l == 'l' || l == 'h' {
                    length.push(l);
                    spec.push(l);
                    chars.next();
                } else {
                    break;
                }
            }
            let Some(conv_char) = chars.next() else {
                spec_bail!("format \"{text}\": '{spec}' ends the format without a conversion");
            };
            spec.push(conv_char);
            let (conv, ctype) = match (conv_char, length.as_str()) {
                ('d' | 'i', "") => (Conv::Signed, CType::INT),
                ('d' | 'i', "l" | "ll") => (Conv::Signed, CType::S64),
                ('d' | 'i', "h") => (Conv::Signed, CType { size: 2, signed: true, string: false }),
                ('u', "") => (Conv::Unsigned, CType::U32),
                ('u', "l" | "ll") => (Conv::Unsigned, CType::U64),
                ('u', "h") => (Conv::Unsigned, CType { size: 2, signed: false, string: false }),
                ('x' | 'X', "") => (Conv::Hex, CType::U32),
                ('x' | 'X', "l" | "ll") => (Conv::Hex, CType::U64),
                ('p', "") => (Conv::Hex, CType::U64),
                ('c', "") => (Conv::Char, CType { size: 1, signed: true, string: false }),
                ('s', "") => (Conv::Str, CType::STRING),
                ('K', "") => (Conv::KernelSym, CType::U64),
                ('U', "") => (Conv::UserSym, CType::U64),
                _ => spec_bail!(
                    "format \"{text}\": cannot take the conversion '{spec}' (supported: %d %u %x %c %s %K %U, with h, l, ll)"
                ),
            };
            if !lit.is_empty() {
                pieces.push(Piece::Lit(std::mem::take(&mut lit)));
            }
            pieces.push(Piece::Conv { conv, ctype, left, zero, width });
        }
        if !lit.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        Ok(Format { pieces })
    }

    /// The C type of each conversion's argument, in order.
    pub fn types(&self) -> Vec<CType> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Conv { ctype, .. } => Some(*ctype),
                Piece::Lit(_) => None,
            })
            .collect()
    }

    /// Per conversion, in order: whether its value is an address to print as a kernel or user symbol.
    pub fn symbols(&self) -> Vec<Option<SymbolKind>> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Conv { conv: Conv::KernelSym, .. } => Some(Some(SymbolKind::Kernel)),
                Piece::Conv { conv: Conv::UserSym, .. } => Some(Some(SymbolKind::User)),
                Piece::Conv { .. } => Some(None),
                Piece::Lit(_) => None,
            })
            .collect()
    }

    /// The message for `values` (one per conversion; %K and %U take their symbol as a [`Value::Str`]).
    pub fn render(&self, values: &[Value]) -> String {
        let mut out = String::new();
        let mut next = values.iter();
        for piece in &self.pieces {
            let (conv, ctype, left, zero, width) = match piece {
                Piece::Lit(s) => {
                    out.push_str(s);
                    continue;
                }
                Piece::Conv { conv, ctype, left, zero, width } => (*conv, *ctype, *left, *zero, *width),
            };
            let text = match (conv, next.next()) {
                (Conv::Str, Some(Value::Str(s))) => s.clone(),
                (_, Some(Value::Int(raw))) => {
                    let bits = ctype.size * 8;
                    let masked = if bits >= 64 { *raw } else { raw & ((1u64 << bits) - 1) };
                    match conv {
                        Conv::Signed => {
                            let shift = 64 - bits;
                            (((masked << shift) as i64) >> shift).to_string()
                        }
                        Conv::Unsigned => masked.to_string(),
                        Conv::Hex => format!("{masked:x}"),
                        Conv::Char => char::from(masked as u8).to_string(),
                        Conv::Str => String::new(),
                        Conv::KernelSym | Conv::UserSym => format!("{masked:#x}"),
                    }
                }
                (_, Some(Value::Str(s))) => s.clone(),
                (_, None) => String::new(),
            };
            let pad = width.saturating_sub(text.chars().count());
            if left {
                out.push_str(&text);
                out.push_str(&" ".repeat(pad));
            } else if zero && conv != Conv::Str {
                let (sign, digits) = text.strip_prefix('-').map_or(("", text.as_str()), |d| ("-", d));
                out.push_str(sign);
                out.push_str(&"0".repeat(pad));
                out.push_str(digits);
            } else {
                out.push_str(&" ".repeat(pad));
                out.push_str(&text);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let f = Format::parse("ret=%d fd %u %llx %s %-4d|%05d %%").unwrap();
        assert_eq!(f.types().len(), 6);
        let v = |x: i64| Value::Int(x as u64);
        let s = f.render(&[v(-2), v(7), v(255), Value::Str("a".into()), v(3), v(-42)]);
        assert_eq!(s, "ret=-2 fd 7 ff a 3   |-0042 %");
        assert_eq!(Format::parse("%d").unwrap().render(&[Value::Int(0xffff_ffff)]), "-1");
        let k = Format::parse("%K at %U").unwrap();
        assert_eq!(k.symbols(), vec![Some(SymbolKind::Kernel), Some(SymbolKind::User)]);
        assert_eq!(k.render(&[Value::Str("vfs_read+0x4".into()), Value::Int(0x10)]), "vfs_read+0x4 at 0x10");
        assert!(Format::parse("%f").is_err());
        assert!(Format::parse("x %").is_err());
    }
}
