//! Stored rows as columns, and their decoding into store types.
//!
//! Both stores keep the same columns (text, 64-bit integers, booleans; JSON as
//! text; messages packed as bytes), so one set of row structs serves both: each derives `sqlx::FromRow`,
//! which works for any sqlx backend, and decodes into the typed rows of
//! [`crate::store`]. A column that does not decode is [`StoreError::Corrupt`]
//! with the column named, never a panic.

use serde::de::DeserializeOwned;
use shiitake_protocol::{CommandId, EntryId, EventId, RequestId, SessionId, SessionInboxState};
use sqlx::FromRow;

use crate::store::{
    CommandKind, CommandState, ExtensionRow, RowScope, SessionHeader, StoreError, StoredCommand,
    StoredCompaction, StoredEntry, StoredExtensionRow, StoredSandboxFailure, StoredTerminal,
    StoredWord, TimerKind,
};

/// A count or time as the databases store it: i64, which every count and time here
/// fits (a larger value saturates).
pub fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Reads back an integer that must not be negative.
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

/// Reads a stored word back into its enum; an unknown word is [`StoreError::Corrupt`].
pub fn word<T: StoredWord>(value: &str, what: &str) -> Result<T, StoreError> {
    T::from_word(value).ok_or_else(|| StoreError::Corrupt(format!("bad {what} {value:?}")))
}

/// The columns of `sessions` a [`SessionHeader`] is read from.
///
/// The fields are the columns, named alike.
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct SessionRow {
    pub id: String,
    pub created_at: i64,
    pub last_activity_at: i64,
    pub settled_at: Option<i64>,
    pub title: String,
    pub head_sequence: i64,
    pub leaf_entry_id: Option<String>,
    pub lineage_epoch: i64,
    pub model_preference: Option<String>,
    pub inbox_state: String,
    pub inbox_rank: i64,
    pub open_from: Option<String>,
}

impl SessionRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<SessionHeader, StoreError> {
        Ok(SessionHeader {
            id: id::<SessionId>(&self.id, "session id")?,
            created_at: uint(self.created_at, "created_at")?,
            last_activity_at: uint(self.last_activity_at, "last_activity_at")?,
            settled_at: self.settled_at.map(|t| uint(t, "settled_at")).transpose()?,
            title: self.title,
            head_sequence: uint(self.head_sequence, "head_sequence")?,
            leaf: self
                .leaf_entry_id
                .map(|e| id::<EntryId>(&e, "leaf"))
                .transpose()?,
            epoch: uint(self.lineage_epoch, "lineage_epoch")?,
            model_preference: self
                .model_preference
                .map(|p| json(&p, "model preference"))
                .transpose()?,
            inbox_state: word::<SessionInboxState>(&self.inbox_state, "inbox state")?,
            open_from: self
                .open_from
                .map(|c| id::<CommandId>(&c, "open_from"))
                .transpose()?,
        })
    }
}

/// The columns of `commands` a [`StoredCommand`] is read from.
///
/// The fields are the columns, named alike.
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct CommandRow {
    pub id: String,
    pub request_id: Option<String>,
    pub origin: Option<String>,
    pub kind: String,
    pub payload: String,
    pub accepted_sequence: i64,
    pub state: String,
    pub run_id: Option<String>,
    pub recoveries: i64,
}

impl CommandRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<StoredCommand, StoreError> {
        Ok(StoredCommand {
            id: id::<CommandId>(&self.id, "command id")?,
            origin: self
                .origin
                .map(|o| json(&o, "command origin"))
                .transpose()?,
            request_id: self
                .request_id
                .map(|r| id::<RequestId>(&r, "request id"))
                .transpose()?,
            kind: word::<CommandKind>(&self.kind, "command kind")?,
            payload: self.payload,
            accepted_sequence: uint(self.accepted_sequence, "accepted_sequence")?,
            state: word::<CommandState>(&self.state, "command state")?,
            run_id: self
                .run_id
                .map(|r| id::<CommandId>(&r, "run id"))
                .transpose()?,
            recoveries: u32::try_from(self.recoveries).unwrap_or(u32::MAX),
        })
    }
}

/// The columns of `entries` a [`StoredEntry`] is read from.
///
/// The fields are the columns, named alike; the message is stored packed
/// ([`crate::store::packed`]).
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct EntryRow {
    pub id: String,
    pub parent_id: Option<String>,
    pub sequence: i64,
    pub command_id: Option<String>,
    pub message: Vec<u8>,
}

