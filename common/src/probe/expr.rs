// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The expression language of probe specs: C expressions over the probe's names, as BCC's trace predicates and
//! argdist's expressions and filters are written. Integer and character constants, names (`arg1`, `count`,
//! `args->filename`, `ts->tv_nsec`, `file->f_path.dentry`, `$retval`, `retval`, `$latency`, ...), casts
//! (`(int)retval`), unary `- ! ~`, the binary operators `* / % + - << >> < <= > >= == != & ^ | && ||` with C's
//! precedence, parentheses, and the calls `STRCMP("literal", name)` and `$entry(name)`.
//!
//! This module only parses: [`super::compile`] resolves the names and emits the BPF side's instructions.

use super::ctype::{self, CType};
use super::SpecResult;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// An integer constant; `unsigned` with a `u` suffix.
    Num {
        value: i64,
        unsigned: bool,
    },
    /// A string literal (STRCMP's first argument).
    Str(String),
    /// A name, member accesses included, as written without spaces (`args->rqtp->tv_nsec`).
    Name(String),
    /// `(type)expr`: the type's text and what it parses to.
    Cast(String, CType, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `STRCMP(...)` or `$entry(...)`.
    Call(String, Vec<Expr>),
}

/// A comparison alone, for specs whose predicates are one comparison with a constant (ksnoop's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    Shl,
    Shr,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    BitAnd,
    BitXor,
    BitOr,
    And,
    Or,
}

impl BinOp {
    /// C's precedence (higher binds tighter).
    fn precedence(self) -> u8 {
        match self {
            BinOp::Mul | BinOp::Div | BinOp::Mod => 10,
            BinOp::Add | BinOp::Sub => 9,
            BinOp::Shl | BinOp::Shr => 8,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 7,
            BinOp::Eq | BinOp::Ne => 6,
            BinOp::BitAnd => 5,
            BinOp::BitXor => 4,
            BinOp::BitOr => 3,
            BinOp::And => 2,
            BinOp::Or => 1,
        }
    }

