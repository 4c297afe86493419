//! funccount's targets are the shared probe patterns of `common::process::targets`.

pub use common::process::targets::*;
