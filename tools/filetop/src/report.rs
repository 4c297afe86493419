// SPDX-License-Identifier: Apache-2.0 OR MIT
//! filetop's output: BCC's screen (the top of common::output::topscreen, then `TID COMM READS WRITES R_Kb W_Kb T
//! FILE`, sorted, at most -r rows) or one JSON object per row per interval.

use common::attach::maps::c_bytes;
use common::output::name::Name;
use common::output::stdout::printable;
use common::output::topscreen;
use serde::Serialize;

use crate::bpf::consts::NAME_LEN;
use crate::bpf::types::{file_key, file_stat};
use crate::Sort;

/// One thread's reads and writes of one file, over one interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub tid: u32,
    pub pid: u32,
    pub comm: Name,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// `R` regular file, `S` socket, `O` other, as BCC's T column.
    #[serde(rename = "type")]
    pub kind: char,
    /// The file's name as shown (BCC's FILE: the last component, cut to 29 bytes and "..." past 32).
    pub file: String,
    /// The file system's device, and the inode there.
    pub dev_major: u32,
    pub dev_minor: u32,
    pub inode: u64,
    /// The text column FILE, its bytes escaped as `ls -b` does: a name may hold a newline or a terminal's control
    /// sequence.
    #[serde(skip)]
    pub shown_file: String,
}

/// BCC's FILE column: a name longer than the bytes kept loses its last three of them to "..." (at a character's
/// boundary), each part shown by `show` (plain text, or escaped for a text column).
pub fn shown_name(kept: &[u8], len: u32, show: impl Fn(&[u8]) -> String) -> String {
    if len as usize > NAME_LEN {
        let mut end = kept.len().min(NAME_LEN - 3);
        if let Err(e) = std::str::from_utf8(&kept[..end]) {
            if e.error_len().is_none() {
                end = e.valid_up_to();
            }
        }
        show(&kept[..end]) + "..."
    } else {
        show(kept)
    }
}

/// The plain text of a name's bytes (invalid UTF-8 replaced), as JSON and the metrics' labels carry it.
pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Row {
    /// The row of `key` with what was added since `earlier`.
    pub fn new(key: &file_key, now: &file_stat, earlier: &file_stat) -> Row {
        Row {
            tid: key.tid,
            pid: key.pid,
            comm: Name::from_c(&key.comm),
            reads: now.reads.saturating_sub(earlier.reads),
            writes: now.writes.saturating_sub(earlier.writes),
            read_bytes: now.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: now.write_bytes.saturating_sub(earlier.write_bytes),
            kind: match now.r#type as u8 {
                b'R' => 'R',
                b'S' => 'S',
                _ => 'O',
            },
            file: shown_name(&c_bytes(&now.name), now.name_len, lossy),
            // The kernel's encoding of a device number: 12 bits of major above 20 bits of minor.
            dev_major: key.dev >> 20,
            dev_minor: key.dev & 0xfffff,
            inode: key.inode,
            shown_file: shown_name(&c_bytes(&now.name), now.name_len, printable),
        }
    }

    fn sort_key(&self, sort: Sort) -> u64 {
        match sort {
            Sort::Reads => self.reads,
            Sort::Writes => self.writes,
            Sort::Rbytes => self.read_bytes,
            Sort::Wbytes => self.write_bytes,
            Sort::All => self.reads + self.writes + self.read_bytes + self.write_bytes,
        }
    }
}

impl topscreen::TopRow for Row {
    type Sort = Sort;

    fn header() -> String {
        format!(
            "{:<7} {:<16} {:<6} {:<6} {:<7} {:<7} {:1} {}",
            "TID", "COMM", "READS", "WRITES", "R_Kb", "W_Kb", "T", "FILE"
        )
    }

    fn line(&self) -> String {
        let r = self;
        format!(
            "{:<7} {:<16} {:<6} {:<6} {:<7} {:<7} {:1} {}",
            r.tid,
            r.comm,
            r.reads,
            r.writes,
            r.read_bytes / 1024,
            r.write_bytes / 1024,
            r.kind,
            r.shown_file
        )
    }

    /// Largest first by the sort key, then by TID and file.
    fn order(&self, other: &Self, sort: Sort) -> std::cmp::Ordering {
        other
            .sort_key(sort)
            .cmp(&self.sort_key(sort))
            .then(self.tid.cmp(&other.tid))
            .then_with(|| self.file.cmp(&other.file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::output::topscreen::Screen;

    fn row(tid: u32, reads: u64, writes: u64, read_bytes: u64, write_bytes: u64, file: &str) -> Row {
        Row {
            tid,
            pid: tid,
            comm: "cksum".into(),
            reads,
            writes,
            read_bytes,
            write_bytes,
            kind: 'R',
            file: file.into(),
            dev_major: 254,
            dev_minor: 0,
            inode: 12,
            shown_file: file.into(),
        }
    }

    #[test]
    fn bcc_columns_and_kb_rounded_down() {
        let screen = Screen { clear: false, sort: Sort::All, rows: 20 };
        let t = screen
            .table(vec![row(809, 2, 0, 8191, 0, "nsswitch.conf"), row(32672, 5006, 0, 328_073_216, 1023, "data1")]);
        let want = "\
TID     COMM             READS  WRITES R_Kb    W_Kb    T FILE
32672   cksum            5006   0      320384  0       R data1
809     cksum            2      0      7       0       R nsswitch.conf
";
        assert_eq!(t, want);
    }

    #[test]
    fn sort_orders_and_row_limit() {
        let rows = || vec![row(1, 10, 0, 100, 0, "a"), row(2, 1, 3, 50, 9000, "b"), row(3, 2, 1, 20_000, 10, "c")];
        let first = |sort, n| {
            let t = Screen { clear: false, sort, rows: n }.table(rows());
            let tids: Vec<String> =
                t.lines().skip(1).map(|l| l.split_whitespace().next().unwrap().to_string()).collect();
            tids.join(",")
        };
        assert_eq!(first(Sort::Reads, 20), "1,3,2");
        assert_eq!(first(Sort::Writes, 20), "2,3,1");
        assert_eq!(first(Sort::Rbytes, 20), "3,1,2");
        assert_eq!(first(Sort::Wbytes, 20), "2,3,1");
        assert_eq!(first(Sort::All, 20), "3,2,1");
        assert_eq!(first(Sort::Reads, 1), "1");
    }

    #[test]
    fn long_names_end_in_dots() {
        let kept = b"abcdefghijklmnopqrstuvwxyz012345";
        assert_eq!(shown_name(kept, 32, lossy), "abcdefghijklmnopqrstuvwxyz012345");
        assert_eq!(shown_name(kept, 40, lossy), "abcdefghijklmnopqrstuvwxyz012...");
        assert_eq!(shown_name(b"null", 4, lossy), "null");
        // Cut at a character's boundary: the 29 bytes kept would end inside the last two-byte character.
        let accents = "\u{e9}".repeat(16);
        assert_eq!(shown_name(accents.as_bytes(), 40, lossy), "\u{e9}".repeat(14) + "...");
        assert_eq!(shown_name(b"a\nb\x1b[2J", 7, printable), "a\\nb\\033[2J");
    }
}
