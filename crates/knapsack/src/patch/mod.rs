//! apply_patch: the Codex patch grammar, its printer, a presentation reader and
//! the pure text transformation the engines use.
//!
//! The grammar is documented in `docs/patch.md`. The parser is written for this
//! project (no maintained Rust crate parses this grammar); it is strict, and
//! every error names the 1-based line where it was found.

mod apply;
mod parse;
mod present;
mod print;

pub use apply::{apply_chunks, invert};
pub use parse::parse_patch;
pub use present::{PatchSummary, present};
pub use print::print_patch;

use serde::{Deserialize, Serialize};

/// A parsed patch: file operations in the order they were written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    /// The operations.
    pub operations: Vec<FileOperation>,
}

/// One `*** Add File`, `*** Delete File` or `*** Update File` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FileOperation {
    /// Create a file with these lines (each written followed by `\n`).
    Add {
        /// The new file's path.
        path: String,
        /// Its lines, without endings.
        lines: Vec<String>,
    },
    /// Remove a file.
    Delete {
        /// The file's path.
        path: String,
    },
    /// Edit a file in place, optionally moving it.
    Update {
        /// The file's path.
        path: String,
        /// The new path, from `*** Move to:`.
        move_to: Option<String>,
        /// The hunks, applied top to bottom.
        chunks: Vec<Chunk>,
    },
}

impl FileOperation {
    /// The path the operation names first.
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path } | Self::Update { path, .. } => path,
        }
    }
}

/// One `@@` hunk of an update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// The text after `@@ `: a line to find before the hunk, narrowing where it applies.
    pub context: Option<String>,
    /// The hunk's lines.
    pub lines: Vec<ChunkLine>,
    /// Set by `*** End of File`: the hunk must match at the end of the file.
    pub end_of_file: bool,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", content = "text", rename_all = "snake_case")]
pub enum ChunkLine {
    /// ` text`: present before and after.
    Context(String),
    /// `-text`: removed.
    Remove(String),
    /// `+text`: added.
    Add(String),
}

/// Why a patch did not parse or apply; when it did not apply, no file changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PatchError {
    /// The text breaks the grammar at `line` (1-based).
    #[error("patch line {line}: {message}")]
    Syntax {
        /// The 1-based line number.
        line: usize,
        /// What was expected.
        message: String,
    },
    /// The patch text is larger than 128 KiB.
    #[error("the patch is {size} bytes; patches are limited to {limit} bytes")]
    TooLarge {
        /// Its size in bytes.
        size: usize,
        /// The bound.
        limit: usize,
    },
    /// A hunk's lines were not found in the file.
    #[error("{path}: hunk {hunk} does not match the file: {message}")]
    HunkMismatch {
        /// The file.
        path: String,
        /// The 1-based hunk number within the file's update.
        hunk: usize,
        /// What could not be found.
        message: String,
    },
    /// A file operation cannot be carried out (missing file, existing target, ...).
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}
