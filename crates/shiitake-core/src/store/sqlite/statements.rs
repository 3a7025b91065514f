//! How each [`Op`] becomes SQL: the statements and parameters the writer runs.

use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, Value as SqlValue};

use crate::store::columns::int;
use crate::store::{Op, SessionHeader, StoreError, StoredWord, inbox_rank};

/// A value bound to one statement parameter.
pub(super) enum Bind {
    Text(String),
    Blob(Vec<u8>),
    Int(i64),
    Null,
    Bool(bool),
}

impl ToSql for Bind {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Bind::Text(text) => ToSqlOutput::from(text.as_str()),
            Bind::Blob(bytes) => ToSqlOutput::from(bytes.as_slice()),
            Bind::Int(value) => ToSqlOutput::from(*value),
            Bind::Null => ToSqlOutput::Owned(SqlValue::Null),
            Bind::Bool(value) => ToSqlOutput::from(*value),
        })
    }
}

impl From<&str> for Bind {
    fn from(value: &str) -> Self {
        Bind::Text(value.to_owned())
    }
}

impl From<&String> for Bind {
    fn from(value: &String) -> Self {
        Bind::Text(value.clone())
    }
}

impl From<String> for Bind {
    fn from(value: String) -> Self {
        Bind::Text(value)
    }
}

impl From<i64> for Bind {
    fn from(value: i64) -> Self {
        Bind::Int(value)
    }
}

impl From<bool> for Bind {
    fn from(value: bool) -> Self {
        Bind::Bool(value)
    }
}

impl<T: Into<Bind>> From<Option<T>> for Bind {
    fn from(value: Option<T>) -> Self {
        value.map_or(Bind::Null, Into::into)
    }
}

/// One statement of a batch, with its parameters.
pub(super) struct Stmt {
    pub(super) sql: &'static str,
    pub(super) binds: Vec<Bind>,
    /// The statement must change exactly one row, or the commit fails with this conflict.
    pub(super) claim: Option<&'static str>,
}

impl Stmt {
    fn new(sql: &'static str) -> Self {
        Self {
            sql,
            binds: Vec::new(),
            claim: None,
        }
    }

    fn bind(mut self, value: impl Into<Bind>) -> Self {
        self.binds.push(value.into());
        self
    }

    fn claiming(mut self, conflict: &'static str) -> Self {
        self.claim = Some(conflict);
        self
    }

    fn push(self, batch: &mut Vec<Stmt>) {
        batch.push(self);
    }
}

/// The statements of a whole commit, in order.
pub(super) fn batch(ops: &[Op]) -> Result<Vec<Stmt>, StoreError> {
    let mut batch = Vec::with_capacity(ops.len());
    for op in ops {
        statements(&mut batch, op)?;
    }
    Ok(batch)
}

