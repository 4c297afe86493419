// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The C types a spec may name (`u64`, `int`, `size_t`, `char*`, pointers), as size, signedness and string-ness.

use super::SpecResult;

/// A scalar C type: `size` bytes (1, 2, 4 or 8), signed or not, or a pointer to a NUL-terminated string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CType {
    pub size: u32,
    pub signed: bool,
    pub string: bool,
}

impl CType {
    pub const U64: CType = CType { size: 8, signed: false, string: false };
    pub const S64: CType = CType { size: 8, signed: true, string: false };
    pub const INT: CType = CType { size: 4, signed: true, string: false };
    pub const U32: CType = CType { size: 4, signed: false, string: false };
    pub const STRING: CType = CType { size: 8, signed: false, string: true };

    const fn int(size: u32, signed: bool) -> CType {
        CType { size, signed, string: false }
    }
}

/// Parses a C type name. Qualifiers (`const`, `volatile`, `__user`) are ignored; `char *` is a string; any other
/// pointer is an unsigned 64-bit value; structs, unions, arrays and floating point are refused.
pub fn parse(text: &str) -> SpecResult<CType> {
    let stars = text.matches('*').count();
    let words: Vec<String> = text
        .replace('*', " ")
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile" | "__user" | "restrict" | "__restrict"))
        .map(str::to_owned)
        .collect();
    let base = words.join(" ");
    if stars == 1 && matches!(base.as_str(), "char" | "unsigned char" | "signed char") {
        return Ok(CType::STRING);
    }
    if stars > 0 {
        return Ok(CType::U64);
    }
    Ok(match base.as_str() {
        "u8" | "__u8" | "uint8_t" | "unsigned char" | "bool" | "_Bool" => CType::int(1, false),
        "s8" | "__s8" | "int8_t" | "char" | "signed char" => CType::int(1, true),
        "u16" | "__u16" | "uint16_t" | "unsigned short" | "unsigned short int" | "umode_t" => CType::int(2, false),
        "s16" | "__s16" | "int16_t" | "short" | "short int" | "signed short" => CType::int(2, true),
        "u32" | "__u32" | "uint32_t" | "unsigned" | "unsigned int" | "uid_t" | "gid_t" | "dev_t" | "gfp_t"
        | "mode_t" => CType::U32,
        "s32" | "__s32" | "int32_t" | "int" | "signed" | "signed int" | "pid_t" => CType::INT,
        "u64"
        | "__u64"
        | "uint64_t"
        | "unsigned long"
        | "unsigned long int"
        | "unsigned long long"
        | "unsigned long long int"
        | "size_t"
        | "uintptr_t" => CType::U64,
        "s64" | "__s64" | "int64_t" | "long" | "long int" | "long long" | "long long int" | "signed long"
        | "ssize_t" | "off_t" | "loff_t" | "intptr_t" => CType::S64,
        "" => spec_bail!("missing type"),
        other if other.starts_with("struct ") || other.starts_with("union ") => {
            spec_bail!("type '{text}' is not supported: only integers, pointers and char* strings")
        }
        _ => spec_bail!("unknown type '{text}': use an integer type (u64, int, size_t...), a pointer or char*"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types() {
        assert_eq!(parse("u64").unwrap(), CType::U64);
        assert_eq!(parse("const char *").unwrap(), CType::STRING);
        assert_eq!(parse("char*").unwrap(), CType::STRING);
        assert_eq!(parse("void *").unwrap(), CType::U64);
        assert_eq!(parse("int").unwrap(), CType::INT);
        assert_eq!(parse("unsigned short").unwrap().size, 2);
        assert!(parse("struct file").is_err());
        assert!(parse("float").is_err());
    }
}
