//! Grep over a local root: the walk hands files to a few searchers, each with a bounded
//! buffer, and their results merge in walk order.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError, mpsc};

use globset::GlobMatcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};

use super::visibility::SearchVisibility;
use super::walk::{LocalIgnoreFiles, WalkRoot, walk};
use crate::error::FilesError;
use crate::limits::{
    GREP_BUFFER_LIMIT_BYTES, GREP_LINE_LIMIT_BYTES, GREP_SEARCHERS_MAX, RESULT_LIMIT,
};
use crate::types::{EntryKind, GrepMatch, GrepOutput, SkipReason, SkippedFile};

/// What one grep searches for, and where.
#[derive(Clone, Copy)]
pub(crate) struct GrepRequest<'a> {
    pub(crate) root: WalkRoot<'a>,
    /// The root-relative directory or file to search.
    pub(crate) start_rel: &'a str,
    pub(crate) start_is_file: bool,
    pub(crate) pattern: &'a str,
    pub(crate) case_insensitive: bool,
    pub(crate) filter: Option<&'a GlobMatcher>,
}

/// Greps visible regular files under `start_rel` (or the file itself).
///
/// This thread walks and hands files, numbered in walk order, to one searcher per
/// available core (at most [`GREP_SEARCHERS_MAX`]), each holding at most
/// [`GREP_BUFFER_LIMIT_BYTES`] of a file. Results are merged in walk order, so the
/// first 256 matches are the same however the work was split; once the finished
/// prefix of files holds more than 256 matches, the walk and the searchers stop.
pub(crate) fn grep(request: GrepRequest<'_>) -> Result<GrepOutput, FilesError> {
    grep_within(request, GREP_BUFFER_LIMIT_BYTES)
}

/// [`grep`] with each searcher's buffer bounded to `buffer_limit` bytes.
fn grep_within(request: GrepRequest<'_>, buffer_limit: usize) -> Result<GrepOutput, FilesError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(request.case_insensitive)
        .build(request.pattern)
        .map_err(|e| FilesError::InvalidPattern {
            pattern: request.pattern.to_owned(),
            message: e.to_string(),
        })?;
    let walk_root = request.root;
    let root = walk_root.path;
    let wanted = |rel: &str| request.filter.is_none_or(|glob| glob.is_match(rel));
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(GREP_SEARCHERS_MAX);
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    let rx = Mutex::new(rx);
    let progress = Mutex::new(Progress::default());
    let stop = AtomicBool::new(false);
    let work = || {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .heap_limit(Some(buffer_limit))
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
        let start_rel = request.start_rel;
        let walked = if request.start_is_file {
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

/// What searching one file found.
struct FileSearch {
    path: String,
    /// At most one more than the result bound.
    matches: Vec<GrepMatch>,
    /// Set when the file was not searched to its end.
    skipped: Option<SkipReason>,
}

type FileResult = Result<FileSearch, FilesError>;

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
                Ok(found) => self.matches += found.matches.len(),
                Err(_) => failed = true,
            }
            self.frontier += 1;
        }
        failed || self.matches > RESULT_LIMIT
    }

    /// The first 256 matches of the finished prefix, in walk order, and the files
    /// skipped up to the last of them (at most 256).
    fn into_output(self) -> Result<GrepOutput, FilesError> {
        let mut output = GrepOutput {
            matches: Vec::new(),
            truncated: false,
            skipped: Vec::new(),
        };
        'files: for (_, done) in self.done.into_iter().take(self.frontier) {
            let done = done?;
            for found in done.matches {
                if output.matches.len() == RESULT_LIMIT {
                    output.truncated = true;
                    break 'files;
                }
                output.matches.push(found);
            }
            if let Some(reason) = done.skipped
                && output.skipped.len() < RESULT_LIMIT
            {
                output.skipped.push(SkippedFile {
                    path: done.path,
                    reason,
                });
            }
        }
        Ok(output)
    }
}

