// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--heatmap FILE.svg`: interval log2 histograms drawn as a latency heat map.
//!
//! Time runs along x (one column per interval), BCC's log2 buckets up y (the bucket's range in the tool's unit),
//! and each cell's colour is its count on a log scale, white for none. The SVG is self-contained (no script, no
//! external font or style), with axes, units, a legend and a tooltip (`<title>`) per cell; every cell also carries
//! `data-column`, `data-slot` and `data-count` so that the picture can be checked against the tool's JSON.
//!
//! The SVG is written by hand rather than with a plotting crate: it is a grid of rectangles and some text, and
//! the whole module costs a few kilobytes of binary.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::hist::log2_bounds;

const CELL_W: usize = 22;
const CELL_H: usize = 16;
const LEFT: usize = 130;
const TOP: usize = 40;
const LEGEND_W: usize = 90;

/// `--heatmap FILE.svg` in a tool's run: the map and its file, made by [`HeatmapFile::open`] only when the flag is
/// given, so a tool calls [`HeatmapFile::push`] each interval and [`HeatmapFile::finish`] at the end unconditionally
/// on an `Option`.
#[derive(Debug)]
pub struct HeatmapFile {
    map: Heatmap,
    path: PathBuf,
}

impl HeatmapFile {
    /// A heat map titled `title` in `unit` for `path`, if given. The file is created (empty) at once, so a path that
    /// cannot be written fails before tracing starts, not after it.
    pub fn open(path: Option<&Path>, title: &str, unit: &'static str) -> Result<Option<HeatmapFile>> {
        let Some(path) = path else { return Ok(None) };
        std::fs::write(path, "").with_context(|| format!("--heatmap: cannot write {}", path.display()))?;
        Ok(Some(HeatmapFile { map: Heatmap::new(title, unit), path: path.to_path_buf() }))
    }

    /// Adds this interval's column, labelled with the time of day, from the cumulative slots of every histogram.
    pub fn push(&mut self, cumulative: &[u64]) {
        self.map.push_cumulative(super::stdout::clock_hms(), cumulative);
    }

    /// Writes the SVG.
    pub fn finish(&self) -> Result<()> {
        self.map.write_svg(&self.path)
    }
}

/// The slot-by-slot sum of several cumulative log2 histograms (every disk, task or function a tool keeps): what
/// one heat map column is made from.
pub fn sum_slots<'a>(hists: impl IntoIterator<Item = &'a [u64]>) -> Vec<u64> {
    let mut total: Vec<u64> = Vec::new();
    for slots in hists {
        if total.len() < slots.len() {
            total.resize(slots.len(), 0);
        }
        total.iter_mut().zip(slots).for_each(|(t, n)| *t += n);
    }
    total
}

/// The columns of a heat map, one per interval.
#[derive(Debug, Clone)]
pub struct Heatmap {
    title: String,
    unit: &'static str,
    columns: Vec<(String, Vec<u64>)>,
    previous: Vec<u64>,
}

impl Heatmap {
    /// A heat map titled `title` whose buckets are in `unit` (`usecs`, `msecs`).
    pub fn new(title: &str, unit: &'static str) -> Self {
        Heatmap { title: title.to_string(), unit, columns: Vec::new(), previous: Vec::new() }
    }

    /// Adds a column labelled `label` from cumulative slot counts (summed over every histogram the tool keeps):
    /// the column is what they grew by since the last call.
    pub fn push_cumulative(&mut self, label: String, cumulative: &[u64]) {
        let column = cumulative
            .iter()
            .enumerate()
            .map(|(i, now)| now.saturating_sub(self.previous.get(i).copied().unwrap_or(0)))
            .collect();
        self.previous = cumulative.to_vec();
        self.columns.push((label, column));
    }

    /// The columns so far: (label, per-slot counts).
    pub fn columns(&self) -> &[(String, Vec<u64>)] {
        &self.columns
    }

    /// Writes the SVG to `path` (through a temporary file, so a reader never sees half a picture).
    pub fn write_svg(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("svg.tmp");
        std::fs::write(&tmp, self.svg()).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
    }

