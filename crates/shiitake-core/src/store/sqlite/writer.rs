//! The single SQLite writer: every commit of an Agent goes through one task.
//!
//! Owners hand their op lists to this task; it takes whatever is waiting (up to
//! a bound) and commits it in one transaction (group commit), then answers each
//! caller. If the group fails, each request is retried alone so one bad request
//! cannot fail the others. One writer means no "database is locked" and more
//! than one commit per fsync.

use shiitake_protocol::TerminalOutcome;
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use super::rows::{inbox_state_str, int};
use crate::store::{Op, SessionHeader, StoreError, inbox_rank};

/// One caller's commit.
pub(crate) struct WriteRequest {
    pub(crate) ops: Vec<Op>,
    pub(crate) reply: oneshot::Sender<Result<(), StoreError>>,
}

/// Most requests committed in one transaction.
const MAX_GROUP: usize = 256;

/// Runs until every sender is dropped, then closes the connection.
pub(crate) async fn run(mut conn: SqliteConnection, mut requests: mpsc::Receiver<WriteRequest>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while let Some(first) = requests.recv().await {
        group.push(first);
        while group.len() < MAX_GROUP {
            match requests.try_recv() {
                Ok(request) => group.push(request),
                Err(_) => break,
            }
        }
        match commit_group(&mut conn, group.iter().map(|r| r.ops.as_slice())).await {
            Ok(()) => {
                for request in group.drain(..) {
                    answer(request, Ok(()));
                }
            }
            Err(error) => {
                tracing::debug!(%error, size = group.len(), "group commit failed; committing one by one");
                for request in group.drain(..) {
                    let result =
                        commit_group(&mut conn, std::iter::once(request.ops.as_slice())).await;
                    answer(request, result);
                }
            }
        }
    }
    if let Err(error) = conn.close().await {
        tracing::warn!(%error, "closing the SQLite writer connection");
    }
}

fn answer(request: WriteRequest, result: Result<(), StoreError>) {
    // The caller may have given up waiting (its task was cancelled); the commit stands.
    if request.reply.send(result).is_err() {
        tracing::trace!("a committer left before its answer");
    }
}

