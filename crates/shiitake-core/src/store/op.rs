//! The changes a commit is made of.

use serde_json::Value;
use shiitake_protocol::{CommandId, ExtensionId, RequestId, SessionId};

use super::{
    CommandState, ExtensionRow, ExtensionStatusRow, RowScope, SessionHeader, StoredCommand,
    StoredCompaction, StoredEntry, StoredSandboxFailure, StoredTerminal, TimerRow,
};

/// One change inside a commit.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // moved once through a channel; boxing would only add an allocation
pub enum Op {
    /// Creates a Session; with a request id it is the idempotent create.
    CreateSession {
        /// The new header.
        header: SessionHeader,
        /// The caller's key for the create.
        request_id: Option<RequestId>,
    },
    /// Rewrites a Session's header.
    PutHeader(SessionHeader),
    /// Deletes a Session and everything in it.
    DeleteSession {
        /// The Session.
        session_id: SessionId,
    },
    /// Records an accepted command.
    InsertCommand {
        /// The Session.
        session_id: SessionId,
        /// The command.
        command: StoredCommand,
    },
    /// Moves a command through its life.
    SetCommandState {
        /// The Session.
        session_id: SessionId,
        /// The command.
        command_id: CommandId,
        /// Its new state.
        state: CommandState,
        /// The run that absorbed it, if any.
        run_id: Option<CommandId>,
    },
    /// Counts one recovery of a running command.
    CountRecovery {
        /// The Session.
        session_id: SessionId,
        /// The command.
        command_id: CommandId,
    },
    /// Appends a lineage entry.
    InsertEntry {
        /// The Session.
        session_id: SessionId,
        /// The entry.
        entry: StoredEntry,
    },
    /// Records a compaction boundary.
    InsertCompaction {
        /// The Session.
        session_id: SessionId,
        /// The boundary.
        compaction: StoredCompaction,
    },
    /// Records a sandbox failure.
    InsertSandboxFailure {
        /// The Session.
        session_id: SessionId,
        /// The event.
        failure: StoredSandboxFailure,
    },
    /// Writes one row of an extension's state.
    PutExtensionRow {
        /// The extension.
        extension_id: ExtensionId,
        /// The Session it belongs to, or the Agent.
        scope: RowScope,
        /// The collection.
        collection: String,
        /// The key.
        key: String,
        /// The value.
        value: Value,
    },
    /// Deletes one row of an extension's state.
    DeleteExtensionRow {
        /// The extension.
        extension_id: ExtensionId,
        /// The Session it belongs to, or the Agent.
        scope: RowScope,
        /// The collection.
        collection: String,
        /// The key.
        key: String,
    },
    /// Replaces every row of an extension (after a migration).
    ReplaceExtensionRows {
        /// The extension.
        extension_id: ExtensionId,
        /// Every row the extension has after the migration.
        rows: Vec<ExtensionRow>,
    },
    /// Records an extension's revision and whether it is stopped.
    PutExtensionStatus(ExtensionStatusRow),
    /// Records the answer to a human command under its request id.
    PutExtensionRequest {
        /// The extension.
        extension_id: ExtensionId,
        /// The Session the command was for, or the Agent.
        scope: RowScope,
        /// The caller's request id.
        request_id: String,
        /// The command and input as received.
        payload: String,
        /// The answer.
        response: Value,
    },
    /// Raises (or replaces) attention of one kind.
    PutAttention {
        /// The Session.
        session_id: SessionId,
        /// The extension that raised it.
        extension_id: ExtensionId,
        /// Its kind.
        kind: String,
        /// Whether it waits on a person (`needs_you`).
        inbox: bool,
        /// What to show.
        text: String,
    },
    /// Clears attention of one kind.
    DeleteAttention {
        /// The Session.
        session_id: SessionId,
        /// The extension that raised it.
        extension_id: ExtensionId,
        /// Its kind.
        kind: String,
    },
    /// Sets a durable timer.
    PutTimer(TimerRow),
    /// Clears a timer (of this extension).
    DeleteTimer {
        /// The extension.
        extension_id: ExtensionId,
        /// The timer.
        id: String,
    },
    /// Claims one firing of a timer: the commit fails unless the timer is still due
    /// at `due_at`; it is then moved to `next` (a cadence) or deleted.
    ClaimTimer {
        /// The timer.
        id: String,
        /// The due time the firing saw.
        due_at: u64,
        /// The next due time of a cadence.
        next: Option<u64>,
    },
    /// Fails the whole commit unless the Session's lease still has this token: the
    /// owner that wrote it still owns the Session. Stores without leases ignore it.
    Fence {
        /// The Session.
        session_id: SessionId,
        /// The token the owner took the lease with.
        token: super::FencingToken,
    },
    /// Records a terminal.
    InsertTerminal {
        /// The Session.
        session_id: SessionId,
        /// The terminal.
        terminal: StoredTerminal,
    },
}
