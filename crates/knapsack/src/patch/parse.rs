//! The parser: text to [`Patch`], strict, with 1-based line numbers in every error.

use super::{Chunk, ChunkLine, FileOperation, Patch, PatchError};
use crate::limits::TEXT_LIMIT_BYTES;

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARKER: &str = "*** End of File";

fn syntax(line: usize, message: impl Into<String>) -> PatchError {
    PatchError::Syntax {
        line,
        message: message.into(),
    }
}

/// Parses a patch; the text must be at most 128 KiB and run from
/// `*** Begin Patch` to `*** End Patch` (a final newline is optional).
pub fn parse_patch(text: &str) -> Result<Patch, PatchError> {
    if text.len() > TEXT_LIMIT_BYTES {
        return Err(PatchError::TooLarge {
            size: text.len(),
            limit: TEXT_LIMIT_BYTES,
        });
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    // A patch whose first line ends in CRLF is CRLF throughout: one `\r` is dropped
    // from every line. Otherwise a trailing `\r` is part of the line's text, so
    // text ending in `\r` survives a print/parse round trip (found by fuzzing).
    let crlf = body.split('\n').next().is_some_and(|l| l.ends_with('\r'));
    let lines: Vec<&str> = body
        .split('\n')
        .map(|l| {
            if crlf {
                l.strip_suffix('\r').unwrap_or(l)
            } else {
                l
            }
        })
        .collect();
    if lines.first().map(|l| l.trim()) != Some(BEGIN) {
        return Err(syntax(1, format!("expected `{BEGIN}`")));
    }
    let last = lines.len();
    if last < 2 || lines[last - 1].trim() != END {
        return Err(syntax(last, format!("the patch must end with `{END}`")));
    }
    let mut parser = Parser {
        lines: &lines[..last - 1],
        at: 1,
    };
    let mut operations = Vec::new();
    while parser.at < parser.lines.len() {
        operations.push(parser.operation()?);
    }
    Ok(Patch { operations })
}

struct Parser<'a> {
    lines: &'a [&'a str],
    /// Index of the next unread line (0-based; line number is `at + 1`).
    at: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.lines.get(self.at).copied()
    }

    fn number(&self) -> usize {
        self.at + 1
    }

    fn path<'b>(&self, rest: &'b str) -> Result<&'b str, PatchError> {
        let path = rest.trim();
        if path.is_empty() {
            return Err(syntax(self.number(), "the file path is empty"));
        }
        Ok(path)
    }

    fn operation(&mut self) -> Result<FileOperation, PatchError> {
        let line = self.peek().unwrap_or_default();
        if let Some(rest) = line.strip_prefix(ADD) {
            let path = self.path(rest)?.to_owned();
            self.at += 1;
            let mut added = Vec::new();
            while let Some(line) = self.peek() {
                let Some(text) = line.strip_prefix('+') else {
                    break;
                };
                added.push(text.to_owned());
                self.at += 1;
            }
            return Ok(FileOperation::Add { path, lines: added });
        }
        if let Some(rest) = line.strip_prefix(DELETE) {
            let path = self.path(rest)?.to_owned();
            self.at += 1;
            return Ok(FileOperation::Delete { path });
        }
        if let Some(rest) = line.strip_prefix(UPDATE) {
            let path = self.path(rest)?.to_owned();
            let header = self.number();
            self.at += 1;
            let mut move_to = None;
            if let Some(rest) = self.peek().and_then(|l| l.strip_prefix(MOVE)) {
                move_to = Some(self.path(rest)?.to_owned());
                self.at += 1;
            }
            let mut chunks = Vec::new();
            while let Some(line) = self.peek() {
                if line.starts_with("*** ") && line != EOF_MARKER {
                    break;
                }
                chunks.push(self.chunk(chunks.is_empty())?);
            }
            if chunks.is_empty() {
                return Err(syntax(header, format!("update of `{path}` has no hunks")));
            }
            return Ok(FileOperation::Update {
                path,
                move_to,
                chunks,
            });
        }
        Err(syntax(
            self.number(),
            format!("expected `{ADD}`, `{DELETE}` or `{UPDATE}`, found `{line}`"),
        ))
    }

    fn chunk(&mut self, first: bool) -> Result<Chunk, PatchError> {
        let start = self.number();
        let line = self.peek().unwrap_or_default();
        let context = if line == "@@" {
            self.at += 1;
            None
        } else if let Some(text) = line.strip_prefix("@@ ") {
            self.at += 1;
            Some(text.to_owned())
        } else if first {
            None
        } else {
            return Err(syntax(start, format!("expected `@@`, found `{line}`")));
        };
        let mut lines = Vec::new();
        let mut end_of_file = false;
        while let Some(line) = self.peek() {
            if line == EOF_MARKER {
                self.at += 1;
                end_of_file = true;
                break;
            }
            if line.starts_with("@@") || line.starts_with("*** ") {
                break;
            }
            let parsed = match line.chars().next() {
                None => ChunkLine::Context(String::new()),
                Some(' ') => ChunkLine::Context(line[1..].to_owned()),
                Some('-') => ChunkLine::Remove(line[1..].to_owned()),
                Some('+') => ChunkLine::Add(line[1..].to_owned()),
                Some(_) => {
                    return Err(syntax(
                        self.number(),
                        format!("a hunk line must start with ` `, `-` or `+`, found `{line}`"),
                    ));
                }
            };
            lines.push(parsed);
            self.at += 1;
        }
        if lines.is_empty() {
            return Err(syntax(start, "the hunk has no lines"));
        }
        Ok(Chunk {
            context,
            lines,
            end_of_file,
        })
    }
}
