//! What tools print: [`stdout`] (buffered, flushed per record, a closed pipe a quiet end, JSON lines, clocks)
//! and [`hist`] (BCC's log2 and linear histograms, differenced from cumulative kernel maps).

pub mod heatmap;
pub mod hist;
pub mod metrics;
pub mod stacks;
pub mod stdout;
