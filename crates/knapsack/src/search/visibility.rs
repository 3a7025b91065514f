//! Search visibility: one invocation-local policy deciding which root-relative
//! paths a listing or search may see.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// Supplies the ignore-file text of one directory, already bounded by the adapter.
///
/// `dir` is canonical and root-relative (`""` for the root). The texts are
/// interpreted with gitignore grammar by the `ignore` crate, later texts
/// taking precedence over earlier ones within a directory.
pub trait IgnoreSource {
    /// The ignore-file texts of `dir` (e.g. its `.gitignore`, then `.ignore`).
    fn ignore_texts(&self, dir: &str) -> Vec<String>;
}

impl<F: Fn(&str) -> Vec<String>> IgnoreSource for F {
    fn ignore_texts(&self, dir: &str) -> Vec<String> {
        self(dir)
    }
}

/// The visibility policy of one invocation: build one per list, glob or grep call.
///
/// A path is hidden when any of its components is `.git`, when an ancestor
/// directory is hidden (a file cannot be re-included under an excluded
/// directory, as in git), or when the deepest ignore rule that matches it
/// ignores it; a negated rule (`!keep.txt`) in a deeper directory re-includes.
/// Exact-path reads do not consult it.
pub struct SearchVisibility<S> {
    source: S,
    matchers: HashMap<String, Option<Gitignore>>,
    directories: HashMap<String, bool>,
}

impl<S: IgnoreSource> SearchVisibility<S> {
    /// A fresh policy that loads ignore texts from `source` as directories are met.
    pub fn new(source: S) -> Self {
        Self {
            source,
            matchers: HashMap::new(),
            directories: HashMap::new(),
        }
    }

    /// Whether the canonical root-relative `path` (`""` is the root) is visible.
    pub fn is_visible(&mut self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() {
            return true;
        }
        if path.split('/').any(|c| c == ".git") {
            return false;
        }
        let segments: Vec<&str> = path.split('/').collect();
        for end in 1..segments.len() {
            let ancestor = segments[..end].join("/");
            if !self.directory_visible(&ancestor) {
                return false;
            }
        }
        self.own_rules_allow(path, is_dir)
    }

    fn directory_visible(&mut self, dir: &str) -> bool {
        if let Some(known) = self.directories.get(dir) {
            return *known;
        }
        let visible = self.own_rules_allow(dir, true);
        self.directories.insert(dir.to_owned(), visible);
        visible
    }

    /// [`SearchVisibility::is_visible`] for an entry whose parent directory is
    /// already known to be visible (a walk descends only into visible directories).
    pub(crate) fn is_visible_child(&mut self, path: &str, is_dir: bool) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        if name == ".git" {
            return false;
        }
        let visible = self.own_rules_allow(path, is_dir);
        if is_dir {
            self.directories.insert(path.to_owned(), visible);
        }
        visible
    }

    /// Consults the matchers of the enclosing directories, deepest first.
    fn own_rules_allow(&mut self, path: &str, is_dir: bool) -> bool {
        let full = virtual_path(path);
        let parents = path
            .rmatch_indices('/')
            .map(|(at, _)| &path[..at])
            .chain(std::iter::once(""));
        for dir in parents {
            let Some(matcher) = self.matcher(dir) else {
                continue;
            };
            match matcher.matched(&full, is_dir) {
                Match::Ignore(_) => return false,
                Match::Whitelist(_) => return true,
                Match::None => {}
            }
        }
        true
    }

    fn matcher(&mut self, dir: &str) -> Option<&Gitignore> {
        if !self.matchers.contains_key(dir) {
            let texts = self.source.ignore_texts(dir);
            let built = if texts.is_empty() {
                None
            } else {
                let mut builder = GitignoreBuilder::new(virtual_path(dir));
                for text in &texts {
                    for line in text.lines() {
                        // A malformed line is skipped, as git does.
                        if let Err(error) = builder.add_line(None, line) {
                            tracing::debug!(dir, %error, "ignore rule skipped");
                        }
                    }
                }
                builder.build().ok()
            };
            self.matchers.insert(dir.to_owned(), built);
        }
        self.matchers.get(dir).and_then(Option::as_ref)
    }
}

/// Root-relative paths are matched under a virtual absolute root, so matcher
/// roots and paths share a prefix the `ignore` crate can strip.
fn virtual_path(relative: &str) -> PathBuf {
    Path::new("/").join(relative)
}