    /// Whether the result is a truth value (0 or 1).
    pub fn is_boolean(self) -> bool {
        matches!(self, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne | BinOp::And | BinOp::Or)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Num(i64, bool),
    Str(String),
    Ident(String),
    Punct(&'static str),
}

const PUNCTS: [&str; 25] = [
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", ",", ".", "!", "~", "-", "+", "*", "/", "%", "<",
    ">", "&", "^", "|",
];

fn lex(text: &str) -> SpecResult<Vec<Token>> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let unsigned = word.to_ascii_lowercase().contains('u');
            let digits = word.trim_end_matches(['u', 'U', 'l', 'L']);
            let value = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16).ok()
            } else if digits.len() > 1 && digits.starts_with('0') {
                u64::from_str_radix(&digits[1..], 8).ok()
            } else {
                digits.parse::<u64>().ok()
            };
            let Some(value) = value else { spec_bail!("'{word}' is not a number") };
            out.push(Token::Num(value as i64, unsigned));
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == '$' {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            // BCC's `arg2@user`: the name and its suffix are one word.
            if i < chars.len() && chars[i] == '@' {
                let rest: String = chars[i..].iter().take(5).collect();
                if rest == "@user" {
                    i += 5;
                }
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
            continue;
        }
        if c == '"' || c == '\'' {
            let quote = c;
            let mut s = String::new();
            i += 1;
            loop {
                let Some(&ch) = chars.get(i) else { spec_bail!("an unterminated {quote}...{quote} literal") };
                i += 1;
                if ch == quote {
                    break;
                }
                if ch == '\\' {
                    let Some(&e) = chars.get(i) else { spec_bail!("an unterminated {quote}...{quote} literal") };
                    i += 1;
                    s.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        '0' => '\0',
                        other => other,
                    });
                } else {
                    s.push(ch);
                }
            }
            if quote == '\'' {
                let mut it = s.chars();
                match (it.next(), it.next()) {
                    (Some(ch), None) if (ch as u32) < 256 => out.push(Token::Num(ch as i64, false)),
                    _ => spec_bail!("'{s}' is not one character"),
                }
            } else {
                out.push(Token::Str(s));
            }
            continue;
        }
        let rest: String = chars[i..].iter().take(2).collect();
        let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) else {
            spec_bail!("cannot take '{}'", chars[i..].iter().collect::<String>())
        };
        out.push(Token::Punct(p));
        i += p.chars().count();
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn punct(&self) -> Option<&'static str> {
        match self.peek() {
            Some(Token::Punct(p)) => Some(p),
            _ => None,
        }
    }

    fn expect(&mut self, p: &str) -> SpecResult<()> {
        if self.punct() == Some(p) {
            self.at += 1;
            Ok(())
        } else {
            spec_bail!("expected '{p}' {}", self.where_())
        }
    }

    fn where_(&self) -> String {
        match self.peek() {
            None => "at the end".into(),
            Some(Token::Num(v, _)) => format!("at '{v}'"),
            Some(Token::Str(s)) => format!("at \"{s}\""),
            Some(Token::Ident(s)) => format!("at '{s}'"),
            Some(Token::Punct(p)) => format!("at '{p}'"),
        }
    }

    fn binary_op(&self) -> Option<BinOp> {
        Some(match self.punct()? {
            "*" => BinOp::Mul,
            "/" => BinOp::Div,
            "%" => BinOp::Mod,
            "+" => BinOp::Add,
            "-" => BinOp::Sub,
            "<<" => BinOp::Shl,
            ">>" => BinOp::Shr,
            "<" => BinOp::Lt,
            "<=" => BinOp::Le,
            ">" => BinOp::Gt,
            ">=" => BinOp::Ge,
            "==" => BinOp::Eq,
            "!=" => BinOp::Ne,
            "&" => BinOp::BitAnd,
            "^" => BinOp::BitXor,
            "|" => BinOp::BitOr,
            "&&" => BinOp::And,
            "||" => BinOp::Or,
            _ => return None,
        })
    }

    /// Precedence climbing over binary operators of at least `min` precedence.
    fn expr(&mut self, min: u8, depth: u32) -> SpecResult<Expr> {
        if depth > 64 {
            spec_bail!("the expression nests too deeply");
        }
        let mut lhs = self.unary(depth + 1)?;
        while let Some(op) = self.binary_op() {
            let prec = op.precedence();
            if prec < min {
                break;
            }
            self.at += 1;
            let rhs = self.expr(prec + 1, depth + 1)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self, depth: u32) -> SpecResult<Expr> {
        if depth > 64 {
            spec_bail!("the expression nests too deeply");
        }
        let op = match self.punct() {
            Some("-") => Some(UnOp::Neg),
            Some("!") => Some(UnOp::Not),
            Some("~") => Some(UnOp::BitNot),
            Some("+") => {
                self.at += 1;
                return self.unary(depth + 1);
            }
            _ => None,
        };
        if let Some(op) = op {
            self.at += 1;
            let inner = self.unary(depth + 1)?;
            // A negative constant stays a constant (`x == -1`).
            if let (UnOp::Neg, Expr::Num { value, unsigned }) = (op, &inner) {
                return Ok(Expr::Num { value: value.wrapping_neg(), unsigned: *unsigned });
            }
            return Ok(Expr::Unary(op, Box::new(inner)));
        }
        if self.punct() == Some("(") {
            if let Some((text, ctype, after)) = self.cast_ahead() {
                self.at = after;
                let inner = self.unary(depth + 1)?;
                return Ok(Expr::Cast(text, ctype, Box::new(inner)));
            }
            self.at += 1;
            let inner = self.expr(0, depth + 1)?;
            self.expect(")")?;
            return Ok(inner);
        }
        self.primary(depth)
    }

    /// A cast at the cursor (`(` type `)`): its text, type and the index after its `)`.
    fn cast_ahead(&self) -> Option<(String, CType, usize)> {
        let mut words = Vec::new();
        let mut i = self.at + 1;
        loop {
            match self.tokens.get(i)? {
                Token::Ident(w) => words.push(w.clone()),
                Token::Punct("*") => words.push("*".into()),
                Token::Punct(")") => break,
                _ => return None,
            }
            i += 1;
        }
        let first = words.first()?;
        const TYPE_WORDS: [&str; 13] = [
            "const", "unsigned", "signed", "int", "long", "short", "char", "void", "struct", "bool", "_Bool",
            "volatile", "union",
        ];
        let looks_like_type = TYPE_WORDS.contains(&first.as_str()) || ctype::parse(first).is_ok();
        if !looks_like_type {
            return None;
        }
        let text = words.join(" ").replace(" *", "*");
        let ctype = if first == "struct" || first == "union" {
            // A cast to a struct pointer keeps the value (an address); members through it are not typed here.
            if words.contains(&"*".to_string()) {
                CType::U64
            } else {
                return None;
            }
        } else {
            ctype::parse(&text).ok()?
        };
        Some((text, ctype, i + 1))
    }

    fn primary(&mut self, depth: u32) -> SpecResult<Expr> {
        let Some(token) = self.peek().cloned() else { spec_bail!("an operand is missing at the end") };
        self.at += 1;
        match token {
            Token::Num(value, unsigned) => Ok(Expr::Num { value, unsigned }),
            Token::Str(s) => Ok(Expr::Str(s)),
            Token::Ident(name) => {
                if self.punct() == Some("(") {
                    self.at += 1;
                    let mut args = Vec::new();
                    if self.punct() != Some(")") {
                        loop {
                            args.push(self.expr(0, depth + 1)?);
                            if self.punct() == Some(",") {
                                self.at += 1;
                                continue;
                            }
                            break;
                        }
                    }
                    self.expect(")")?;
                    return Ok(Expr::Call(name, args));
                }
                let mut path = name;
                while let Some(p @ ("->" | ".")) = self.punct() {
                    self.at += 1;
                    match self.peek() {
                        Some(Token::Ident(member)) if !member.starts_with('$') => {
                            path.push_str(p);
                            path.push_str(member);
                            self.at += 1;
                        }
                        _ => spec_bail!("a member name must follow '{p}' {}", self.where_()),
                    }
                }
                Ok(Expr::Name(path))
            }
            Token::Punct(p) => {
                self.at -= 1;
                spec_bail!("an operand is missing before '{p}'")
            }
        }
    }
}

