//! Listing and glob over a local root, and the walk grep shares, through one visibility
//! policy per call.

use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};

use super::visibility::{IgnoreSource, SearchVisibility};
use crate::error::FilesError;
use crate::limits::{RESULT_LIMIT, TEXT_LIMIT_BYTES};
use crate::types::{EntriesOutput, Entry, EntryKind};

/// Reads `.gitignore` then `.ignore` of a directory under a local root, each bounded to 128 KiB.
pub(crate) struct LocalIgnoreFiles<'a> {
    pub(crate) root: &'a Path,
}

impl IgnoreSource for LocalIgnoreFiles<'_> {
    fn ignore_texts(&self, dir: &str) -> Vec<String> {
        [".gitignore", ".ignore"]
            .iter()
            .filter_map(|name| {
                let path = self.root.join(dir).join(name);
                // Only regular files: an ignore "file" that is a symlink is not followed.
                let metadata = std::fs::symlink_metadata(&path).ok()?;
                if !metadata.is_file() {
                    return None;
                }
                let mut bytes = Vec::new();
                std::fs::File::open(&path)
                    .ok()?
                    .take(TEXT_LIMIT_BYTES as u64)
                    .read_to_end(&mut bytes)
                    .ok()?;
                Some(String::from_utf8_lossy(&bytes).into_owned())
            })
            .collect()
    }
}

/// A local root as the walks see it: its directory and the root-relative
/// directories the host hid from the file tools (such as its own data directory).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WalkRoot<'a> {
    pub(crate) path: &'a Path,
    pub(crate) hidden: &'a [String],
}

impl WalkRoot<'_> {
    pub(crate) fn is_hidden(&self, rel: &str) -> bool {
        self.hidden.iter().any(|hidden| {
            rel.strip_prefix(hidden.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }
}

/// Walks `start` (root-relative `start_rel`) depth-first with names sorted,
/// calling `visit` for every visible entry with a UTF-8 name; symlinks are
/// reported but never followed, and hidden directories are left out.
pub(crate) fn walk(
    root: WalkRoot<'_>,
    start_rel: &str,
    recursive: bool,
    visit: &mut dyn FnMut(&str, EntryKind) -> ControlFlow<()>,
) -> Result<(), FilesError> {
    let mut visibility = SearchVisibility::new(LocalIgnoreFiles { root: root.path });
    if !visibility.is_visible(start_rel, true) || root.is_hidden(start_rel) {
        return Ok(());
    }
    // Whether the visitor stopped early is the visitor's own business.
    walk_dir(root, start_rel, recursive, &mut visibility, visit).map(drop)
}

fn walk_dir(
    walk_root: WalkRoot<'_>,
    dir_rel: &str,
    recursive: bool,
    visibility: &mut SearchVisibility<LocalIgnoreFiles<'_>>,
    visit: &mut dyn FnMut(&str, EntryKind) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, FilesError> {
    let root = walk_root.path;
    let dir = root.join(dir_rel);
    let reader = std::fs::read_dir(&dir).map_err(|e| FilesError::io(dir_rel, &e))?;
    let mut children = Vec::new();
    for entry in reader {
        let entry = entry.map_err(|e| FilesError::io(dir_rel, &e))?;
        // Names that are not UTF-8 cannot be named in a request; leave them out.
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let file_type = entry.file_type().map_err(|e| FilesError::io(dir_rel, &e))?;
        let kind = if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        children.push((name, kind));
    }
    children.sort();
    for (name, kind) in children {
        let rel = if dir_rel.is_empty() {
            name
        } else {
            format!("{dir_rel}/{name}")
        };
        if walk_root.is_hidden(&rel) || !visibility.is_visible_child(&rel, kind == EntryKind::Dir) {
            continue;
        }
        if visit(&rel, kind).is_break() {
            return Ok(ControlFlow::Break(()));
        }
        if recursive
            && kind == EntryKind::Dir
            && walk_dir(walk_root, &rel, recursive, visibility, visit)?.is_break()
        {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// Collects entries up to [`RESULT_LIMIT`], setting `truncated` when one more existed.
pub(crate) fn collect_entries(
    root: WalkRoot<'_>,
    start_rel: &str,
    recursive: bool,
    filter: Option<&GlobMatcher>,
) -> Result<EntriesOutput, FilesError> {
    let mut entries = Vec::new();
    let mut truncated = false;
    walk(root, start_rel, recursive, &mut |rel, kind| {
        if filter.is_some_and(|glob| !glob.is_match(rel)) {
            return ControlFlow::Continue(());
        }
        if entries.len() == RESULT_LIMIT {
            truncated = true;
            return ControlFlow::Break(());
        }
        entries.push(Entry {
            path: rel.to_owned(),
            kind,
        });
        ControlFlow::Continue(())
    })?;
    Ok(EntriesOutput { entries, truncated })
}

/// Compiles a glob where `*` stays within one path segment.
pub(crate) fn compile_glob(pattern: &str) -> Result<GlobMatcher, FilesError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| FilesError::InvalidPattern {
            pattern: pattern.to_owned(),
            message: e.to_string(),
        })
}
