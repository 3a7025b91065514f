//! How each [`Op`] becomes SQL on PostgreSQL: the statements and parameters the
//! writer runs inside a group's transaction. Every statement is keyed by the Agent.

use shiitake_core::store::columns::int;
use shiitake_core::store::{Op, SessionHeader, StoreError, StoredWord, inbox_rank, packed};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;

/// A value bound to one parameter. PostgreSQL types every parameter, so a NULL
/// carries its column's type.
#[derive(Clone, Debug)]
pub(crate) enum Bind {
    Text(Option<String>),
    Bytes(Vec<u8>),
    Int(Option<i64>),
    Bool(bool),
}

impl From<&str> for Bind {
    fn from(value: &str) -> Self {
        Bind::Text(Some(value.to_owned()))
    }
}

impl From<&String> for Bind {
    fn from(value: &String) -> Self {
        Bind::Text(Some(value.clone()))
    }
}

impl From<String> for Bind {
    fn from(value: String) -> Self {
        Bind::Text(Some(value))
    }
}

impl From<Option<&str>> for Bind {
    fn from(value: Option<&str>) -> Self {
        Bind::Text(value.map(str::to_owned))
    }
}

impl From<Option<String>> for Bind {
    fn from(value: Option<String>) -> Self {
        Bind::Text(value)
    }
}

impl From<Vec<u8>> for Bind {
    fn from(value: Vec<u8>) -> Self {
        Bind::Bytes(value)
    }
}

impl From<i64> for Bind {
    fn from(value: i64) -> Self {
        Bind::Int(Some(value))
    }
}

impl From<Option<i64>> for Bind {
    fn from(value: Option<i64>) -> Self {
        Bind::Int(value)
    }
}

impl From<bool> for Bind {
    fn from(value: bool) -> Self {
        Bind::Bool(value)
    }
}

/// What a statement must find for its commit to stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Anything.
    Any,
    /// Exactly one row, or the request fails with a conflict (a timer claim).
    Claim,
    /// Exactly one row, or the request is fenced (the lease moved on).
    Fence,
}

/// One statement of a request, with its parameters.
#[derive(Clone, Debug)]
pub(crate) struct Stmt {
    pub(crate) sql: &'static str,
    pub(crate) binds: Vec<Bind>,
    pub(crate) expect: Expect,
}

impl Stmt {
    fn new(sql: &'static str) -> Self {
        Self {
            sql,
            binds: Vec::new(),
            expect: Expect::Any,
        }
    }

    fn bind(mut self, value: impl Into<Bind>) -> Self {
        self.binds.push(value.into());
        self
    }

    fn expecting(mut self, expect: Expect) -> Self {
        self.expect = expect;
        self
    }

    /// The sqlx query with every parameter bound.
    pub(crate) fn query(&self) -> Query<'_, sqlx::Postgres, PgArguments> {
        let mut query = sqlx::query(self.sql);
        for bind in &self.binds {
            query = match bind {
                Bind::Text(value) => query.bind(value.as_deref()),
                Bind::Bytes(value) => query.bind(value.as_slice()),
                Bind::Int(value) => query.bind(*value),
                Bind::Bool(value) => query.bind(*value),
            };
        }
        query
    }
}

/// Builds the statements of one request for the Agent `agent` and lease holder `holder`.
pub(crate) struct Statements<'a> {
    pub(crate) agent: &'a str,
    pub(crate) holder: &'a str,
    pub(crate) batch: Vec<Stmt>,
}

