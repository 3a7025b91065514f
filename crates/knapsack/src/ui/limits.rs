//! The bounds of the browser bridge; `docs/knapsack.md` lists them with their edges.

use std::time::Duration;

/// Longest connection or request id, in bytes.
pub const MAX_ID_BYTES: usize = 64;

/// Most commands one `discover` may list; a longer list is an invalid result.
pub const MAX_COMMANDS: usize = 256;

/// Longest command name, in bytes.
pub const MAX_COMMAND_NAME_BYTES: usize = 128;

/// Longest command description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 4096;

/// Longest error message a tab's failed command passes on, in bytes (longer is cut).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4096;

/// Events queued for one tab that has not read them; past this the tab is
/// disconnected (it reconnects and is sent the outstanding request again).
pub const EVENT_BUFFER: usize = 16;

/// How long a request may wait for a tab to claim it before it fails with
/// `browser_not_connected`, by default.
pub const DEFAULT_CLAIM_TIMEOUT: Duration = Duration::from_secs(10);
