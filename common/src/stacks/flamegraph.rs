// SPDX-License-Identifier: Apache-2.0 OR MIT
//! `--flamegraph FILE`: an SVG flame graph of the folded stacks ([`write_flamegraph`]).
//!
//! The graph is drawn here, without a flame graph library: the stacks are merged into a tree (a frame's children
//! sorted by name, so equal stacks always draw the same), each frame is a box as wide as its share of the total,
//! the root at the bottom and callees above their callers. Hovering over a box shows its name, value and share
//! (an SVG `<title>`). The file is static: no script, so it opens the same in a browser, an image viewer or a
//! document.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::Result;

use super::folded::folded_stack;
use super::{Frame, Sample, Style};

/// The colours of a flame graph.
#[derive(Debug, Clone, Copy)]
pub enum Palette {
    /// On-CPU: the usual warm colours.
    Hot,
    /// Off-CPU: blue, as in the usual off-CPU flame graphs.
    Io,
    /// Wakeups and chains: aqua.
    Wakeup,
}

/// How a flame graph is drawn: its title, the unit of the values, and its colours.
#[derive(Debug, Clone)]
pub struct FlameGraph {
    pub title: String,
    pub count_name: String,
    pub palette: Palette,
}

/// `--flamegraph FILE`: an SVG flame graph of the folded stacks, written to `file`.
pub fn write_flamegraph(file: File, samples: &[Sample<Frame>], style: Style, graph: &FlameGraph) -> Result<()> {
    let mut root = Node::default();
    for sample in samples {
        let stack = folded_stack(sample, style);
        root.add(stack.split(';').filter(|frame| !frame.is_empty()), sample.value);
    }
    let mut writer = BufWriter::new(file);
    writer.write_all(render(&root, graph).as_bytes())?;
    writer.flush()?;
    Ok(())
}

/// Creates the flame graph's file now, so that a bad path fails before tracing, not after.
pub fn create_flamegraph_file(path: Option<&std::path::Path>) -> Result<Option<File>> {
    use anyhow::Context;
    path.map(|path| File::create(path).with_context(|| format!("cannot create {}", path.display()))).transpose()
}

/// One frame of the merged stacks: its total (its own value and its callees') and its callees by name.
#[derive(Debug, Default)]
struct Node {
    value: u64,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn add<'a>(&mut self, mut frames: impl Iterator<Item = &'a str>, value: u64) {
        self.value += value;
        if let Some(frame) = frames.next() {
            self.children.entry(frame.to_string()).or_default().add(frames, value);
        }
    }

    fn depth(&self) -> usize {
        self.children.values().map(|child| 1 + child.depth()).max().unwrap_or(0)
    }
}

/// The layout, in pixels.
const WIDTH: f64 = 1200.0;
const PAD: f64 = 10.0;
const FRAME_HEIGHT: f64 = 16.0;
const TITLE_HEIGHT: f64 = 36.0;
const FOOT_HEIGHT: f64 = 20.0;
const FONT_SIZE: f64 = 12.0;
/// The average width of a character of the font, for fitting names into boxes.
const CHAR_WIDTH: f64 = FONT_SIZE * 0.59;
/// Boxes narrower than this are left out: they could not be seen or hovered.
const MIN_WIDTH: f64 = 0.1;

/// The whole SVG document of the tree under `root` ("all").
fn render(root: &Node, graph: &FlameGraph) -> String {
    let height = TITLE_HEIGHT + FRAME_HEIGHT * (root.depth() + 1) as f64 + FOOT_HEIGHT;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" \
         xmlns=\"http://www.w3.org/2000/svg\">\n\
         <rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#f8f8f8\"/>\n\
         <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-family=\"Verdana, sans-serif\" font-size=\"17\">{}</text>\n\
         <text x=\"{PAD}\" y=\"{}\" font-family=\"Verdana, sans-serif\" font-size=\"{FONT_SIZE}\">{} {}: \
         hover over a frame for its value</text>\n\
         <g font-family=\"Verdana, sans-serif\" font-size=\"{FONT_SIZE}\">\n",
        WIDTH / 2.0,
        escape(&graph.title),
        height - 6.0,
        root.value,
        escape(&graph.count_name),
    );
    let scale = if root.value == 0 { 0.0 } else { (WIDTH - 2.0 * PAD) / root.value as f64 };
    let graph_bottom = height - FOOT_HEIGHT;
    draw(&mut svg, "all", root, root.value, PAD, 0, scale, graph_bottom, graph);
    svg.push_str("</g>\n</svg>\n");
    svg
}