/// Parses one expression; all of `text` must be taken.
pub fn parse(text: &str) -> SpecResult<Expr> {
    let tokens = lex(text).map_err(|e| super::SpecError(format!("'{text}': {e}")))?;
    if tokens.is_empty() {
        spec_bail!("an empty expression");
    }
    let mut p = Parser { tokens, at: 0 };
    let e = p.expr(0, 0).map_err(|e| super::SpecError(format!("'{text}': {e}")))?;
    if p.at < p.tokens.len() {
        spec_bail!("'{text}': cannot take what follows the expression {}", p.where_());
    }
    Ok(e)
}

/// Splits a comma-separated list of expressions at its top-level commas (not those inside parentheses or
/// string literals).
pub fn split_top_level(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut cur = String::new();
    let mut escaped = false;
    for c in text.chars() {
        if let Some(q) = quote {
            cur.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_owned());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_owned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> Box<Expr> {
        Box::new(Expr::Name(n.into()))
    }

    fn num(v: i64) -> Box<Expr> {
        Box::new(Expr::Num { value: v, unsigned: false })
    }

    #[test]
    fn precedence_as_in_c() {
        assert_eq!(
            parse("a + b * 2 == 7 && c || d").unwrap(),
            Expr::Binary(
                BinOp::Or,
                Box::new(Expr::Binary(
                    BinOp::And,
                    Box::new(Expr::Binary(
                        BinOp::Eq,
                        Box::new(Expr::Binary(
                            BinOp::Add,
                            name("a"),
                            Box::new(Expr::Binary(BinOp::Mul, name("b"), num(2)))
                        )),
                        num(7)
                    )),
                    name("c")
                )),
                name("d")
            )
        );
        // `&` binds looser than `==`, as in C.
        assert_eq!(
            parse("flags & 1 == 1").unwrap(),
            Expr::Binary(BinOp::BitAnd, name("flags"), Box::new(Expr::Binary(BinOp::Eq, num(1), num(1))))
        );
    }

    #[test]
    fn casts_members_calls_and_literals() {
        assert_eq!(
            parse("(int)retval < 0").unwrap(),
            Expr::Binary(BinOp::Lt, Box::new(Expr::Cast("int".into(), CType::INT, name("retval"))), num(0))
        );
        assert_eq!(parse("(n) > 2").unwrap(), Expr::Binary(BinOp::Gt, name("n"), num(2)));
        assert_eq!(parse("args->rqtp->tv_nsec").unwrap(), Expr::Name("args->rqtp->tv_nsec".into()));
        assert_eq!(parse("file->f_path.dentry").unwrap(), Expr::Name("file->f_path.dentry".into()));
        assert_eq!(
            parse(r#"STRCMP("test.txt", arg1)"#).unwrap(),
            Expr::Call("STRCMP".into(), vec![Expr::Str("test.txt".into()), Expr::Name("arg1".into())])
        );
        assert_eq!(
            parse("$latency/$entry(size)").unwrap(),
            Expr::Binary(
                BinOp::Div,
                name("$latency"),
                Box::new(Expr::Call("$entry".into(), vec![Expr::Name("size".into())]))
            )
        );
        assert_eq!(parse("x == -1").unwrap(), Expr::Binary(BinOp::Eq, name("x"), num(-1)));
        assert_eq!(parse("c == 'a'").unwrap(), Expr::Binary(BinOp::Eq, name("c"), num(97)));
        assert_eq!(parse("0x10u").unwrap(), Expr::Num { value: 16, unsigned: true });
        assert_eq!(parse("arg2@user").unwrap(), Expr::Name("arg2@user".into()));
    }

    #[test]
    fn refused() {
        for bad in ["", "a +", "(a", "a)", "a b", "f(", "x->", "\"abc", "é == 1", "a = 1", "1 ? 2 : 3"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse(&"(".repeat(200)).is_err());
    }

    #[test]
    fn top_level_commas() {
        assert_eq!(split_top_level(r#"a, STRCMP("x,y", b), (c, d)"#), vec!["a", r#"STRCMP("x,y", b)"#, "(c, d)"]);
    }
}
