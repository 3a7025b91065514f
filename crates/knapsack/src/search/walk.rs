//! Listing, glob and grep over a local root, through one visibility policy per call.

use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError, mpsc};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
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

/// A local root as the walks see it: its directory and the root-relative
/// directories the host hid from the file tools (such as its own data directory).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WalkRoot<'a> {
    pub(crate) path: &'a Path,
    pub(crate) hidden: &'a [String],
}

impl WalkRoot<'_> {
    fn is_hidden(&self, rel: &str) -> bool {
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

/// Greps visible regular files under `start_rel` (or the file itself).
///
/// This thread walks and hands files, numbered in walk order, to one searcher
/// per available core. Results are merged in walk order, so the first 256
/// matches are the same however the work was split; once the finished prefix
/// of files holds more than 256 matches, the walk and the searchers stop.
pub(crate) fn grep(
    walk_root: WalkRoot<'_>,
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
    let root = walk_root.path;
    let wanted = |rel: &str| filter.is_none_or(|glob| glob.is_match(rel));
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    let rx = Mutex::new(rx);
    let progress = Mutex::new(Progress::default());
    let stop = AtomicBool::new(false);
    let work = || {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        while !stop.load(Ordering::Relaxed) {
            let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
            let Ok((index, rel)) = next else { break };
            let result = search_file(&mut searcher, &matcher, root, &rel);
            let mut progress = progress.lock().unwrap_or_else(PoisonError::into_inner);
            if progress.finish(index, result) {
                stop.store(true, Ordering::Relaxed);
            }
        }
    };
    let walked = std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(work);
        }
        let mut index = 0usize;
        let mut send = |rel: &str| {
            // `rx` lives until grep returns, so the channel never closes and a send cannot
            // fail; searchers that stop just leave files unread. The walk stops via `stop`.
            let _ = tx.send((index, rel.to_owned()));
            index += 1;
        };
        let walked = if start_is_file {
            let mut visibility = SearchVisibility::new(LocalIgnoreFiles { root });
            if visibility.is_visible(start_rel, false)
                && !walk_root.is_hidden(start_rel)
                && wanted(start_rel)
            {
                send(start_rel);
            }
            Ok(())
        } else {
            walk(walk_root, start_rel, true, &mut |rel, kind| {
                if stop.load(Ordering::Relaxed) {
                    return ControlFlow::Break(());
                }
                if kind == EntryKind::File && wanted(rel) {
                    send(rel);
                }
                ControlFlow::Continue(())
            })
        };
        drop(tx);
        walked
    });
    walked?;
    progress
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .into_output()
}

type FileResult = Result<Vec<GrepMatch>, FilesError>;

/// The results of searched files, and how far the finished prefix reaches.
#[derive(Default)]
struct Progress {
    done: BTreeMap<usize, FileResult>,
    /// The first file index not yet finished.
    frontier: usize,
    /// Matches in the finished prefix.
    matches: usize,
}

impl Progress {
    /// Records one file; returns whether the search can stop.
    fn finish(&mut self, index: usize, result: FileResult) -> bool {
        self.done.insert(index, result);
        let mut failed = false;
        while let Some(done) = self.done.get(&self.frontier) {
            match done {
                Ok(found) => self.matches += found.len(),
                Err(_) => failed = true,
            }
            self.frontier += 1;
        }
        failed || self.matches > RESULT_LIMIT
    }

    /// The first 256 matches of the finished prefix, in walk order.
    fn into_output(self) -> Result<GrepOutput, FilesError> {
        let mut matches = Vec::new();
        let mut truncated = false;
        'files: for (_, done) in self.done.into_iter().take(self.frontier) {
            for found in done? {
                if matches.len() == RESULT_LIMIT {
                    truncated = true;
                    break 'files;
                }
                matches.push(found);
            }
        }
        Ok(GrepOutput { matches, truncated })
    }
}

/// The matches of one file, at most one more than the result bound.
fn search_file(
    searcher: &mut grep_searcher::Searcher,
    matcher: &RegexMatcher,
    root: &Path,
    rel: &str,
) -> FileResult {
    let mut found = Vec::new();
    let sink = Lossy(|line_number, line: &str| {
        let text = line.trim_end_matches(['\n', '\r']);
        // At most the line limit, cut back to a character boundary.
        let end = text.floor_char_boundary(GREP_LINE_LIMIT_BYTES);
        found.push(GrepMatch {
            path: rel.to_owned(),
            line: line_number,
            text: text[..end].to_owned(),
        });
        Ok(found.len() <= RESULT_LIMIT)
    });
    searcher
        .search_path(matcher, root.join(rel), sink)
        .map_err(|e| FilesError::io(rel, &e))?;
    Ok(found)
}
