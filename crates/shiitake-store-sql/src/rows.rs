//! Stored rows as columns, and their decoding into core's store types.
//!
//! Both stores keep the same columns (text, 64-bit integers, booleans; JSON as
//! text; messages packed as bytes), so one set of row structs serves both: each derives
//! `sqlx::FromRow`, which works for any sqlx database, and decodes into the typed rows
//! of `shiitake_core::store`. A column that does not decode is [`StoreError::Corrupt`]
//! with the column named, never a panic.

use serde::de::DeserializeOwned;
use shiitake_protocol::{CommandId, EntryId, EventId, RequestId, SessionId, SessionInboxState};
use sqlx::FromRow;

use shiitake_core::store::{
    AttentionRow, CommandKind, CommandState, ExtensionRow, ExtensionStatusRow, RowScope,
    SessionHeader, StoreError, StoredCommand, StoredCompaction, StoredEntry, StoredExtensionRow,
    StoredSandboxFailure, StoredTerminal, StoredWord, TimerKind, TimerRow,
};

/// A count or time as the databases store it: i64, which every count and time here
/// fits (a larger value saturates). Both databases have only signed 64-bit integers.
pub fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Reads back an integer that must not be negative; a negative one is [`StoreError::Corrupt`].
pub fn uint(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative {what}: {value}")))
}

fn id<T: std::str::FromStr>(value: &str, what: &str) -> Result<T, StoreError> {
    value
        .parse()
        .map_err(|_| StoreError::Corrupt(format!("bad {what}: {value:?}")))
}

fn json<T: DeserializeOwned>(value: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(value).map_err(|error| StoreError::Corrupt(format!("{what}: {error}")))
}

/// Decodes a column that may be NULL.
fn opt<V, T>(
    value: Option<V>,
    decode: impl FnOnce(V) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    value.map(decode).transpose()
}

/// Reads a stored word back into its enum; an unknown word is [`StoreError::Corrupt`].
pub(crate) fn word<T: StoredWord>(value: &str, what: &str) -> Result<T, StoreError> {
    T::from_word(value).ok_or_else(|| StoreError::Corrupt(format!("bad {what} {value:?}")))
}

/// The columns of `sessions` a [`SessionHeader`] is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct SessionRow {
    pub(crate) id: String,
    pub(crate) created_at: i64,
    pub(crate) last_activity_at: i64,
    pub(crate) settled_at: Option<i64>,
    pub(crate) title: String,
    pub(crate) head_sequence: i64,
    pub(crate) leaf_entry_id: Option<String>,
    pub(crate) lineage_epoch: i64,
    pub(crate) model_preference: Option<String>,
    pub(crate) inbox_state: String,
    pub(crate) inbox_rank: i64,
    pub(crate) open_from: Option<String>,
}

impl SessionRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<SessionHeader, StoreError> {
        Ok(SessionHeader {
            id: id::<SessionId>(&self.id, "session id")?,
            created_at: uint(self.created_at, "created_at")?,
            last_activity_at: uint(self.last_activity_at, "last_activity_at")?,
            settled_at: opt(self.settled_at, |t| uint(t, "settled_at"))?,
            title: self.title,
            head_sequence: uint(self.head_sequence, "head_sequence")?,
            leaf: opt(self.leaf_entry_id, |e| id::<EntryId>(&e, "leaf"))?,
            epoch: uint(self.lineage_epoch, "lineage_epoch")?,
            model_preference: opt(self.model_preference, |p| json(&p, "model preference"))?,
            inbox_state: word::<SessionInboxState>(&self.inbox_state, "inbox state")?,
            open_from: opt(self.open_from, |c| id::<CommandId>(&c, "open_from"))?,
        })
    }
}

/// The columns of `commands` a [`StoredCommand`] is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct CommandRow {
    pub(crate) id: String,
    pub(crate) request_id: Option<String>,
    pub(crate) origin: Option<String>,
    pub(crate) kind: String,
    pub(crate) payload: String,
    pub(crate) accepted_sequence: i64,
    pub(crate) state: String,
    pub(crate) run_id: Option<String>,
    pub(crate) recoveries: i64,
}

impl CommandRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<StoredCommand, StoreError> {
        Ok(StoredCommand {
            id: id::<CommandId>(&self.id, "command id")?,
            origin: opt(self.origin, |o| json(&o, "command origin"))?,
            request_id: opt(self.request_id, |r| id::<RequestId>(&r, "request id"))?,
            kind: word::<CommandKind>(&self.kind, "command kind")?,
            payload: self.payload,
            accepted_sequence: uint(self.accepted_sequence, "accepted_sequence")?,
            state: word::<CommandState>(&self.state, "command state")?,
            run_id: opt(self.run_id, |r| id::<CommandId>(&r, "run id"))?,
            recoveries: u32::try_from(self.recoveries).unwrap_or(u32::MAX),
        })
    }
}

/// The columns of `entries` a [`StoredEntry`] is read from.
///
/// The fields are the columns, named alike; the message is stored packed
/// ([`crate::packed`]).
#[derive(FromRow)]
pub(crate) struct EntryRow {
    pub(crate) id: String,
    pub(crate) parent_id: Option<String>,
    pub(crate) sequence: i64,
    pub(crate) command_id: Option<String>,
    pub(crate) message: Vec<u8>,
}