    /// The heat map as an SVG document.
    pub fn svg(&self) -> String {
        let rows =
            self.columns.iter().filter_map(|(_, c)| c.iter().rposition(|&n| n > 0)).max().map_or(1, |top| top + 1);
        let max = self.columns.iter().flat_map(|(_, c)| c.iter().copied()).max().unwrap_or(0);
        let cols = self.columns.len().max(1);
        let (plot_w, plot_h) = (cols * CELL_W, rows * CELL_H);
        let width = LEFT + plot_w + 30 + LEGEND_W;
        let height = TOP + plot_h + 70;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">
<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>
<text x="{}" y="20" font-size="14" text-anchor="middle">{}</text>"#,
            width / 2,
            escape(&self.title)
        );
        // Cells: slot 0 at the bottom.
        let _ = writeln!(s, r#"<g id="cells" stroke="rgb(238,238,238)" stroke-width="0.5">"#);
        for (x, (label, column)) in self.columns.iter().enumerate() {
            for slot in 0..rows {
                let count = column.get(slot).copied().unwrap_or(0);
                let (low, high) = log2_bounds(slot);
                let _ = writeln!(
                    s,
                    r#"<rect x="{}" y="{}" width="{CELL_W}" height="{CELL_H}" fill="{}" data-column="{x}" data-slot="{slot}" data-count="{count}"><title>{} {low} -> {high} {}: {count}</title></rect>"#,
                    LEFT + x * CELL_W,
                    TOP + (rows - 1 - slot) * CELL_H,
                    colour(count, max),
                    escape(label),
                    self.unit
                );
            }
        }
        let _ = writeln!(s, "</g>");
        // Axes and labels.
        let (x0, y0, x1) = (LEFT, TOP + plot_h, LEFT + plot_w);
        let _ = writeln!(
            s,
            r#"<g id="axes" stroke="black"><line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{y0}"/><line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}"/></g>"#
        );
        for slot in 0..rows {
            let (low, high) = log2_bounds(slot);
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="end">{low} -> {high}</text>"#,
                LEFT - 6,
                TOP + (rows - 1 - slot) * CELL_H + CELL_H - 4
            );
        }
        let every = self.columns.len().div_ceil(12).max(1);
        for (x, (label, _)) in self.columns.iter().enumerate().step_by(every) {
            let cx = LEFT + x * CELL_W + CELL_W / 2;
            let _ = writeln!(
                s,
                r#"<text x="{cx}" y="{}" text-anchor="end" transform="rotate(-45 {cx} {})">{}</text>"#,
                y0 + 14,
                y0 + 14,
                escape(label)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">time (one column per interval)</text>"#,
            LEFT + plot_w / 2,
            height - 6
        );
        let _ = writeln!(
            s,
            r#"<text x="14" y="{}" text-anchor="middle" transform="rotate(-90 14 {})">latency ({})</text>"#,
            TOP + plot_h / 2,
            TOP + plot_h / 2,
            self.unit
        );
        // Legend: the colour scale from 1 to the largest count.
        let lx = LEFT + plot_w + 30;
        let steps = 8;
        let _ = writeln!(s, r#"<g id="legend"><text x="{lx}" y="{}">count</text>"#, TOP - 6);
        for i in 0..steps {
            let count = if max <= 1 { max } else { (max as f64).powf(i as f64 / (steps - 1) as f64).round() as u64 };
            let y = TOP + i * 14;
            let _ = writeln!(
                s,
                r#"<rect x="{lx}" y="{y}" width="14" height="14" fill="{}" stroke="gray" stroke-width="0.5"/><text x="{}" y="{}">{count}</text>"#,
                colour(count.max(1).min(max), max),
                lx + 20,
                y + 11
            );
        }
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="14" height="14" fill="white" stroke="gray" stroke-width="0.5"/><text x="{}" y="{}">0</text></g>"#,
            TOP + steps * 14 + 4,
            lx + 20,
            TOP + steps * 14 + 15
        );
        s.push_str("</svg>\n");
        s
    }
}

/// White for no events, else from pale yellow to dark red by log(count) / log(max).
fn colour(count: u64, max: u64) -> String {
    if count == 0 || max == 0 {
        return "#ffffff".to_string();
    }
    let t = if max <= 1 { 1.0 } else { ((count as f64).ln() / (max as f64).ln()).clamp(0.0, 1.0) };
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", lerp(255.0, 140.0), lerp(237.0, 0.0), lerp(160.0, 20.0))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_interval_differences_and_cells_carry_counts() {
        let mut h = Heatmap::new("t", "usecs");
        h.push_cumulative("a".into(), &[1, 2, 0]);
        h.push_cumulative("b".into(), &[1, 5, 4]);
        assert_eq!(h.columns()[1].1, vec![0, 3, 4]);
        let svg = h.svg();
        assert!(svg.contains(r#"data-column="1" data-slot="2" data-count="4""#), "{svg}");
        assert_eq!(svg.matches("data-count=").count(), 6);
        assert!(svg.contains("4 -> 7"));
    }

    #[test]
    fn colours_run_from_white_to_dark_red() {
        assert_eq!(colour(0, 10), "#ffffff");
        assert_eq!(colour(10, 10), "#8c0014");
        assert_ne!(colour(1, 10), colour(10, 10));
    }
}
