//! Path validation: what Knapsack checks in every requested path before a port sees it.
//!
//! Validation is textual only; confinement to a root is the port's job
//! (see [`crate::LocalFiles`]).

use crate::error::FilesError;
use crate::limits::PATH_LIMIT_BYTES;

/// Checks a requested path: non-empty, no NUL byte, at most [`PATH_LIMIT_BYTES`].
///
/// Returns the path unchanged so callers can chain it.
pub fn validate_path(path: &str) -> Result<&str, FilesError> {
    let reason = if path.is_empty() {
        Some("the path is empty")
    } else if path.contains('\0') {
        Some("the path contains a NUL byte")
    } else if path.len() > PATH_LIMIT_BYTES {
        Some("the path is longer than 4096 bytes")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(FilesError::InvalidPath {
            path: path.replace('\0', "\\0"),
            reason: reason.to_owned(),
        }),
        None => Ok(path),
    }
}

/// Normalises a root-relative path lexically: drops `.` and empty segments, resolves
/// `..` against earlier segments, and returns `None` when `..` climbs above the root.
///
/// The result joins segments with `/`; the root itself is the empty string.
pub fn normalize_relative(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_resolves_dots_and_refuses_climbing_out() {
        let cases = [
            ("a/b", Some("a/b")),
            ("./a//b/", Some("a/b")),
            ("a/../b", Some("b")),
            (".", Some("")),
            ("a/..", Some("")),
            ("..", None),
            ("a/../..", None),
            ("a/../../a", None),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize_relative(input).as_deref(), expected, "{input}");
        }
    }
}