impl EntryRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<StoredEntry, StoreError> {
        Ok(StoredEntry {
            id: id::<EntryId>(&self.id, "entry id")?,
            parent: opt(self.parent_id, |p| id::<EntryId>(&p, "parent id"))?,
            sequence: uint(self.sequence, "sequence")?,
            command_id: opt(self.command_id, |c| id::<CommandId>(&c, "command id"))?,
            message: crate::packed::unpack(&self.message)?,
        })
    }
}

/// The columns of `terminals` a [`StoredTerminal`] is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct TerminalRow {
    pub(crate) command_id: String,
    pub(crate) outcome: String,
    pub(crate) sequence: i64,
    pub(crate) diagnostic: Option<String>,
    pub(crate) anchor_entry: Option<String>,
}

impl TerminalRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<StoredTerminal, StoreError> {
        Ok(StoredTerminal {
            command_id: id::<CommandId>(&self.command_id, "command id")?,
            outcome: word(&self.outcome, "terminal outcome")?,
            sequence: uint(self.sequence, "sequence")?,
            diagnostic: self.diagnostic,
            anchor: opt(self.anchor_entry, |a| id::<EntryId>(&a, "anchor"))?,
        })
    }
}

/// The columns of `compactions` a [`StoredCompaction`] is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct CompactionRow {
    pub(crate) id: String,
    pub(crate) commit_sequence: i64,
    pub(crate) first_kept_entry: String,
    pub(crate) precedes_sequence: i64,
    pub(crate) at: i64,
    pub(crate) summary: String,
}

impl CompactionRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<StoredCompaction, StoreError> {
        Ok(StoredCompaction {
            id: id::<EventId>(&self.id, "compaction id")?,
            commit_sequence: uint(self.commit_sequence, "commit_sequence")?,
            first_kept: id::<EntryId>(&self.first_kept_entry, "first kept entry")?,
            precedes_sequence: uint(self.precedes_sequence, "precedes_sequence")?,
            at: uint(self.at, "at")?,
            summary: self.summary,
        })
    }
}

/// The columns of `sandbox_failures` a [`StoredSandboxFailure`] is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct SandboxFailureRow {
    pub(crate) id: String,
    pub(crate) sequence: i64,
    pub(crate) at: i64,
    pub(crate) capability: String,
    pub(crate) message: String,
}

impl SandboxFailureRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<StoredSandboxFailure, StoreError> {
        Ok(StoredSandboxFailure {
            id: id::<EventId>(&self.id, "sandbox failure id")?,
            sequence: uint(self.sequence, "sequence")?,
            at: uint(self.at, "at")?,
            capability: self.capability,
            message: self.message,
        })
    }
}

/// The columns of `extension_rows` a [`StoredExtensionRow`] is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct ExtensionRowRow {
    pub(crate) extension_id: String,
    pub(crate) scope: String,
    pub(crate) scope_id: String,
    pub(crate) collection: String,
    pub(crate) key: String,
    pub(crate) value: String,
}

impl ExtensionRowRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<StoredExtensionRow, StoreError> {
        Ok(StoredExtensionRow {
            extension_id: id(&self.extension_id, "extension id")?,
            row: ExtensionRow {
                scope: RowScope::from_stored(word(&self.scope, "row scope")?, &self.scope_id)?,
                collection: self.collection,
                key: self.key,
                value: json(&self.value, "extension row")?,
            },
        })
    }
}

/// The columns of `extension_status` an [`ExtensionStatusRow`](ExtensionStatusRow) is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct StatusRow {
    pub(crate) extension_id: String,
    pub(crate) revision: String,
    pub(crate) schema_version: i64,
    pub(crate) stopped_reason: Option<String>,
}

impl StatusRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<ExtensionStatusRow, StoreError> {
        Ok(ExtensionStatusRow {
            extension_id: id(&self.extension_id, "extension id")?,
            revision: self.revision,
            schema_version: u32::try_from(self.schema_version).unwrap_or(0),
            stopped_reason: self.stopped_reason,
        })
    }
}

/// The columns of `timers` a [`TimerRow`](TimerRow) is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct TimerRowRow {
    pub(crate) id: String,
    pub(crate) extension_id: String,
    pub(crate) session_id: Option<String>,
    pub(crate) due_at: i64,
    pub(crate) cadence: Option<String>,
    pub(crate) payload: String,
    pub(crate) kind: String,
}

impl TimerRowRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<TimerRow, StoreError> {
        Ok(TimerRow {
            id: self.id,
            extension_id: id(&self.extension_id, "extension id")?,
            session_id: opt(self.session_id, |s| id(&s, "session id"))?,
            due_at: uint(self.due_at, "due_at")?,
            cadence: self.cadence,
            payload: json(&self.payload, "timer payload")?,
            kind: word::<TimerKind>(&self.kind, "timer kind")?,
        })
    }
}

/// The columns of `attention` an [`AttentionRow`](AttentionRow) is read from.
///
/// The fields are the columns, named alike.
#[derive(FromRow)]
pub(crate) struct AttentionRowRow {
    pub(crate) extension_id: String,
    pub(crate) kind: String,
    pub(crate) inbox: bool,
    pub(crate) text: String,
}

impl AttentionRowRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<AttentionRow, StoreError> {
        Ok(AttentionRow {
            extension_id: id(&self.extension_id, "extension id")?,
            kind: self.kind,
            inbox: self.inbox,
            text: self.text,
        })
    }
}