async fn commit_group<'a>(
    conn: &mut SqliteConnection,
    groups: impl Iterator<Item = &'a [Op]>,
) -> Result<(), StoreError> {
    let mut tx = conn.begin().await?;
    for ops in groups {
        for op in ops {
            apply(&mut tx, op).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

async fn apply(conn: &mut SqliteConnection, op: &Op) -> Result<(), StoreError> {
    match op {
        Op::CreateSession { header, request_id } => {
            sqlx::query(
                "INSERT INTO sessions (id, create_request_id, created_at, last_activity_at, \
                 settled_at, title, head_sequence, leaf_entry_id, lineage_epoch, \
                 model_preference, inbox_state, inbox_rank) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            .bind(inbox_state_str(header.inbox_state))
            .bind(i64::from(inbox_rank(header.inbox_state)))
            .execute(&mut *conn)
            .await?;
        }
        Op::PutHeader(header) => {
            sqlx::query(
                "UPDATE sessions SET last_activity_at = ?, settled_at = ?, title = ?, \
                 head_sequence = ?, leaf_entry_id = ?, lineage_epoch = ?, model_preference = ?, \
                 inbox_state = ?, inbox_rank = ? WHERE id = ?",
            )
            .bind(int(header.last_activity_at))
            .bind(header.settled_at.map(int))
            .bind(&header.title)
            .bind(int(header.head_sequence))
            .bind(header.leaf.as_ref().map(|l| l.as_str()))
            .bind(int(header.epoch))
            .bind(preference_json(header)?)
            .bind(inbox_state_str(header.inbox_state))
            .bind(i64::from(inbox_rank(header.inbox_state)))
            .bind(header.id.as_str())
            .execute(&mut *conn)
            .await?;
        }
        Op::DeleteSession { session_id } => {
            sqlx::query("DELETE FROM sessions WHERE id = ?")
                .bind(session_id.as_str())
                .execute(&mut *conn)
                .await?;
        }
        Op::PutExtensionRow {
            extension_id,
            scope,
            scope_id,
            collection,
            key,
            value,
        } => {
            sqlx::query(
                "INSERT INTO extension_rows (extension_id, scope, scope_id, collection, key, value) \
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (extension_id, scope, scope_id, collection, key) \
                 DO UPDATE SET value = excluded.value",
            )
            .bind(extension_id.as_str())
            .bind(*scope)
            .bind(scope_id)
            .bind(collection)
            .bind(key)
            .bind(value.to_string())
            .execute(&mut *conn)
            .await?;
        }
        Op::DeleteExtensionRow {
            extension_id,
            scope,
            scope_id,
            collection,
            key,
        } => {
            sqlx::query(
                "DELETE FROM extension_rows WHERE extension_id = ? AND scope = ? AND scope_id = ? \
                 AND collection = ? AND key = ?",
            )
            .bind(extension_id.as_str())
            .bind(*scope)
            .bind(scope_id)
            .bind(collection)
            .bind(key)
            .execute(&mut *conn)
            .await?;
        }
        Op::ReplaceExtensionRows { extension_id, rows } => {
            sqlx::query("DELETE FROM extension_rows WHERE extension_id = ?")
                .bind(extension_id.as_str())
                .execute(&mut *conn)
                .await?;
            for row in rows {
                sqlx::query(
                    "INSERT INTO extension_rows (extension_id, scope, scope_id, collection, key, value) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(extension_id.as_str())
                .bind(&row.scope)
                .bind(&row.scope_id)
                .bind(&row.collection)
                .bind(&row.key)
                .bind(row.value.to_string())
                .execute(&mut *conn)
                .await?;
            }
        }
        Op::PutExtensionStatus(status) => {
            sqlx::query(
                "INSERT INTO extension_status (extension_id, revision, schema_version, stopped_reason) \
                 VALUES (?, ?, ?, ?) ON CONFLICT (extension_id) DO UPDATE SET revision = excluded.revision, \
                 schema_version = excluded.schema_version, stopped_reason = excluded.stopped_reason",
            )
            .bind(status.extension_id.as_str())
            .bind(&status.revision)
            .bind(i64::from(status.schema_version))
            .bind(status.stopped_reason.as_deref())
            .execute(&mut *conn)
            .await?;
        }
        Op::PutExtensionRequest {
            extension_id,
            scope_id,
            request_id,
            payload,
            response,
        } => {
            sqlx::query(
                "INSERT INTO extension_requests (extension_id, scope_id, request_id, payload, response) \
                 VALUES (?, ?, ?, ?, ?)",
            )
            .bind(extension_id.as_str())
            .bind(scope_id)
            .bind(request_id)
            .bind(payload)
            .bind(response.to_string())
            .execute(&mut *conn)
            .await?;
        }
        Op::PutAttention {
            session_id,
            extension_id,
            kind,
            inbox,
            text,
        } => {
            sqlx::query(
                "INSERT INTO attention (session_id, extension_id, kind, inbox, text) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (session_id, extension_id, kind) DO UPDATE SET inbox = excluded.inbox, \
                 text = excluded.text",
            )
            .bind(session_id.as_str())
            .bind(extension_id.as_str())
            .bind(kind)
            .bind(*inbox)
            .bind(text)
            .execute(&mut *conn)
            .await?;
        }
        Op::DeleteAttention {
            session_id,
            extension_id,
            kind,
        } => {
            sqlx::query(
                "DELETE FROM attention WHERE session_id = ? AND extension_id = ? AND kind = ?",
            )
            .bind(session_id.as_str())
            .bind(extension_id.as_str())
            .bind(kind)
            .execute(&mut *conn)
            .await?;
        }
        Op::PutTimer(timer) => {
            sqlx::query(
                "INSERT INTO timers (id, extension_id, session_id, due_at, cadence, payload) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(&timer.id)
            .bind(timer.extension_id.as_str())
            .bind(timer.session_id.as_ref().map(|s| s.as_str()))
            .bind(int(timer.due_at))
            .bind(timer.cadence.as_deref())
            .bind(timer.payload.to_string())
            .execute(&mut *conn)
            .await?;
        }
        Op::DeleteTimer { extension_id, id } => {
            sqlx::query("DELETE FROM timers WHERE id = ? AND extension_id = ?")
                .bind(id)
                .bind(extension_id.as_str())
                .execute(&mut *conn)
                .await?;
        }
        Op::ClaimTimer { id, due_at, next } => {
            let claimed = match next {
                Some(next) => {
                    sqlx::query("UPDATE timers SET due_at = ? WHERE id = ? AND due_at = ?")
                        .bind(int(*next))
                        .bind(id)
                        .bind(int(*due_at))
                        .execute(&mut *conn)
                        .await?
                }
                None => {
                    sqlx::query("DELETE FROM timers WHERE id = ? AND due_at = ?")
                        .bind(id)
                        .bind(int(*due_at))
                        .execute(&mut *conn)
                        .await?
                }
            };
            if claimed.rows_affected() != 1 {
                return Err(StoreError::Conflict(format!(
                    "timer {id} was already claimed"
                )));
            }
        }
        Op::InsertCommand {
            session_id,
            command,
        } => {
            sqlx::query(
                "INSERT INTO commands (session_id, id, request_id, kind, payload, \
                 accepted_sequence, state, run_id, recoveries, origin) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(command.id.as_str())
            .bind(command.request_id.as_ref().map(|r| r.as_str()))
            .bind(command.kind.as_str())
            .bind(&command.payload)
            .bind(int(command.accepted_sequence))
            .bind(command.state.as_str())
            .bind(command.run_id.as_ref().map(|r| r.as_str()))
            .bind(i64::from(command.recoveries))
            .bind(command.origin.as_ref().map(|o| o.to_string()))
            .execute(&mut *conn)
            .await?;
        }
        Op::SetCommandState {
            session_id,
            command_id,
            state,
            run_id,
        } => {
            sqlx::query(
                "UPDATE commands SET state = ?, run_id = COALESCE(?, run_id) \
                 WHERE session_id = ? AND id = ?",
            )
            .bind(state.as_str())
            .bind(run_id.as_ref().map(|r| r.as_str()))
            .bind(session_id.as_str())
            .bind(command_id.as_str())
            .execute(&mut *conn)
            .await?;
        }
        Op::CountRecovery {
            session_id,
            command_id,
        } => {
            sqlx::query(
                "UPDATE commands SET recoveries = recoveries + 1 WHERE session_id = ? AND id = ?",
            )
            .bind(session_id.as_str())
            .bind(command_id.as_str())
            .execute(&mut *conn)
            .await?;
        }
        Op::InsertEntry { session_id, entry } => {
            let message = serde_json::to_string(&entry.message)
                .map_err(|error| StoreError::Corrupt(format!("message: {error}")))?;
            sqlx::query(
                "INSERT INTO entries (session_id, id, parent_id, sequence, command_id, message) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(entry.id.as_str())
            .bind(entry.parent.as_ref().map(|p| p.as_str()))
            .bind(int(entry.sequence))
            .bind(entry.command_id.as_ref().map(|c| c.as_str()))
            .bind(message)
            .execute(&mut *conn)
            .await?;
        }
        Op::InsertCompaction {
            session_id,
            compaction,
        } => {
            sqlx::query(
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
            .execute(&mut *conn)
            .await?;
        }
        Op::InsertSandboxFailure {
            session_id,
            failure,
        } => {
            sqlx::query(
                "INSERT INTO sandbox_failures (session_id, id, sequence, at, capability, message) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(failure.id.as_str())
            .bind(int(failure.sequence))
            .bind(int(failure.at))
            .bind(&failure.capability)
            .bind(&failure.message)
            .execute(&mut *conn)
            .await?;
        }
        Op::InsertTerminal {
            session_id,
            terminal,
        } => {
            sqlx::query(
                "INSERT INTO terminals (session_id, command_id, outcome, sequence, diagnostic, \
                 anchor_entry) VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id.as_str())
            .bind(terminal.command_id.as_str())
            .bind(outcome_str(terminal.outcome))
            .bind(int(terminal.sequence))
            .bind(terminal.diagnostic.as_deref())
            .bind(terminal.anchor.as_ref().map(|a| a.as_str()))
            .execute(&mut *conn)
            .await?;
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

pub(crate) fn outcome_str(outcome: TerminalOutcome) -> &'static str {
    match outcome {
        TerminalOutcome::Completed => "completed",
        TerminalOutcome::Cancelled => "cancelled",
        TerminalOutcome::Failed => "failed",
        TerminalOutcome::Interrupted => "interrupted",
    }
}
