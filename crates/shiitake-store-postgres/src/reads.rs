//! Core's [`Store`] on PostgreSQL: reads through the pool, commits through the
//! writer. Every query is keyed by this store's Agent, so another tenant's rows
//! are never seen.

use std::sync::Arc;

use async_trait::async_trait;
use shiitake_core::store::columns::{
    AttentionRowRow, CommandRow, CompactionRow, EntryRow, ExtensionRowRow, SandboxFailureRow,
    SessionRow, StatusRow, TerminalRow, TimerRowRow, int, uint,
};
use shiitake_core::store::{
    AttentionRow, ExtensionReceipt, ExtensionStatusRow, ListPosition, LoadedSession, Op, Ownership,
    RowScope, Store, StoreError, StoredCommand, StoredCompaction, StoredEntry, StoredExtensionRow,
    StoredSandboxFailure, StoredTerminal, StoredWord, SummaryRow, TimerRow,
};
use shiitake_protocol::{EntryId, ExtensionId, RequestId, SessionId};
use sqlx::Row;

use crate::PostgresStore;
use crate::error::db;

const SESSION_COLUMNS: &str = "id, created_at, last_activity_at, settled_at, title, \
     head_sequence, leaf_entry_id, lineage_epoch, model_preference, inbox_state, inbox_rank, \
     open_from";

fn session_id(id: String) -> Result<SessionId, StoreError> {
    SessionId::new(id).map_err(|error| StoreError::Corrupt(format!("session id: {error}")))
}

