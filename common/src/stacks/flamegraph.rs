//! `--flamegraph FILE`: an SVG flame graph of the folded stacks, drawn by inferno ([`write_flamegraph`]).

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
    use inferno::flamegraph::color::{BasicPalette, Palette as InfernoPalette};
    let lines: Vec<String> = samples.iter().map(|s| format!("{} {}", folded_stack(s, style), s.value)).collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = graph.title.clone();
    options.count_name = graph.count_name.clone();
    options.colors = InfernoPalette::Basic(match graph.palette {
        Palette::Hot => BasicPalette::Hot,
        Palette::Io => BasicPalette::Io,
        Palette::Wakeup => BasicPalette::Aqua,
    });
    let mut writer = BufWriter::new(file);
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut writer)?;
    writer.flush()?;
    Ok(())
}

/// Creates the flame graph's file now, so that a bad path fails before tracing, not after.
pub fn create_flamegraph_file(path: Option<&std::path::Path>) -> Result<Option<File>> {
    use anyhow::Context;
    path.map(|path| File::create(path).with_context(|| format!("cannot create {}", path.display()))).transpose()
}
