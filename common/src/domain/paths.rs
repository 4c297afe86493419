// SPDX-License-Identifier: Apache-2.0 OR MIT
//! Paths put together from a walk up the dentries in BPF (`-F` of opensnoop and filelife): the BPF side sends the
//! directory names innermost first, and whether the walk reached the root; [`from_walk`] joins them.

/// `/` + the directory names outermost first + `name`, led by `...` when the walk stopped short of the root. A
/// mount stacked on another's root shows in the walk as a directory named `/`: it is no component of the path.
pub fn from_walk<I>(innermost_first: I, complete: bool, name: &str) -> String
where
    I: IntoIterator<Item = String>,
    I::IntoIter: DoubleEndedIterator,
{
    let mut path = String::from(if complete { "" } else { "..." });
    for dir in innermost_first.into_iter().rev().filter(|d| d != "/") {
        path.push('/');
        path.push_str(&dir);
    }
    path.push('/');
    path.push_str(name);
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn outermost_first_without_stacked_mount_roots() {
        assert_eq!(from_walk(dirs(&["shm", "/", "/", "dev"]), true, "x"), "/dev/shm/x");
        assert_eq!(from_walk(dirs(&["b", "a"]), false, "x"), ".../a/b/x");
        assert_eq!(from_walk(dirs(&[]), true, "x"), "/x");
    }
}
