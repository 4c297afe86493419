// SPDX-License-Identifier: Apache-2.0 OR MIT
//! BCC's top-style screens (biotop, filetop, slabratetop and the like), refreshed every interval.
//!
//! Each screen starts with its top ([`write_top`]): the screen cleared (or, with `-C`, a blank line), then the
//! time of day and `/proc/loadavg` as BCC prints them, `HH:MM:SS loadavg: 0.42 0.44 0.39 2/282 22115`, followed by
//! a blank line (BCC prints the file with its newline, then its own). Then the table: a tool's rows are a
//! [`TopRow`] (its header, its line, its order for each `-s` choice), and [`Screen`] (`-C`, `-s` and `-r`) sorts
//! them, keeps the first `-r` and prints them. With `--json`, [`write_json`] prints every row of the interval, each
//! with the interval's timestamp (`-r` limits the screen only).

use std::cmp::Ordering;
use std::io::{self, Write};

use serde::Serialize;

use super::stdout::{clock_rfc3339, Output};

/// What `clear` prints on a terminal: cursor home, erase the screen.
pub const CLEAR: &str = "\x1b[H\x1b[2J";

/// Writes the screen's top: cleared or a blank line, then (with `loadavg`) the load average line.
pub fn write_top(out: &mut impl Write, clear: bool, loadavg: bool) -> io::Result<()> {
    if clear {
        write!(out, "{CLEAR}")?;
    } else {
        writeln!(out)?;
    }
    if loadavg {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        writeln!(out, "{:<8} loadavg: {}", super::stdout::clock_hms(), load)?;
    }
    Ok(())
}

/// One row of a top screen.
pub trait TopRow {
    /// The tool's `-s` choices.
    type Sort: Copy;
    /// The column header, without its newline.
    fn header() -> String;
    /// The row's line, without its newline.
    fn line(&self) -> String;
    /// Where the row goes against `other` when sorted by `sort` (`Less`: shown first).
    fn order(&self, other: &Self, sort: Self::Sort) -> Ordering;
}

/// A top screen's options: BCC's `-C` (noclear), `-s` (sort) and `-r` (the most rows shown).
#[derive(Debug, Clone, Copy)]
pub struct Screen<S> {
    pub clear: bool,
    pub sort: S,
    pub rows: usize,
}

impl<S: Copy> Screen<S> {
    /// The screen of `-C` (`noclear`), `-s` and `-r` (`maxrows`) as the tool's flags give them.
    pub fn from_flags(noclear: bool, sort: S, maxrows: u64) -> Self {
        Screen { clear: !noclear, sort, rows: usize::try_from(maxrows).unwrap_or(usize::MAX) }
    }

    /// One interval's screen: its top, then [`Screen::table`].
    pub fn write<R: TopRow<Sort = S>>(&self, out: &mut impl Write, rows: Vec<R>) -> io::Result<()> {
        write_top(out, self.clear, true)?;
        write!(out, "{}", self.table(rows))?;
        out.flush()
    }

    /// One report of a top tool: JSON lines with `--json`, else the screen, then `Detaching...` after the last
    /// report (`last`), as BCC's top tools end.
    pub fn report<R: TopRow<Sort = S> + Serialize>(
        &self,
        out: &mut Output,
        rows: Vec<R>,
        json: bool,
        last: bool,
    ) -> io::Result<()> {
        if json {
            return write_json(out, &rows);
        }
        self.write(out, rows)?;
        if last {
            writeln!(out, "Detaching...")?;
        }
        out.flush()
    }

    /// The header and the first `rows` rows in the order `sort` asks for.
    pub fn table<R: TopRow<Sort = S>>(&self, mut rows: Vec<R>) -> String {
        rows.sort_by(|a, b| a.order(b, self.sort));
        rows.truncate(self.rows);
        let mut table = R::header();
        table.push('\n');
        for row in rows {
            table += &row.line();
            table.push('\n');
        }
        table
    }
}

/// `--json`: one line per row of the interval (all of them), each with the interval's `timestamp` first.
pub fn write_json<R: Serialize>(out: &mut Output, rows: impl IntoIterator<Item = R>) -> io::Result<()> {
    #[derive(Serialize)]
    struct Stamped<'a, R> {
        time: &'a str,
        #[serde(flatten)]
        row: R,
    }
    let timestamp = clock_rfc3339();
    for row in rows {
        out.json_line(&Stamped { time: &timestamp, row })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_line_then_loadavg_then_blank_line() {
        let mut out = Vec::new();
        write_top(&mut out, false, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines[0], "");
        assert_eq!(&lines[1][8..18], " loadavg: ");
        assert_eq!(lines[2], "");
        let mut out = Vec::new();
        write_top(&mut out, true, false).unwrap();
        assert_eq!(out, CLEAR.as_bytes());
    }
}
