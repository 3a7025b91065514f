//! Listing, glob and grep over a local root, through one visibility policy per call.

use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};

use super::visibility::{IgnoreSource, SearchVisibility};
use crate::error::FilesError;
use crate::limits::{GREP_LINE_LIMIT_BYTES, RESULT_LIMIT, TEXT_LIMIT_BYTES};
use crate::types::{EntriesOutput, Entry, EntryKind, GrepMatch, GrepOutput};

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

/// Walks `start` (root-relative `start_rel`) depth-first with names sorted,
/// calling `visit` for every visible entry with a UTF-8 name; symlinks are
/// reported but never followed.
pub(crate) fn walk(
    root: &Path,
    start_rel: &str,
    recursive: bool,
    visit: &mut dyn FnMut(&str, EntryKind) -> ControlFlow<()>,
) -> Result<(), FilesError> {
    let mut visibility = SearchVisibility::new(LocalIgnoreFiles { root });
    if !visibility.is_visible(start_rel, true) {
        return Ok(());
    }
    // Whether the visitor stopped early is the visitor's own business.
    walk_dir(root, start_rel, recursive, &mut visibility, visit).map(drop)
}

fn walk_dir(
    root: &Path,
    dir_rel: &str,
    recursive: bool,
    visibility: &mut SearchVisibility<LocalIgnoreFiles<'_>>,
    visit: &mut dyn FnMut(&str, EntryKind) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, FilesError> {
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
        if !visibility.is_visible(&rel, kind == EntryKind::Dir) {
            continue;
        }
        if visit(&rel, kind).is_break() {
            return Ok(ControlFlow::Break(()));
        }
        if recursive
            && kind == EntryKind::Dir
            && walk_dir(root, &rel, recursive, visibility, visit)?.is_break()
        {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// Collects entries up to [`RESULT_LIMIT`], setting `truncated` when one more existed.
pub(crate) fn collect_entries(
    root: &Path,
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

/// Greps visible regular files under `start_rel` (or the file itself).
pub(crate) fn grep(
    root: &Path,
    start_rel: &str,
    start_is_file: bool,
    pattern: &str,
    case_insensitive: bool,
    filter: Option<&GlobMatcher>,
) -> Result<GrepOutput, FilesError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .build(pattern)
        .map_err(|e| FilesError::InvalidPattern {
            pattern: pattern.to_owned(),
            message: e.to_string(),
        })?;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let mut matches: Vec<GrepMatch> = Vec::new();
    let mut truncated = false;
    let mut search_file = |rel: &str| -> Result<ControlFlow<()>, FilesError> {
        if filter.is_some_and(|glob| !glob.is_match(rel)) {
            return Ok(ControlFlow::Continue(()));
        }
        let path = root.join(rel);
        let sink = Lossy(|line_number, line: &str| {
            if matches.len() == RESULT_LIMIT {
                truncated = true;
                return Ok(false);
            }
            let text = line.trim_end_matches(['\n', '\r']);
            matches.push(GrepMatch {
                path: rel.to_owned(),
                line: line_number,
                text: cut(text, GREP_LINE_LIMIT_BYTES).to_owned(),
            });
            Ok(true)
        });
        searcher
            .search_path(&matcher, &path, sink)
            .map_err(|e| FilesError::io(rel, &e))?;
        Ok(if truncated {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    };
    if start_is_file {
        let mut visibility = SearchVisibility::new(LocalIgnoreFiles { root });
        if visibility.is_visible(start_rel, false) {
            search_file(start_rel).map(drop)?;
        }
    } else {
        let mut failure = None;
        walk(root, start_rel, true, &mut |rel, kind| {
            if kind != EntryKind::File {
                return ControlFlow::Continue(());
            }
            match search_file(rel) {
                Ok(flow) => flow,
                Err(error) => {
                    failure = Some(error);
                    ControlFlow::Break(())
                }
            }
        })?;
        if let Some(error) = failure {
            return Err(error);
        }
    }
    Ok(GrepOutput { matches, truncated })
}

/// The longest prefix of `text` of at most `limit` bytes ending on a character boundary.
fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