impl PostgresStore {
    /// The rows `select` names of one Session of this Agent whose sequence lies in
    /// `(after, up_to]`, in sequence order, at most `limit` of them.
    async fn sequence_range<R>(
        &self,
        select: &str,
        session_id: &SessionId,
        (after, up_to): (u64, u64),
        limit: usize,
    ) -> Result<Vec<R>, StoreError>
    where
        R: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        let sql = format!(
            "{select} WHERE agent_id = $1 AND session_id = $2 \
             AND sequence > $3 AND sequence <= $4 ORDER BY sequence LIMIT $5"
        );
        sqlx::query_as(&sql)
            .bind(self.agent().as_str())
            .bind(session_id.as_str())
            .bind(int(after))
            .bind(int(up_to))
            .bind(int(limit as u64))
            .fetch_all(&self.shared.pool)
            .await
            .map_err(db)
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        self.shared.writer.commit(ops).await
    }

    async fn session_by_request(
        &self,
        request_id: &RequestId,
    ) -> Result<Option<SessionId>, StoreError> {
        let id: Option<String> = sqlx::query_scalar(
            "SELECT id FROM sessions WHERE agent_id = $1 AND create_request_id = $2",
        )
        .bind(self.agent().as_str())
        .bind(request_id.as_str())
        .fetch_optional(&self.shared.pool)
        .await
        .map_err(db)?;
        id.map(session_id).transpose()
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<LoadedSession>, StoreError> {
        let mut tx = self.shared.pool.begin().await.map_err(db)?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let row: Option<SessionRow> = sqlx::query_as(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE agent_id = $1 AND id = $2"
        ))
        .bind(self.agent().as_str())
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let header = row.decode()?;
        let commands: Vec<CommandRow> = match &header.open_from {
            None => Vec::new(),
            Some(open_from) => sqlx::query_as(
                "SELECT id, request_id, origin, kind, payload, accepted_sequence, state, run_id, \
                 recoveries FROM commands WHERE agent_id = $1 AND session_id = $2 AND id >= $3 \
                 AND state <> 'settled' ORDER BY accepted_sequence",
            )
            .bind(self.agent().as_str())
            .bind(id.as_str())
            .bind(open_from.as_str())
            .fetch_all(&mut *tx)
            .await
            .map_err(db)?,
        };
        tx.commit().await.map_err(db)?;
        let open_commands = commands
            .into_iter()
            .map(CommandRow::decode)
            .collect::<Result<_, _>>()?;
        Ok(Some(LoadedSession {
            header,
            open_commands,
        }))
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        let exists: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM sessions WHERE agent_id = $1 AND id = $2")
                .bind(self.agent().as_str())
                .bind(id.as_str())
                .fetch_optional(&self.shared.pool)
                .await
                .map_err(db)?;
        if exists.is_none() {
            return Ok(false);
        }
        self.commit(vec![Op::DeleteSession {
            session_id: id.clone(),
        }])
        .await?;
        Ok(true)
    }

    async fn command_by_request(
        &self,
        session_id: &SessionId,
        request_id: &RequestId,
    ) -> Result<Option<StoredCommand>, StoreError> {
        let row: Option<CommandRow> = sqlx::query_as(
            "SELECT id, request_id, origin, kind, payload, accepted_sequence, state, run_id, \
             recoveries FROM commands WHERE agent_id = $1 AND session_id = $2 AND request_id = $3",
        )
        .bind(self.agent().as_str())
        .bind(session_id.as_str())
        .bind(request_id.as_str())
        .fetch_optional(&self.shared.pool)
        .await
        .map_err(db)?;
        row.map(CommandRow::decode).transpose()
    }

    async fn entry(
        &self,
        session_id: &SessionId,
        entry_id: &EntryId,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let row: Option<EntryRow> = sqlx::query_as(
            "SELECT id, parent_id, sequence, command_id, message FROM entries \
             WHERE agent_id = $1 AND session_id = $2 AND id = $3",
        )
        .bind(self.agent().as_str())
        .bind(session_id.as_str())
        .bind(entry_id.as_str())
        .fetch_optional(&self.shared.pool)
        .await
        .map_err(db)?;
        row.map(EntryRow::decode).transpose()
    }

    async fn entry_at(
        &self,
        session_id: &SessionId,
        sequence: u64,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let row: Option<EntryRow> = sqlx::query_as(
            "SELECT id, parent_id, sequence, command_id, message FROM entries \
             WHERE agent_id = $1 AND session_id = $2 AND sequence = $3",
        )
        .bind(self.agent().as_str())
        .bind(session_id.as_str())
        .bind(int(sequence))
        .fetch_optional(&self.shared.pool)
        .await
        .map_err(db)?;
        row.map(EntryRow::decode).transpose()
    }

    async fn lineage(
        &self,
        session_id: &SessionId,
        from: &EntryId,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        let rows: Vec<EntryRow> = sqlx::query_as(
            "WITH RECURSIVE path (id, parent_id, sequence, command_id, message, depth) AS ( \
               SELECT id, parent_id, sequence, command_id, message, 1 FROM entries \
                 WHERE agent_id = $1 AND session_id = $2 AND id = $3 \
               UNION ALL \
               SELECT e.id, e.parent_id, e.sequence, e.command_id, e.message, p.depth + 1 \
                 FROM entries e JOIN path p \
                   ON e.agent_id = $1 AND e.session_id = $2 AND e.id = p.parent_id \
                 WHERE p.depth < $4 \
             ) SELECT id, parent_id, sequence, command_id, message FROM path ORDER BY depth",
        )
        .bind(self.agent().as_str())
        .bind(session_id.as_str())
        .bind(from.as_str())
        .bind(int(limit as u64))
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db)?;
        rows.into_iter().map(EntryRow::decode).collect()
    }

    async fn entries_after(
        &self,
        session_id: &SessionId,
        sequence: u64,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        let rows: Vec<EntryRow> = sqlx::query_as(
            "SELECT id, parent_id, sequence, command_id, message FROM entries \
             WHERE agent_id = $1 AND session_id = $2 AND sequence > $3 ORDER BY sequence LIMIT $4",
        )
        .bind(self.agent().as_str())
        .bind(session_id.as_str())
        .bind(int(sequence))
        .bind(int(limit as u64))
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db)?;
        rows.into_iter().map(EntryRow::decode).collect()
    }

    async fn terminals_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredTerminal>, StoreError> {
        let rows: Vec<TerminalRow> = self
            .sequence_range(
                "SELECT command_id, outcome, sequence, diagnostic, anchor_entry FROM terminals",
                session_id,
                (after, up_to),
                limit,
            )
            .await?;
        rows.into_iter().map(TerminalRow::decode).collect()
    }

    async fn compactions(
        &self,
        session_id: &SessionId,
    ) -> Result<Vec<StoredCompaction>, StoreError> {
        let rows: Vec<CompactionRow> = sqlx::query_as(
            "SELECT id, commit_sequence, first_kept_entry, precedes_sequence, at, summary \
             FROM compactions WHERE agent_id = $1 AND session_id = $2 ORDER BY commit_sequence",
        )
        .bind(self.agent().as_str())
        .bind(session_id.as_str())
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db)?;
        rows.into_iter().map(CompactionRow::decode).collect()
    }

    async fn sandbox_failures_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredSandboxFailure>, StoreError> {
        let rows: Vec<SandboxFailureRow> = self
            .sequence_range(
                "SELECT id, sequence, at, capability, message FROM sandbox_failures",
                session_id,
                (after, up_to),
                limit,
            )
            .await?;
        rows.into_iter().map(SandboxFailureRow::decode).collect()
    }

    async fn list_sessions(
        &self,
        after: Option<&ListPosition>,
        limit: usize,
    ) -> Result<Vec<SummaryRow>, StoreError> {
        let query = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE agent_id = $1 AND ($2::bigint IS NULL \
               OR inbox_rank > $2 \
               OR (inbox_rank = $2 AND last_activity_at < $3) \
               OR (inbox_rank = $2 AND last_activity_at = $3 AND id > $4)) \
             ORDER BY inbox_rank, last_activity_at DESC, id LIMIT $5"
        );
        let rows: Vec<SessionRow> = sqlx::query_as(&query)
            .bind(self.agent().as_str())
            .bind(after.map(|a| i64::from(a.rank)))
            .bind(after.map(|a| int(a.last_activity_at)))
            .bind(after.map(|a| a.session_id.as_str()))
            .bind(int(limit as u64))
            .fetch_all(&self.shared.pool)
            .await
            .map_err(db)?;
        let mut page = Vec::with_capacity(rows.len());
        for row in rows {
            let Ok(session_id) = SessionId::new(row.id.clone()) else {
                tracing::warn!(id = %row.id, "skipping a Session row whose id is not an id");
                continue;
            };
            let position = ListPosition {
                rank: u8::try_from(row.inbox_rank).unwrap_or(u8::MAX),
                last_activity_at: uint(row.last_activity_at, "last_activity_at").unwrap_or(0),
                session_id: session_id.clone(),
            };
            let header = row.decode().map_err(|error| {
                tracing::warn!(%error, session = %session_id, "unreadable Session row");
                session_id
            });
            page.push(SummaryRow { position, header });
        }
        Ok(page)
    }

    async fn sessions_with_open_work(&self) -> Result<Vec<SessionId>, StoreError> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM sessions WHERE agent_id = $1 AND inbox_rank <= 1")
                .bind(self.agent().as_str())
                .fetch_all(&self.shared.pool)
                .await
                .map_err(db)?;
        ids.into_iter().map(session_id).collect()
    }

    async fn extension_rows(
        &self,
        extension_id: Option<&ExtensionId>,
        scope: Option<&RowScope>,
    ) -> Result<Vec<StoredExtensionRow>, StoreError> {
        let rows: Vec<ExtensionRowRow> = sqlx::query_as(
            "SELECT extension_id, scope, scope_id, collection, key, value FROM extension_rows \
             WHERE agent_id = $1 AND ($2::text IS NULL OR extension_id = $2) \
               AND ($3::text IS NULL OR (scope = $3 AND scope_id = $4))",
        )
        .bind(self.agent().as_str())
        .bind(extension_id.map(|id| id.as_str()))
        .bind(scope.map(|scope| scope.kind().word()))
        .bind(scope.map(|scope| scope.scope_id()))
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db)?;
        rows.into_iter().map(ExtensionRowRow::decode).collect()
    }

    async fn extension_statuses(&self) -> Result<Vec<ExtensionStatusRow>, StoreError> {
        let rows: Vec<StatusRow> = sqlx::query_as(
            "SELECT extension_id, revision, schema_version, stopped_reason FROM extension_status \
             WHERE agent_id = $1",
        )
        .bind(self.agent().as_str())
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db)?;
        rows.into_iter().map(StatusRow::decode).collect()
    }

    async fn extension_request(
        &self,
        extension_id: &ExtensionId,
        scope: &RowScope,
        request_id: &str,
    ) -> Result<Option<ExtensionReceipt>, StoreError> {
        let row = sqlx::query(
            "SELECT payload, response FROM extension_requests \
             WHERE agent_id = $1 AND extension_id = $2 AND scope_id = $3 AND request_id = $4",
        )
        .bind(self.agent().as_str())
        .bind(extension_id.as_str())
        .bind(scope.scope_id())
        .bind(request_id)
        .fetch_optional(&self.shared.pool)
        .await
        .map_err(db)?;
        let Some(row) = row else { return Ok(None) };
        let payload: String = row.try_get("payload").map_err(db)?;
        let response: String = row.try_get("response").map_err(db)?;
        let response = serde_json::from_str(&response)
            .map_err(|error| StoreError::Corrupt(format!("extension response: {error}")))?;
        Ok(Some(ExtensionReceipt { payload, response }))
    }

    async fn attention(&self, session_id: &SessionId) -> Result<Vec<AttentionRow>, StoreError> {
        let rows: Vec<AttentionRowRow> = sqlx::query_as(
            "SELECT extension_id, kind, inbox, text FROM attention \
             WHERE agent_id = $1 AND session_id = $2",
        )
        .bind(self.agent().as_str())
        .bind(session_id.as_str())
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db)?;
        rows.into_iter().map(AttentionRowRow::decode).collect()
    }

    async fn next_timer(&self) -> Result<Option<TimerRow>, StoreError> {
        let row: Option<TimerRowRow> = sqlx::query_as(
            "SELECT id, extension_id, session_id, due_at, cadence, payload, kind FROM timers \
             WHERE agent_id = $1 ORDER BY due_at LIMIT 1",
        )
        .bind(self.agent().as_str())
        .fetch_optional(&self.shared.pool)
        .await
        .map_err(db)?;
        row.map(TimerRowRow::decode).transpose()
    }

    async fn due_timers(&self, now: u64, limit: usize) -> Result<Vec<TimerRow>, StoreError> {
        let rows: Vec<TimerRowRow> = sqlx::query_as(
            "SELECT id, extension_id, session_id, due_at, cadence, payload, kind FROM timers \
             WHERE agent_id = $1 AND due_at <= $2 ORDER BY due_at LIMIT $3",
        )
        .bind(self.agent().as_str())
        .bind(int(now))
        .bind(int(limit as u64))
        .fetch_all(&self.shared.pool)
        .await
        .map_err(db)?;
        rows.into_iter().map(TimerRowRow::decode).collect()
    }

    async fn close(&self) {
        self.shared.writer.close().await;
        self.shared.closing.cancel();
        self.shared.pool.close().await;
    }

    fn ownership(&self) -> Option<Arc<dyn Ownership>> {
        Some(Arc::new(self.clone()))
    }
}