/// Appends the statements of one op to `batch`.
fn statements(batch: &mut Vec<Stmt>, op: &Op) -> Result<(), StoreError> {
    match op {
        Op::CreateSession { header, request_id } => {
            Stmt::new(
                "INSERT INTO sessions (key, id, create_request_id, created_at, last_activity_at, \
                 settled_at, title, head_sequence, leaf_entry_id, lineage_epoch, \
                 model_preference, inbox_state, inbox_rank, open_from) \
                 VALUES ((SELECT IFNULL(MAX(key), 0) + 1 FROM sessions), \
                 ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(header.id.as_str())
            .bind(request_id.as_ref().map(|r| r.as_str()))
            .bind(int(header.created_at))
            .bind(int(header.last_activity_at))
            .bind(header.settled_at.map(int))
            .bind(&header.title)
            .bind(int(header.head_sequence))
            .bind(header.leaf.as_ref().map(|l| l.as_str()))
            .bind(int(header.epoch))
            .bind(preference_json(header)?)
            .bind(header.inbox_state.word())
            .bind(i64::from(inbox_rank(header.inbox_state)))
            .bind(header.open_from.as_ref().map(|c| c.as_str()))
            .push(batch);
        }
        Op::PutHeader(header) => {
            Stmt::new(
                "UPDATE sessions SET last_activity_at = ?, settled_at = ?, title = ?, \
                 head_sequence = ?, leaf_entry_id = ?, lineage_epoch = ?, model_preference = ?, \
                 inbox_state = ?, inbox_rank = ?, open_from = ? WHERE id = ?",
            )
            .bind(int(header.last_activity_at))
            .bind(header.settled_at.map(int))
            .bind(&header.title)
            .bind(int(header.head_sequence))
            .bind(header.leaf.as_ref().map(|l| l.as_str()))
            .bind(int(header.epoch))
            .bind(preference_json(header)?)
            .bind(header.inbox_state.word())
            .bind(i64::from(inbox_rank(header.inbox_state)))
            .bind(header.open_from.as_ref().map(|c| c.as_str()))
            .bind(header.id.as_str())
            .push(batch);
        }
        Op::DeleteSession { session_id } => {
            Stmt::new("DELETE FROM sessions WHERE id = ?")
                .bind(session_id.as_str())
                .push(batch);
        }
        Op::PutExtensionRow {
            extension_id,
            scope,
            collection,
            key,
            value,
        } => {
            Stmt::new(
                "INSERT INTO extension_rows (extension_id, scope, scope_id, collection, key, value) \
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (extension_id, scope, scope_id, collection, key) \
                 DO UPDATE SET value = excluded.value",
            )
            .bind(extension_id.as_str())
            .bind(scope.kind().word())
            .bind(scope.scope_id())
            .bind(collection)
            .bind(key)
            .bind(value.to_string())
            .push(batch);
        }
        Op::DeleteExtensionRow {
            extension_id,
            scope,
            collection,
            key,
        } => {
            Stmt::new(
                "DELETE FROM extension_rows WHERE extension_id = ? AND scope = ? AND scope_id = ? \
                 AND collection = ? AND key = ?",
            )
            .bind(extension_id.as_str())
            .bind(scope.kind().word())
            .bind(scope.scope_id())
            .bind(collection)
            .bind(key)
            .push(batch);
        }
        Op::ReplaceExtensionRows { extension_id, rows } => {
            Stmt::new("DELETE FROM extension_rows WHERE extension_id = ?")
                .bind(extension_id.as_str())
                .push(batch);
            for row in rows {
                Stmt::new(
                    "INSERT INTO extension_rows (extension_id, scope, scope_id, collection, key, value) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(extension_id.as_str())
                .bind(row.scope.kind().word())
                .bind(row.scope.scope_id())
                .bind(&row.collection)
                .bind(&row.key)
                .bind(row.value.to_string())
                .push(batch);
            }
        }
        Op::PutExtensionStatus(status) => {
            Stmt::new(
                "INSERT INTO extension_status (extension_id, revision, schema_version, stopped_reason) \
                 VALUES (?, ?, ?, ?) ON CONFLICT (extension_id) DO UPDATE SET revision = excluded.revision, \
                 schema_version = excluded.schema_version, stopped_reason = excluded.stopped_reason",
            )
            .bind(status.extension_id.as_str())
            .bind(&status.revision)
            .bind(i64::from(status.schema_version))
            .bind(status.stopped_reason.as_deref())
            .push(batch);
        }
        Op::PutExtensionRequest {
            extension_id,
            scope,
            request_id,
            payload,
            response,
        } => {
            Stmt::new(
                "INSERT INTO extension_requests (extension_id, scope_id, request_id, payload, response) \
                 VALUES (?, ?, ?, ?, ?)",
            )
            .bind(extension_id.as_str())
            .bind(scope.scope_id())
            .bind(request_id)
            .bind(payload)
            .bind(response.to_string())
            .push(batch);
        }
        Op::PutAttention {
            session_id,
            extension_id,
            kind,
            inbox,
            text,
        } => {
            Stmt::new(
                "INSERT INTO attention (session_id, extension_id, kind, inbox, text) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (session_id, extension_id, kind) DO UPDATE SET inbox = excluded.inbox, \
                 text = excluded.text",
            )
            .bind(session_id.as_str())
            .bind(extension_id.as_str())
            .bind(kind)
            .bind(*inbox)
            .bind(text)
            .push(batch);
        }
        Op::DeleteAttention {
            session_id,
            extension_id,
            kind,
        } => {
            Stmt::new(
                "DELETE FROM attention WHERE session_id = ? AND extension_id = ? AND kind = ?",
            )
            .bind(session_id.as_str())
            .bind(extension_id.as_str())
            .bind(kind)
            .push(batch);
        }
        Op::PutTimer(timer) => {
            Stmt::new(
                "INSERT INTO timers (id, extension_id, session_id, due_at, cadence, payload, kind) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&timer.id)
            .bind(timer.extension_id.as_str())
            .bind(timer.session_id.as_ref().map(|s| s.as_str()))
            .bind(int(timer.due_at))
            .bind(timer.cadence.as_deref())
            .bind(timer.payload.to_string())
            .bind(timer.kind.word())
            .push(batch);
        }
        Op::DeleteTimer { extension_id, id } => {
            Stmt::new("DELETE FROM timers WHERE id = ? AND extension_id = ?")
                .bind(id)
                .bind(extension_id.as_str())
                .push(batch);
        }
        Op::ClaimTimer { id, due_at, next } => {
            // A claim must change exactly one row; `commit_stepwise` checks it.
            let claim = match next {
                Some(next) => Stmt::new("UPDATE timers SET due_at = ? WHERE id = ? AND due_at = ?")
                    .bind(int(*next))
                    .bind(id)
                    .bind(int(*due_at)),
                None => Stmt::new("DELETE FROM timers WHERE id = ? AND due_at = ?")
                    .bind(id)
                    .bind(int(*due_at)),
            };
            claim.claiming("a timer was already claimed").push(batch);
        }
        Op::InsertCommand {
            session_id,
            command,
        } => {
            Stmt::new(
                "INSERT INTO commands (session_id, id, request_id, kind, payload, \
                 accepted_sequence, state, run_id, recoveries, origin) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(command.id.as_str())
            .bind(command.request_id.as_ref().map(|r| r.as_str()))
            .bind(command.kind.word())
            .bind(&command.payload)
            .bind(int(command.accepted_sequence))
            .bind(command.state.word())
            .bind(command.run_id.as_ref().map(|r| r.as_str()))
            .bind(i64::from(command.recoveries))
            .bind(command.origin.as_ref().map(|o| o.to_string()))
            .push(batch);
        }
        Op::SetCommandState {
            session_id,
            command_id,
            state,
            run_id,
        } => {
            Stmt::new(
                "UPDATE commands SET state = ?, run_id = COALESCE(?, run_id) \
                 WHERE session_id = ? AND id = ?",
            )
            .bind(state.word())
            .bind(run_id.as_ref().map(|r| r.as_str()))
            .bind(session_id.as_str())
            .bind(command_id.as_str())
            .push(batch);
        }
        Op::CountRecovery {
            session_id,
            command_id,
        } => {
            Stmt::new(
                "UPDATE commands SET recoveries = recoveries + 1 WHERE session_id = ? AND id = ?",
            )
            .bind(session_id.as_str())
            .bind(command_id.as_str())
            .push(batch);
        }
        Op::InsertEntry { session_id, entry } => {
            // The parent is named by its sequence; the insert claims its row, so a parent
            // that is not in this Session fails the commit instead of cutting the lineage.
            let (sql, parent, conflict) = match &entry.parent {
                None => (
                    "INSERT INTO entries (session_key, sequence, id, parent_sequence, command_id, \
                     message) SELECT key, ?, ?, NULL, ?, ? FROM sessions WHERE id = ?",
                    None,
                    "an entry of a Session that does not exist",
                ),
                Some(parent) => (
                    "INSERT INTO entries (session_key, sequence, id, parent_sequence, command_id, \
                     message) SELECT p.session_key, ?, ?, p.sequence, ?, ? FROM entries p \
                     WHERE p.session_key = (SELECT key FROM sessions WHERE id = ?) AND p.id = ?",
                    Some(parent.as_str()),
                    "an entry whose parent is not in its Session",
                ),
            };
            let mut stmt = Stmt::new(sql)
                .bind(int(entry.sequence))
                .bind(entry.id.as_str())
                .bind(entry.command_id.as_ref().map(|c| c.as_str()))
                .bind(Bind::Blob(crate::store::packed::pack(&entry.message)?))
                .bind(session_id.as_str());
            if let Some(parent) = parent {
                stmt = stmt.bind(parent);
            }
            stmt.claiming(conflict).push(batch);
        }
        Op::InsertCompaction {
            session_id,
            compaction,
        } => {
            Stmt::new(
                "INSERT INTO compactions (session_id, id, commit_sequence, first_kept_entry, \
                 precedes_sequence, at, summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(compaction.id.as_str())
            .bind(int(compaction.commit_sequence))
            .bind(compaction.first_kept.as_str())
            .bind(int(compaction.precedes_sequence))
            .bind(int(compaction.at))
            .bind(&compaction.summary)
            .push(batch);
        }
        Op::InsertSandboxFailure {
            session_id,
            failure,
        } => {
            Stmt::new(
                "INSERT INTO sandbox_failures (session_id, id, sequence, at, capability, message) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(failure.id.as_str())
            .bind(int(failure.sequence))
            .bind(int(failure.at))
            .bind(&failure.capability)
            .bind(&failure.message)
            .push(batch);
        }
        // One process owns every Session of a SQLite file: there is no lease to check.
        Op::Fence { .. } => {}
        Op::InsertTerminal {
            session_id,
            terminal,
        } => {
            Stmt::new(
                "INSERT INTO terminals (session_id, command_id, outcome, sequence, diagnostic, \
                 anchor_entry) VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(terminal.command_id.as_str())
            .bind(terminal.outcome.word())
            .bind(int(terminal.sequence))
            .bind(terminal.diagnostic.as_deref())
            .bind(terminal.anchor.as_ref().map(|a| a.as_str()))
            .push(batch);
        }
    }
    Ok(())
}

fn preference_json(header: &SessionHeader) -> Result<Option<String>, StoreError> {
    header
        .model_preference
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| StoreError::Corrupt(format!("model preference: {error}")))
}
