// SPDX-License-Identifier: Apache-2.0 OR MIT
//! slabratetop's output: BCC's screen (the top of common::output::topscreen, then `CACHE ALLOCS BYTES`, sorted,
//! at most -r rows) or one JSON object per cache per interval.

use common::output::topscreen;
use serde::Serialize;

use crate::bpf::types::cache_stat;
use crate::Sort;

/// One cache's allocations over one interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The cache's name; on kernels before 6.1, the allocating function as `name()`.
    pub cache: String,
    pub allocs: u64,
    pub bytes: u64,
}

impl Row {
    /// The row of `cache` with what was added since `earlier`.
    pub fn new(cache: String, now: &cache_stat, earlier: &cache_stat) -> Row {
        Row { cache, allocs: now.allocs.saturating_sub(earlier.allocs), bytes: now.bytes.saturating_sub(earlier.bytes) }
    }
}

impl topscreen::TopRow for Row {
    type Sort = Sort;

    fn header() -> String {
        format!("{:<32} {:>6} {:>10}", "CACHE", "ALLOCS", "BYTES")
    }

    fn line(&self) -> String {
        format!("{:<32} {:>6} {:>10}", self.cache, self.allocs, self.bytes)
    }

    /// The chosen order, largest first for counts and bytes; ties (and -s name) by name.
    fn order(&self, other: &Self, sort: Sort) -> std::cmp::Ordering {
        let by_name = self.cache.to_lowercase().cmp(&other.cache.to_lowercase()).then(self.cache.cmp(&other.cache));
        match sort {
            Sort::Name => by_name,
            Sort::Count => other.allocs.cmp(&self.allocs).then(by_name),
            Sort::Size => other.bytes.cmp(&self.bytes).then(by_name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::output::topscreen::Screen;

    fn row(cache: &str, allocs: u64, bytes: u64) -> Row {
        Row { cache: cache.into(), allocs, bytes }
    }

    #[test]
    fn bcc_columns_by_bytes() {
        let screen = Screen { clear: false, sort: Sort::Size, rows: 20 };
        let t = screen.table(vec![row("dentry", 135, 25920), row("kmalloc-4096", 3554, 14557184)]);
        let want = "\
CACHE                            ALLOCS      BYTES
kmalloc-4096                       3554   14557184
dentry                              135      25920
";
        assert_eq!(t, want);
    }

    #[test]
    fn sort_orders_and_row_limit() {
        let rows = || vec![row("b", 10, 100), row("A", 1, 4096), row("c", 5, 2000)];
        let first = |sort, n| {
            let t = Screen { clear: false, sort, rows: n }.table(rows());
            let names: Vec<String> =
                t.lines().skip(1).map(|l| l.split_whitespace().next().unwrap().to_string()).collect();
            names.join(",")
        };
        assert_eq!(first(Sort::Size, 20), "A,c,b");
        assert_eq!(first(Sort::Count, 20), "b,c,A");
        assert_eq!(first(Sort::Name, 20), "A,b,c");
        assert_eq!(first(Sort::Size, 1), "A");
    }
}