/// Draws `node` at `x` and `depth` (0 is the bottom row), then its callees above it, left to right.
#[allow(clippy::too_many_arguments)]
fn draw(
    svg: &mut String,
    name: &str,
    node: &Node,
    total: u64,
    x: f64,
    depth: usize,
    scale: f64,
    bottom: f64,
    graph: &FlameGraph,
) {
    let width = node.value as f64 * scale;
    if width < MIN_WIDTH {
        return;
    }
    let y = bottom - FRAME_HEIGHT * (depth + 1) as f64;
    let share = if total == 0 { 0.0 } else { node.value as f64 * 100.0 / total as f64 };
    let (r, g, b) = colour(name, graph.palette);
    let _ = write!(
        svg,
        "<g><title>{} ({} {}, {share:.2}%)</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" \
         height=\"{:.1}\" fill=\"rgb({r},{g},{b})\" rx=\"2\" ry=\"2\"/>",
        escape(name),
        thousands(node.value),
        escape(&graph.count_name),
        FRAME_HEIGHT - 1.0,
    );
    if let Some(label) = fit(name, width) {
        let _ = write!(svg, "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>", x + 3.0, y + FRAME_HEIGHT - 4.5, escape(&label));
    }
    svg.push_str("</g>\n");
    let mut child_x = x;
    for (child_name, child) in &node.children {
        draw(svg, child_name, child, total, child_x, depth + 1, scale, bottom, graph);
        child_x += child.value as f64 * scale;
    }
}

/// The part of `name` that fits in a box `width` pixels wide, cut with ".." when it is longer; none if fewer
/// than three characters would fit.
fn fit(name: &str, width: f64) -> Option<String> {
    let room = ((width - 6.0) / CHAR_WIDTH).floor();
    if room < 3.0 {
        return None;
    }
    let room = room as usize;
    if name.chars().count() <= room {
        return Some(name.to_string());
    }
    Some(name.chars().take(room - 2).chain("..".chars()).collect())
}

/// A colour for a frame: the palette's hue, varied by a hash of the name so that neighbours differ and the same
/// function has the same colour everywhere in the graph.
fn colour(name: &str, palette: Palette) -> (u8, u8, u8) {
    // FNV-1a, then three independent fractions from its bytes.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let fraction = |shift: u32| ((hash >> shift) & 0xff) as f64 / 255.0;
    let (a, b, c) = (fraction(0), fraction(8), fraction(16));
    let channel = |base: f64, span: f64, v: f64| (base + span * v).round().clamp(0.0, 255.0) as u8;
    match palette {
        Palette::Hot => (channel(205.0, 50.0, a), channel(0.0, 230.0, b), channel(0.0, 55.0, c)),
        Palette::Io => {
            let grey = channel(80.0, 60.0, a);
            (grey, grey, channel(190.0, 55.0, b))
        }
        Palette::Wakeup => (channel(50.0, 60.0, a), channel(165.0, 55.0, b), channel(165.0, 55.0, c)),
    }
}

/// `1234567` as `1,234,567`.
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Text made safe for XML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph() -> FlameGraph {
        FlameGraph { title: "T & <x>".into(), count_name: "us".into(), palette: Palette::Io }
    }

    fn tree(lines: &[(&str, u64)]) -> Node {
        let mut root = Node::default();
        for (stack, value) in lines {
            root.add(stack.split(';'), *value);
        }
        root
    }

    #[test]
    fn merges_stacks_and_sizes_boxes_by_value() {
        let root = tree(&[("a;b;c", 30), ("a;b", 10), ("a;d", 60)]);
        assert_eq!(root.value, 100);
        assert_eq!(root.depth(), 3);
        assert_eq!(root.children["a"].children["b"].value, 40);
        let svg = render(&root, &graph());
        assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("T &amp; &lt;x&gt;"), "the title is escaped");
        assert!(svg.contains("<title>all (100 us, 100.00%)</title>"), "{svg}");
        assert!(svg.contains("<title>b (40 us, 40.00%)</title>"), "{svg}");
        assert!(svg.contains("<title>d (60 us, 60.00%)</title>"), "{svg}");
        // b (40%) starts at the left edge, d (60%) right after it: 1180 px of graph, 472 px for b.
        assert!(svg.contains("x=\"10.0\" y=\"") && svg.contains("x=\"482.0\""), "{svg}");
    }

    #[test]
    fn names_are_cut_to_fit_and_tiny_boxes_left_out() {
        assert_eq!(fit("helper_sleep", 500.0).as_deref(), Some("helper_sleep"));
        assert_eq!(fit("helper_sleep", 6.0 + CHAR_WIDTH * 6.0).as_deref(), Some("help.."));
        assert_eq!(fit("helper_sleep", 10.0), None);
        let root = tree(&[("big", 1_000_000), ("tiny", 1)]);
        assert!(!render(&root, &graph()).contains("tiny"));
    }

    #[test]
    fn colours_stay_in_the_palette_and_are_stable() {
        assert_eq!(colour("schedule", Palette::Hot), colour("schedule", Palette::Hot));
        let (r, _, b) = colour("schedule", Palette::Io);
        assert!(b >= 190 && r <= 140);
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