/// The matches of one file, at most one more than the result bound. A line longer
/// than the searcher's buffer ends the search of the file, which is then skipped.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    root: &Path,
    rel: &str,
) -> FileResult {
    let mut matches = Vec::new();
    let sink = Lossy(|line_number, line: &str| {
        let text = line.trim_end_matches(['\n', '\r']);
        // At most the line limit, cut back to a character boundary.
        let end = text.floor_char_boundary(GREP_LINE_LIMIT_BYTES);
        matches.push(GrepMatch {
            path: rel.to_owned(),
            line: line_number,
            text: text[..end].to_owned(),
        });
        Ok(matches.len() <= RESULT_LIMIT)
    });
    let skipped = match searcher.search_path(matcher, root.join(rel), sink) {
        Ok(()) => None,
        Err(error) if is_buffer_limit(&error) => Some(SkipReason::LineTooLong),
        Err(error) => return Err(FilesError::io(rel, &error)),
    };
    Ok(FileSearch {
        path: rel.to_owned(),
        matches,
        skipped,
    })
}

/// Whether grep-searcher gave up because a line does not fit its heap limit: it says
/// so only in the message of an `Other` I/O error (`the_buffer_limit_…` pins it).
fn is_buffer_limit(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::Other
        && error.to_string().starts_with("configured allocation limit")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A small buffer, so the edge needs no megabyte files.
    const LIMIT: usize = 4096;

    fn grep_dir(dir: &Path, limit: usize) -> GrepOutput {
        let request = GrepRequest {
            root: WalkRoot {
                path: dir,
                hidden: &[],
            },
            start_rel: "",
            start_is_file: false,
            pattern: "needle",
            case_insensitive: false,
            filter: None,
        };
        grep_within(request, limit).unwrap()
    }

    /// A line of exactly `len` bytes with its `\n`, holding `needle`.
    fn line(len: usize) -> String {
        let mut text = "needle ".to_owned();
        text.push_str(&"x".repeat(len - text.len() - 1));
        text.push('\n');
        text
    }

    fn matched(path: &str, line: u64, text: &str) -> GrepMatch {
        GrepMatch {
            path: path.to_owned(),
            line,
            text: text.to_owned(),
        }
    }

    #[test]
    fn the_buffer_limit_holds_a_line_at_its_edge_and_skips_one_byte_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let edge = line(LIMIT);
        let past = line(LIMIT + 1);
        std::fs::write(dir.path().join("a_edge.txt"), &edge).unwrap();
        // A match before the long line is kept; the one after it is not reached.
        std::fs::write(
            dir.path().join("b_past.txt"),
            format!("needle first\n{past}needle after\n"),
        )
        .unwrap();
        std::fs::write(dir.path().join("c_short.txt"), "needle\n").unwrap();
        let output = grep_dir(dir.path(), LIMIT);
        let cut = &edge[..GREP_LINE_LIMIT_BYTES];
        assert_eq!(
            output,
            GrepOutput {
                matches: vec![
                    matched("a_edge.txt", 1, cut),
                    matched("b_past.txt", 1, "needle first"),
                    matched("c_short.txt", 1, "needle"),
                ],
                truncated: false,
                skipped: vec![SkippedFile {
                    path: "b_past.txt".to_owned(),
                    reason: SkipReason::LineTooLong,
                }],
            }
        );
    }

    #[test]
    fn skipped_files_are_listed_up_to_the_result_bound() {
        let dir = tempfile::tempdir().unwrap();
        let long = "y".repeat(LIMIT + 1);
        for i in 0..=RESULT_LIMIT {
            std::fs::write(dir.path().join(format!("f{i:04}.txt")), &long).unwrap();
        }
        let output = grep_dir(dir.path(), LIMIT);
        assert_eq!(output.matches, vec![]);
        assert_eq!(output.skipped.len(), RESULT_LIMIT);
        assert_eq!(output.skipped[0].path, "f0000.txt");
        assert_eq!(output.skipped[RESULT_LIMIT - 1].path, "f0255.txt");
    }

    #[test]
    fn other_read_errors_are_not_mistaken_for_the_buffer_limit() {
        let error = std::io::Error::other("disk on fire");
        assert!(!is_buffer_limit(&error));
        let error = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "configured allocation limit (1) exceeded",
        );
        assert!(!is_buffer_limit(&error));
    }
}