impl Statements<'_> {
    fn push(&mut self, stmt: Stmt) {
        self.batch.push(stmt);
    }

    /// A statement whose first parameter is the Agent.
    fn keyed(&self, sql: &'static str) -> Stmt {
        Stmt::new(sql).bind(self.agent)
    }

    /// Appends the statements of one op.
    pub(crate) fn op(&mut self, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::CreateSession { header, request_id } => {
                let stmt = self
                    .keyed(
                        "INSERT INTO sessions (agent_id, id, create_request_id, created_at, \
                         last_activity_at, settled_at, title, head_sequence, leaf_entry_id, \
                         lineage_epoch, model_preference, inbox_state, inbox_rank, open_from) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
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
                    .bind(header.open_from.as_ref().map(|c| c.as_str()));
                self.push(stmt);
            }
            Op::PutHeader(header) => {
                let stmt = self
                    .keyed(
                        "UPDATE sessions SET last_activity_at = $3, settled_at = $4, title = $5, \
                         head_sequence = $6, leaf_entry_id = $7, lineage_epoch = $8, \
                         model_preference = $9, inbox_state = $10, inbox_rank = $11, \
                         open_from = $12 WHERE agent_id = $1 AND id = $2",
                    )
                    .bind(header.id.as_str())
                    .bind(int(header.last_activity_at))
                    .bind(header.settled_at.map(int))
                    .bind(&header.title)
                    .bind(int(header.head_sequence))
                    .bind(header.leaf.as_ref().map(|l| l.as_str()))
                    .bind(int(header.epoch))
                    .bind(preference_json(header)?)
                    .bind(header.inbox_state.word())
                    .bind(i64::from(inbox_rank(header.inbox_state)))
                    .bind(header.open_from.as_ref().map(|c| c.as_str()));
                self.push(stmt);
            }
            Op::DeleteSession { session_id } => {
                let stmt = self
                    .keyed("DELETE FROM forwarded_requests WHERE agent_id = $1 AND session_id = $2")
                    .bind(session_id.as_str());
                self.push(stmt);
                let stmt = self
                    .keyed("DELETE FROM sessions WHERE agent_id = $1 AND id = $2")
                    .bind(session_id.as_str());
                self.push(stmt);
            }
            Op::PutExtensionRow {
                extension_id,
                scope,
                collection,
                key,
                value,
            } => {
                let stmt = self
                    .keyed(
                        "INSERT INTO extension_rows (agent_id, extension_id, scope, scope_id, \
                         collection, key, value) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                         ON CONFLICT (agent_id, extension_id, scope, scope_id, collection, key) \
                         DO UPDATE SET value = excluded.value",
                    )
                    .bind(extension_id.as_str())
                    .bind(scope.kind().word())
                    .bind(scope.scope_id())
                    .bind(collection)
                    .bind(key)
                    .bind(value.to_string());
                self.push(stmt);
            }
            Op::DeleteExtensionRow {
                extension_id,
                scope,
                collection,
                key,
            } => {
                let stmt = self
                    .keyed(
                        "DELETE FROM extension_rows WHERE agent_id = $1 AND extension_id = $2 \
                         AND scope = $3 AND scope_id = $4 AND collection = $5 AND key = $6",
                    )
                    .bind(extension_id.as_str())
                    .bind(scope.kind().word())
                    .bind(scope.scope_id())
                    .bind(collection)
                    .bind(key);
                self.push(stmt);
            }
            Op::ReplaceExtensionRows { extension_id, rows } => {
                let stmt = self
                    .keyed("DELETE FROM extension_rows WHERE agent_id = $1 AND extension_id = $2")
                    .bind(extension_id.as_str());
                self.push(stmt);
                for row in rows {
                    let stmt = self
                        .keyed(
                            "INSERT INTO extension_rows (agent_id, extension_id, scope, scope_id, \
                             collection, key, value) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        )
                        .bind(extension_id.as_str())
                        .bind(row.scope.kind().word())
                        .bind(row.scope.scope_id())
                        .bind(&row.collection)
                        .bind(&row.key)
                        .bind(row.value.to_string());
                    self.push(stmt);
                }
            }
            Op::PutExtensionStatus(status) => {
                let stmt = self
                    .keyed(
                        "INSERT INTO extension_status (agent_id, extension_id, revision, \
                         schema_version, stopped_reason) VALUES ($1, $2, $3, $4, $5) \
                         ON CONFLICT (agent_id, extension_id) DO UPDATE SET \
                         revision = excluded.revision, schema_version = excluded.schema_version, \
                         stopped_reason = excluded.stopped_reason",
                    )
                    .bind(status.extension_id.as_str())
                    .bind(&status.revision)
                    .bind(i64::from(status.schema_version))
                    .bind(status.stopped_reason.as_deref());
                self.push(stmt);
            }
            Op::PutExtensionRequest {
                extension_id,
                scope,
                request_id,
                payload,
                response,
            } => {
                let stmt = self
                    .keyed(
                        "INSERT INTO extension_requests (agent_id, extension_id, scope_id, \
                         request_id, payload, response) VALUES ($1, $2, $3, $4, $5, $6)",
                    )
                    .bind(extension_id.as_str())
                    .bind(scope.scope_id())
                    .bind(request_id)
                    .bind(payload)
                    .bind(response.to_string());
                self.push(stmt);
            }
            Op::PutAttention {
                session_id,
                extension_id,
                kind,
                inbox,
                text,
            } => {
                let stmt = self
                    .keyed(
                        "INSERT INTO attention (agent_id, session_id, extension_id, kind, inbox, \
                         text) VALUES ($1, $2, $3, $4, $5, $6) \
                         ON CONFLICT (agent_id, session_id, extension_id, kind) \
                         DO UPDATE SET inbox = excluded.inbox, text = excluded.text",
                    )
                    .bind(session_id.as_str())
                    .bind(extension_id.as_str())
                    .bind(kind)
                    .bind(*inbox)
                    .bind(text);
                self.push(stmt);
            }
            Op::DeleteAttention {
                session_id,
                extension_id,
                kind,
            } => {
                let stmt = self
                    .keyed(
                        "DELETE FROM attention WHERE agent_id = $1 AND session_id = $2 \
                         AND extension_id = $3 AND kind = $4",
                    )
                    .bind(session_id.as_str())
                    .bind(extension_id.as_str())
                    .bind(kind);
                self.push(stmt);
            }
            Op::PutTimer(timer) => {
                let stmt = self
                    .keyed(
                        "INSERT INTO timers (agent_id, id, extension_id, session_id, due_at, \
                         cadence, payload, kind) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(&timer.id)
                    .bind(timer.extension_id.as_str())
                    .bind(timer.session_id.as_ref().map(|s| s.as_str()))
                    .bind(int(timer.due_at))
                    .bind(timer.cadence.as_deref())
                    .bind(timer.payload.to_string())
                    .bind(timer.kind.word());
                self.push(stmt);
            }
            Op::DeleteTimer { extension_id, id } => {
                let stmt = self
                    .keyed(
                        "DELETE FROM timers WHERE agent_id = $1 AND id = $2 AND extension_id = $3",
                    )
                    .bind(id)
                    .bind(extension_id.as_str());
                self.push(stmt);
            }
            Op::ClaimTimer { id, due_at, next } => {
                // PostgreSQL serialises conditional updates of one row: a second
                // claimer waits for the first, then finds the due time moved and
                // changes nothing, so its commit fails as a conflict.
                let stmt = match next {
                    Some(next) => self
                        .keyed(
                            "UPDATE timers SET due_at = $4 \
                             WHERE agent_id = $1 AND id = $2 AND due_at = $3",
                        )
                        .bind(id)
                        .bind(int(*due_at))
                        .bind(int(*next)),
                    None => self
                        .keyed("DELETE FROM timers WHERE agent_id = $1 AND id = $2 AND due_at = $3")
                        .bind(id)
                        .bind(int(*due_at)),
                };
                self.push(stmt.expecting(Expect::Claim));
            }
            Op::Fence { session_id, token } => {
                // The key-share lock holds off a takeover (which changes the token, a
                // key column) until this transaction ends, so the new owner loads after
                // this commit; renewals (which change only the expiry) pass.
                let stmt = self
                    .keyed(
                        "SELECT 1 FROM session_leases WHERE agent_id = $1 AND session_id = $2 \
                         AND token = $3 AND holder = $4 FOR KEY SHARE",
                    )
                    .bind(session_id.as_str())
                    .bind(int(token.0))
                    .bind(self.holder);
                self.push(stmt.expecting(Expect::Fence));
            }
            Op::InsertCommand {
                session_id,
                command,
            } => {
                let stmt = self
                    .keyed(
                        "INSERT INTO commands (agent_id, session_id, id, request_id, kind, \
                         payload, accepted_sequence, state, run_id, recoveries, origin) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
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
                    .bind(command.origin.as_ref().map(|o| o.to_string()));
                self.push(stmt);
            }
            Op::SetCommandState {
                session_id,
                command_id,
                state,
                run_id,
            } => {
                let stmt = self
                    .keyed(
                        "UPDATE commands SET state = $4, run_id = COALESCE($5, run_id) \
                         WHERE agent_id = $1 AND session_id = $2 AND id = $3",
                    )
                    .bind(session_id.as_str())
                    .bind(command_id.as_str())
                    .bind(state.word())
                    .bind(run_id.as_ref().map(|r| r.as_str()));
                self.push(stmt);
            }
            Op::CountRecovery {
                session_id,
                command_id,
            } => {
                let stmt = self
                    .keyed(
                        "UPDATE commands SET recoveries = recoveries + 1 \
                         WHERE agent_id = $1 AND session_id = $2 AND id = $3",
                    )
                    .bind(session_id.as_str())
                    .bind(command_id.as_str());
                self.push(stmt);
            }
            Op::InsertEntry { session_id, entry } => {
                let message = packed::pack(&entry.message)?;
                let stmt = self
                    .keyed(
                        "INSERT INTO entries (agent_id, session_id, id, parent_id, sequence, \
                         command_id, message) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(session_id.as_str())
                    .bind(entry.id.as_str())
                    .bind(entry.parent.as_ref().map(|p| p.as_str()))
                    .bind(int(entry.sequence))
                    .bind(entry.command_id.as_ref().map(|c| c.as_str()))
                    .bind(message);
                self.push(stmt);
            }
            Op::InsertCompaction {
                session_id,
                compaction,
            } => {
                let stmt = self
                    .keyed(
                        "INSERT INTO compactions (agent_id, session_id, id, commit_sequence, \
                         first_kept_entry, precedes_sequence, at, summary) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(session_id.as_str())
                    .bind(compaction.id.as_str())
                    .bind(int(compaction.commit_sequence))
                    .bind(compaction.first_kept.as_str())
                    .bind(int(compaction.precedes_sequence))
                    .bind(int(compaction.at))
                    .bind(&compaction.summary);
                self.push(stmt);
            }
            Op::InsertSandboxFailure {
                session_id,
                failure,
            } => {
                let stmt = self
                    .keyed(
                        "INSERT INTO sandbox_failures (agent_id, session_id, id, sequence, at, \
                         capability, message) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(session_id.as_str())
                    .bind(failure.id.as_str())
                    .bind(int(failure.sequence))
                    .bind(int(failure.at))
                    .bind(&failure.capability)
                    .bind(&failure.message);
                self.push(stmt);
            }
            Op::InsertTerminal {
                session_id,
                terminal,
            } => {
                let stmt = self
                    .keyed(
                        "INSERT INTO terminals (agent_id, session_id, command_id, outcome, \
                         sequence, diagnostic, anchor_entry) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(session_id.as_str())
                    .bind(terminal.command_id.as_str())
                    .bind(terminal.outcome.word())
                    .bind(int(terminal.sequence))
                    .bind(terminal.diagnostic.as_deref())
                    .bind(terminal.anchor.as_ref().map(|a| a.as_str()));
                self.push(stmt);
            }
        }
        Ok(())
    }
}

fn preference_json(header: &SessionHeader) -> Result<Option<String>, StoreError> {
    header
        .model_preference
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| StoreError::Corrupt(format!("model preference: {error}")))
}
