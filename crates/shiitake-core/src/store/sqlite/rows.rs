//! Decoding SQLite rows into store types.

use serde::de::DeserializeOwned;
use shiitake_protocol::{CommandId, EntryId, EventId, RequestId, SessionId, SessionInboxState};
use sqlx::FromRow;

use crate::store::{
    CommandKind, CommandState, SessionHeader, StoreError, StoredCommand, StoredCompaction,
    StoredEntry, StoredSandboxFailure, StoredTerminal,
};

/// SQLite stores integers as i64; every count and time here fits.
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn uint(value: i64, what: &str) -> Result<u64, StoreError> {
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

pub(crate) fn inbox_state_str(state: SessionInboxState) -> &'static str {
    match state {
        SessionInboxState::NeedsYou => "needs_you",
        SessionInboxState::Running => "running",
        SessionInboxState::Errored => "errored",
        SessionInboxState::Done => "done",
    }
}

fn parse_inbox_state(value: &str) -> Result<SessionInboxState, StoreError> {
    match value {
        "needs_you" => Ok(SessionInboxState::NeedsYou),
        "running" => Ok(SessionInboxState::Running),
        "errored" => Ok(SessionInboxState::Errored),
        "done" => Ok(SessionInboxState::Done),
        other => Err(StoreError::Corrupt(format!("bad inbox state {other:?}"))),
    }
}

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
    pub(crate) fn decode(self) -> Result<SessionHeader, StoreError> {
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
            inbox_state: parse_inbox_state(&self.inbox_state)?,
            open_from: self
                .open_from
                .map(|c| id::<CommandId>(&c, "open_from"))
                .transpose()?,
        })
    }
}

#[derive(FromRow)]
pub(crate) struct CommandRow {
    id: String,
    request_id: Option<String>,
    origin: Option<String>,
    kind: String,
    payload: String,
    accepted_sequence: i64,
    state: String,
    run_id: Option<String>,
    recoveries: i64,
}

impl CommandRow {
    pub(crate) fn decode(self) -> Result<StoredCommand, StoreError> {
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
            kind: CommandKind::parse(&self.kind)
                .ok_or_else(|| StoreError::Corrupt(format!("bad command kind {:?}", self.kind)))?,
            payload: self.payload,
            accepted_sequence: uint(self.accepted_sequence, "accepted_sequence")?,
            state: CommandState::parse(&self.state).ok_or_else(|| {
                StoreError::Corrupt(format!("bad command state {:?}", self.state))
            })?,
            run_id: self
                .run_id
                .map(|r| id::<CommandId>(&r, "run id"))
                .transpose()?,
            recoveries: u32::try_from(self.recoveries).unwrap_or(u32::MAX),
        })
    }
}

#[derive(FromRow)]
pub(crate) struct EntryRow {
    id: String,
    parent_id: Option<String>,
    sequence: i64,
    command_id: Option<String>,
    message: String,
}

impl EntryRow {
    pub(crate) fn decode(self) -> Result<StoredEntry, StoreError> {
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
            message: json(&self.message, "message")?,
        })
    }
}

#[derive(FromRow)]
pub(crate) struct TerminalRow {
    command_id: String,
    outcome: String,
    sequence: i64,
    diagnostic: Option<String>,
    anchor_entry: Option<String>,
}

impl TerminalRow {
    pub(crate) fn decode(self) -> Result<StoredTerminal, StoreError> {
        Ok(StoredTerminal {
            command_id: id::<CommandId>(&self.command_id, "command id")?,
            outcome: json(&format!("\"{}\"", self.outcome), "terminal outcome")?,
            sequence: uint(self.sequence, "sequence")?,
            diagnostic: self.diagnostic,
            anchor: self
                .anchor_entry
                .map(|a| id::<EntryId>(&a, "anchor"))
                .transpose()?,
        })
    }
}

#[derive(FromRow)]
pub(crate) struct CompactionRow {
    id: String,
    commit_sequence: i64,
    first_kept_entry: String,
    precedes_sequence: i64,
    at: i64,
    summary: String,
}

impl CompactionRow {
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

#[derive(FromRow)]
pub(crate) struct SandboxFailureRow {
    id: String,
    sequence: i64,
    at: i64,
    capability: String,
    message: String,
}

impl SandboxFailureRow {
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
    pub(crate) fn decode(
        self,
    ) -> Result<(shiitake_protocol::ExtensionId, crate::store::ExtensionRow), StoreError> {
        Ok((
            id(&self.extension_id, "extension id")?,
            crate::store::ExtensionRow {
                scope: self.scope,
                scope_id: self.scope_id,
                collection: self.collection,
                key: self.key,
                value: json(&self.value, "extension row")?,
            },
        ))
    }
}

#[derive(FromRow)]
pub(crate) struct StatusRow {
    extension_id: String,
    revision: String,
    schema_version: i64,
    stopped_reason: Option<String>,
}

impl StatusRow {
    pub(crate) fn decode(self) -> Result<crate::store::ExtensionStatusRow, StoreError> {
        Ok(crate::store::ExtensionStatusRow {
            extension_id: id(&self.extension_id, "extension id")?,
            revision: self.revision,
            schema_version: u32::try_from(self.schema_version).unwrap_or(0),
            stopped_reason: self.stopped_reason,
        })
    }
}

#[derive(FromRow)]
pub(crate) struct TimerRowRow {
    id: String,
    extension_id: String,
    session_id: Option<String>,
    due_at: i64,
    cadence: Option<String>,
    payload: String,
    kind: String,
}

impl TimerRowRow {
    pub(crate) fn decode(self) -> Result<crate::store::TimerRow, StoreError> {
        Ok(crate::store::TimerRow {
            id: self.id,
            extension_id: id(&self.extension_id, "extension id")?,
            session_id: self.session_id.map(|s| id(&s, "session id")).transpose()?,
            due_at: uint(self.due_at, "due_at")?,
            cadence: self.cadence,
            payload: json(&self.payload, "timer payload")?,
            kind: crate::store::TimerKind::parse(&self.kind)
                .ok_or_else(|| StoreError::Corrupt(format!("timer kind `{}`", self.kind)))?,
        })
    }
}

#[derive(FromRow)]
pub(crate) struct AttentionRowRow {
    extension_id: String,
    kind: String,
    inbox: bool,
    text: String,
}

impl AttentionRowRow {
    pub(crate) fn decode(self) -> Result<crate::store::AttentionRow, StoreError> {
        Ok(crate::store::AttentionRow {
            extension_id: id(&self.extension_id, "extension id")?,
            kind: self.kind,
            inbox: self.inbox,
            text: self.text,
        })
    }
}