impl EntryRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<StoredEntry, StoreError> {
        Ok(StoredEntry {
            id: id::<EntryId>(&self.id, "entry id")?,
            parent: self
                .parent_id
                .map(|p| id::<EntryId>(&p, "parent id"))
                .transpose()?,
            sequence: uint(self.sequence, "sequence")?,
            command_id: self
                .command_id
                .map(|c| id::<CommandId>(&c, "command id"))
                .transpose()?,
            message: super::packed::unpack(&self.message)?,
        })
    }
}

/// The columns of `terminals` a [`StoredTerminal`] is read from.
///
/// The fields are the columns, named alike.
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct TerminalRow {
    pub command_id: String,
    pub outcome: String,
    pub sequence: i64,
    pub diagnostic: Option<String>,
    pub anchor_entry: Option<String>,
}

impl TerminalRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<StoredTerminal, StoreError> {
        Ok(StoredTerminal {
            command_id: id::<CommandId>(&self.command_id, "command id")?,
            outcome: word(&self.outcome, "terminal outcome")?,
            sequence: uint(self.sequence, "sequence")?,
            diagnostic: self.diagnostic,
            anchor: self
                .anchor_entry
                .map(|a| id::<EntryId>(&a, "anchor"))
                .transpose()?,
        })
    }
}

/// The columns of `compactions` a [`StoredCompaction`] is read from.
///
/// The fields are the columns, named alike.
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct CompactionRow {
    pub id: String,
    pub commit_sequence: i64,
    pub first_kept_entry: String,
    pub precedes_sequence: i64,
    pub at: i64,
    pub summary: String,
}

impl CompactionRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<StoredCompaction, StoreError> {
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
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct SandboxFailureRow {
    pub id: String,
    pub sequence: i64,
    pub at: i64,
    pub capability: String,
    pub message: String,
}

impl SandboxFailureRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<StoredSandboxFailure, StoreError> {
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
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct ExtensionRowRow {
    pub extension_id: String,
    pub scope: String,
    pub scope_id: String,
    pub collection: String,
    pub key: String,
    pub value: String,
}

impl ExtensionRowRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<StoredExtensionRow, StoreError> {
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

/// The columns of `extension_status` an [`ExtensionStatusRow`](crate::store::ExtensionStatusRow) is read from.
///
/// The fields are the columns, named alike.
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct StatusRow {
    pub extension_id: String,
    pub revision: String,
    pub schema_version: i64,
    pub stopped_reason: Option<String>,
}

impl StatusRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<crate::store::ExtensionStatusRow, StoreError> {
        Ok(crate::store::ExtensionStatusRow {
            extension_id: id(&self.extension_id, "extension id")?,
            revision: self.revision,
            schema_version: u32::try_from(self.schema_version).unwrap_or(0),
            stopped_reason: self.stopped_reason,
        })
    }
}

/// The columns of `timers` a [`TimerRow`](crate::store::TimerRow) is read from.
///
/// The fields are the columns, named alike.
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct TimerRowRow {
    pub id: String,
    pub extension_id: String,
    pub session_id: Option<String>,
    pub due_at: i64,
    pub cadence: Option<String>,
    pub payload: String,
    pub kind: String,
}

impl TimerRowRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<crate::store::TimerRow, StoreError> {
        Ok(crate::store::TimerRow {
            id: self.id,
            extension_id: id(&self.extension_id, "extension id")?,
            session_id: self.session_id.map(|s| id(&s, "session id")).transpose()?,
            due_at: uint(self.due_at, "due_at")?,
            cadence: self.cadence,
            payload: json(&self.payload, "timer payload")?,
            kind: word::<TimerKind>(&self.kind, "timer kind")?,
        })
    }
}

/// The columns of `attention` an [`AttentionRow`](crate::store::AttentionRow) is read from.
///
/// The fields are the columns, named alike.
#[allow(missing_docs)]
#[derive(FromRow)]
pub struct AttentionRowRow {
    pub extension_id: String,
    pub kind: String,
    pub inbox: bool,
    pub text: String,
}

impl AttentionRowRow {
    /// The typed row; a column that does not decode is [`StoreError::Corrupt`].
    pub fn decode(self) -> Result<crate::store::AttentionRow, StoreError> {
        Ok(crate::store::AttentionRow {
            extension_id: id(&self.extension_id, "extension id")?,
            kind: self.kind,
            inbox: self.inbox,
            text: self.text,
        })
    }
}
