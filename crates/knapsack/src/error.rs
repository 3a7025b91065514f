//! The typed errors at the crate boundary: one for every Files operation, one for edits.

use serde::{Deserialize, Serialize};

use crate::patch::PatchError;

/// Why a text edit was refused; each variant tells the model what to do next.
///
/// Edits match `oldText` against the current file and swap the whole file
/// through the port's compare-and-replace, so every refusal leaves the file
/// untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FilesEditError {
    /// The file changed between reading it and replacing it.
    #[error("`{path}` changed since it was read; read it again and retry")]
    Conflict {
        /// The edited path.
        path: String,
    },
    /// `oldText` does not occur in the file.
    #[error("`{path}` does not contain the text to replace")]
    MissingMatch {
        /// The edited path.
        path: String,
    },
    /// `oldText` occurs more than once and `replaceAll` was not set.
    #[error("`{path}` contains the text to replace {count} times; add context or set replaceAll")]
    AmbiguousMatch {
        /// The edited path.
        path: String,
        /// How many times it occurs.
        count: usize,
    },
    /// The file, before or after the edit, is larger than the text bound.
    #[error("`{path}` would be {size} bytes; edits are limited to {limit} bytes")]
    OversizedFile {
        /// The edited path.
        path: String,
        /// The size in bytes.
        size: u64,
        /// The bound in bytes.
        limit: u64,
    },
    /// The match starts or ends inside a user-perceived character (it splits a
    /// combining mark or joiner from its base).
    #[error("the edit of `{path}` would split a character at byte {offset}")]
    PartialCharacter {
        /// The edited path.
        path: String,
        /// The byte offset of the split.
        offset: usize,
    },
}

/// Why a Files operation failed; paths in messages are as the caller wrote them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilesError {
    /// The path text itself is unusable (empty, NUL byte, too long).
    #[error("invalid path `{path}`: {reason}")]
    InvalidPath {
        /// The requested path.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The path resolves outside the port's root (`..`, an absolute path, a symlink).
    #[error("`{path}` is outside the files root")]
    OutsideRoot {
        /// The requested path.
        path: String,
    },
    /// A name on the way to the path is not valid UTF-8.
    #[error("`{path}` has a name that is not valid UTF-8")]
    InvalidName {
        /// The requested path.
        path: String,
    },
    /// Nothing exists at the path.
    #[error("`{path}` does not exist")]
    NotFound {
        /// The requested path.
        path: String,
    },
    /// The path is a directory where a file was needed.
    #[error("`{path}` is not a file")]
    NotAFile {
        /// The requested path.
        path: String,
    },
    /// The path is not a directory where one was needed.
    #[error("`{path}` is not a directory")]
    NotADirectory {
        /// The requested path.
        path: String,
    },
    /// The file's bytes are not UTF-8 text.
    #[error("`{path}` is not UTF-8 text")]
    NotText {
        /// The requested path.
        path: String,
    },
    /// A request argument is out of range (e.g. a zero limit).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A glob or regex pattern did not compile.
    #[error("invalid pattern `{pattern}`: {message}")]
    InvalidPattern {
        /// The pattern.
        pattern: String,
        /// The compiler's message.
        message: String,
    },
    /// A text edit was refused.
    #[error(transparent)]
    Edit(#[from] FilesEditError),
    /// A patch did not parse or did not apply; nothing changed.
    #[error(transparent)]
    Patch(#[from] PatchError),
    /// The port has no patch engine.
    #[error("this files port has no patch engine")]
    NoPatchEngine,
    /// The operating system refused.
    #[error("`{path}`: {message}")]
    Io {
        /// The requested path.
        path: String,
        /// The system's message.
        message: String,
    },
}

impl FilesError {
    pub(crate) fn io(path: &str, error: &std::io::Error) -> Self {
        match error.kind() {
            std::io::ErrorKind::NotFound => Self::NotFound {
                path: path.to_owned(),
            },
            _ => Self::Io {
                path: path.to_owned(),
                message: error.to_string(),
            },
        }
    }
}
