// SPDX-License-Identifier: Apache-2.0 OR MIT
//! A name from the traced system (a comm, a file name, a command line, a host name): its bytes as the kernel
//! gave them, escaped in text columns and plain in JSON.
//!
//! Anyone who can name a thread (`prctl(PR_SET_NAME)`), create a file or run a command can put a newline or a
//! terminal's control sequence in that name. [`Name`] keeps the bytes; its `Display` writes them escaped the way
//! `ls -b` does ([`printable`]) and honours width and alignment (`{:<16}`), so a text row can neither be split nor
//! reach the root user's terminal as a control sequence. It serializes as the plain text (lossy for bytes that
//! are not UTF-8), which JSON escapes on its own.

use std::borrow::Cow;
use std::fmt;

use serde::{Serialize, Serializer};

use crate::attach::maps::c_bytes;
use crate::output::stdout::printable;

/// A name from the traced system: shown escaped ([`fmt::Display`]), serialized plain.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Vec<u8>);

impl Name {
    /// The name in a NUL-terminated C `char` array of a BPF record, up to the NUL.
    pub fn from_c<T: Copy + Into<i16>>(chars: &[T]) -> Name {
        Name(c_bytes(chars))
    }

    /// The name's bytes, as the kernel gave them.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The plain text, lossy for bytes that are not UTF-8 (for JSON, labels and comparisons).
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    /// The text a column shows: [`printable`].
    pub fn shown(&self) -> String {
        printable(&self.0)
    }

    /// Adds `text` at the end (a mark of our own, such as the one of a name cut short).
    pub fn push_str(&mut self, text: &str) {
        self.0.extend_from_slice(text.as_bytes());
    }

    /// True if the name has no byte.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.shown())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text(), f)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text())
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name(text.as_bytes().to_vec())
    }
}

impl From<String> for Name {
    fn from(text: String) -> Name {
        Name(text.into_bytes())
    }
}

impl From<Vec<u8>> for Name {
    fn from(bytes: Vec<u8>) -> Name {
        Name(bytes)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_escaped_and_padded_serialized_plain() {
        let name = Name::from_c(&b"evil\x1b[2J\nrow\0junk"[..].iter().map(|&b| b as i8).collect::<Vec<_>>());
        assert_eq!(name.bytes(), b"evil\x1b[2J\nrow");
        assert_eq!(format!("{name:<18}|"), "evil\\033[2J\\nrow  |");
        assert_eq!(format!("{:>6}", Name::from("ab")), "    ab");
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"evil\\u001b[2J\\nrow\"");
        assert_eq!(Name::from("bash"), "bash");
        assert_eq!(format!("{}", Name::from(b"\xffok".to_vec())), "\\xffok");
    }
}
