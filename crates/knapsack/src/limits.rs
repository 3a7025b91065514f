//! The numeric bounds of the specification, in one place so tests and docs name them.

/// Reads, edited files and patch inputs are bounded to this many bytes of UTF-8 (128 KiB),
/// so one tool result can never flood a model's context.
pub const TEXT_LIMIT_BYTES: usize = 128 * 1024;

/// Listing, glob and grep results hold at most this many entries and say when they stopped.
pub const RESULT_LIMIT: usize = 256;

/// A Computer advertises at most this many operations; more is an error, not a truncation.
pub const COMPUTER_OPERATION_LIMIT: usize = 256;

/// How many Computers `Knapsack.computers` describes at once.
pub const COMPUTER_DESCRIBE_CONCURRENCY: usize = 8;

/// The default time one Computer has to describe itself.
pub const COMPUTER_DESCRIBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A requested path longer than this many bytes is refused before any I/O.
pub const PATH_LIMIT_BYTES: usize = 4096;

/// A grep match line is cut to this many bytes (on a character boundary) in results.
pub const GREP_LINE_LIMIT_BYTES: usize = 1024;

/// The most a grep searcher holds of a file at once (1 MiB): a line, with its ending,
/// must fit, so a file with a longer line (a minified bundle, a one-line JSON dump) is
/// searched up to that line and reported in `skipped`, and memory does not grow with
/// the longest line in the workspace.
pub const GREP_BUFFER_LIMIT_BYTES: usize = 1024 * 1024;

/// At most this many grep searchers run at once (one per core up to it), so a grep's
/// buffers stay within `GREP_SEARCHERS_MAX × GREP_BUFFER_LIMIT_BYTES` on any machine.
pub const GREP_SEARCHERS_MAX: usize = 8;

/// An MCP server advertises at most this many tools; more makes its list unusable.
pub const MCP_TOOL_LIMIT: usize = 256;

/// How many MCP servers connect at once.
pub const MCP_CONNECT_CONCURRENCY: usize = 8;

/// The default time one MCP server has to connect and list its tools.
pub const MCP_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
