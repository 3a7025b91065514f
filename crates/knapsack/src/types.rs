//! The request and result types of the Files tools: one serde + schemars type per tool,
//! so the capability schemas and the decoders can never disagree.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn default_dot() -> String {
    ".".to_owned()
}

/// `read`: a window of lines of one text file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadInput {
    /// The file, relative to the files root.
    pub path: String,
    /// The first line to return, counted from 0.
    #[serde(default)]
    pub offset: u64,
    /// The most lines to return; all remaining lines when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// What `read` returns: at most 128 KiB of text cut on a line boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadOutput {
    /// The file as requested.
    pub path: String,
    /// The text of the returned lines, each with its line ending.
    pub content: String,
    /// The first returned line, counted from 0.
    pub offset: u64,
    /// How many lines `content` holds.
    pub lines: u64,
    /// Where to continue when more lines follow the window; absent at the end of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// True when the 128 KiB bound, not `limit` or the end of the file, ended the window.
    pub truncated: bool,
}

/// `list`: the entries of one directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListInput {
    /// The directory, relative to the files root (default: the root).
    #[serde(default = "default_dot")]
    pub path: String,
    /// Whether to descend into subdirectories.
    #[serde(default)]
    pub recursive: bool,
}

/// What an entry on disk is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed by listing or search).
    Symlink,
}

/// One listed or globbed entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The root-relative path, `/`-separated.
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
}

/// What `list` and `glob` return: at most 256 entries, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EntriesOutput {
    /// The entries.
    pub entries: Vec<Entry>,
    /// True when more entries matched than were returned.
    pub truncated: bool,
}

/// `glob`: the visible entries whose root-relative path matches a glob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GlobInput {
    /// A `globset` pattern over root-relative paths; `*` does not cross `/`, `**` does.
    pub pattern: String,
    /// The directory to search under (default: the root).
    #[serde(default = "default_dot")]
    pub path: String,
}

/// `grep`: the lines of visible files that match a regular expression.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrepInput {
    /// A Rust-regex (ripgrep) pattern.
    pub pattern: String,
    /// The directory or file to search (default: the root).
    #[serde(default = "default_dot")]
    pub path: String,
    /// Only search files whose root-relative path matches this glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// Match letters regardless of case.
    #[serde(default)]
    pub case_insensitive: bool,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepMatch {
    /// The root-relative file path.
    pub path: String,
    /// The line number, counted from 1.
    pub line: u64,
    /// The line without its ending, cut to 1 KiB.
    pub text: String,
}

/// What `grep` returns: at most 256 matches, in path then line order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepOutput {
    /// The matches.
    pub matches: Vec<GrepMatch>,
    /// True when more lines matched than were returned.
    pub truncated: bool,
    /// Files not searched to their end (at most 256, in path order); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedFile>,
}

/// A file `grep` stopped searching, so the caller knows its matches may be incomplete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedFile {
    /// The root-relative file path.
    pub path: String,
    /// Why it was not searched to its end.
    pub reason: SkipReason,
}

/// Why `grep` stopped searching a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// A line is longer than grep's 1 MiB buffer; matches before it are returned.
    LineTooLong,
}

/// `edit`: replace `oldText` with `newText` in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditInput {
    /// The file, relative to the files root.
    pub path: String,
    /// The exact text to find; it must occur once unless `replaceAll` is set.
    #[schemars(length(min = 1))]
    pub old_text: String,
    /// The replacement.
    pub new_text: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// What `edit` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditOutput {
    /// The edited file.
    pub path: String,
    /// How many occurrences were replaced.
    pub replacements: u64,
}

/// The port's compare-and-replace: swap a whole file only if it still holds `expected`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplaceRequest {
    /// The file, relative to the files root.
    pub path: String,
    /// The content the caller read.
    pub expected: String,
    /// The new content.
    pub content: String,
}

/// `apply_patch`: one patch in the Codex grammar (see `docs/patch.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchInput {
    /// The patch text, `*** Begin Patch` to `*** End Patch`, at most 128 KiB.
    #[schemars(length(max = 131072))]
    pub patch: String,
}

/// How one file changed in an applied patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Created.
    Added,
    /// Removed.
    Deleted,
    /// Edited in place.
    Updated,
    /// Edited and moved; `path` is the new path.
    Moved,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// The path after the patch.
    pub path: String,
    /// How it changed.
    pub kind: ChangeKind,
}

/// What `apply_patch` returns: every change, in patch order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchOutput {
    /// The changes.
    pub changes: Vec<FileChange>,
}
