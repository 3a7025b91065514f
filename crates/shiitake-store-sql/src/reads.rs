//! Every read of core's `Store`, written once over any sqlx database: the statements
//! of `statements.rs` rendered for the store's dialect, the tenant bound first
//! where the dialect keys rows by it, and the rows decoded by `rows.rs`.

use shiitake_core::store::{
    AttentionRow, ExtensionReceipt, ExtensionStatusRow, ListPosition, LoadedSession, RowScope,
    StoreError, StoredCommand, StoredCompaction, StoredEntry, StoredExtensionRow,
    StoredSandboxFailure, StoredTerminal, StoredWord, SummaryRow, TimerRow,
};
use shiitake_protocol::{EntryId, ExtensionId, RequestId, SessionId};
use sqlx::query::{QueryAs, QueryScalar};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, FromRow, IntoArguments, Pool, Type};

use crate::dialect::{Dialect, Statement};
use crate::error::db;
use crate::rows::{
    AttentionRowRow, CommandRow, CompactionRow, EntryRow, ExtensionRowRow, SandboxFailureRow,
    SessionRow, StatusRow, TerminalRow, TimerRowRow, int, uint,
};
use crate::statements::*;

/// The read side of a store: a sqlx pool, the store's dialect and, where the dialect
/// keys rows by it, the tenant.
pub struct Reads<DB: Database> {
    pool: Pool<DB>,
    dialect: Dialect,
    tenant: Option<String>,
}

impl<DB: Database> std::fmt::Debug for Reads<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reads")
            .field("dialect", &self.dialect)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl<DB: Database> Reads<DB> {
    /// Reads through `pool` with `dialect`'s statements. `tenant` is the Agent every
    /// row is keyed by where the dialect keys rows by one (PostgreSQL); it is ignored
    /// where it does not (SQLite: one Agent per file).
    pub fn new(pool: Pool<DB>, dialect: Dialect, tenant: impl Into<String>) -> Self {
        let tenant = dialect.keys_by_tenant().then(|| tenant.into());
        Self {
            pool,
            dialect,
            tenant,
        }
    }

    /// The pool, for a store's own statements (PostgreSQL's leases) and for closing.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }
}

/// What a sqlx database must offer for the reads: run statements on a pool and in a
/// transaction, bind text and integers, and decode the columns of the stored rows.
/// SQLite and PostgreSQL both do; the bounds are written once, here.
impl<DB> Reads<DB>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB>,
    for<'r> bool: Decode<'r, DB> + Type<DB>,
    for<'r> Vec<u8>: Decode<'r, DB> + Type<DB>,
    for<'r> &'r str: ColumnIndex<DB::Row>,
    usize: ColumnIndex<DB::Row>,
{
    /// `statement` as a query of rows `R`, the tenant bound first where rows are keyed by it.
    fn rows<R>(&self, statement: &'static Statement) -> QueryAs<'_, DB, R, DB::Arguments<'_>>
    where
        R: for<'r> FromRow<'r, DB::Row>,
    {
        let query = sqlx::query_as(statement.text(self.dialect));
        match &self.tenant {
            Some(tenant) => query.bind(tenant.as_str()),
            None => query,
        }
    }

    /// `statement` as a query of one text column (an id).
    fn ids(&self, statement: &'static Statement) -> QueryScalar<'_, DB, String, DB::Arguments<'_>> {
        let query = sqlx::query_scalar(statement.text(self.dialect));
        match &self.tenant {
            Some(tenant) => query.bind(tenant.as_str()),
            None => query,
        }
    }

    /// The Session created with `request_id`, if any.
    pub async fn session_by_request(
        &self,
        request_id: &RequestId,
    ) -> Result<Option<SessionId>, StoreError> {
        let id = self
            .ids(&SESSION_BY_REQUEST)
            .bind(request_id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        id.map(session_id).transpose()
    }

    /// Whether the Session is stored.
    pub async fn session_exists(&self, id: &SessionId) -> Result<bool, StoreError> {
        let found = self
            .ids(&SESSION_EXISTS)
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        Ok(found.is_some())
    }

    /// A Session's header and its open commands (core's `Store::load_session`).
    pub async fn load_session(&self, id: &SessionId) -> Result<Option<LoadedSession>, StoreError> {
        // Most Sessions have no open work when their owner starts: the header alone is
        // one statement, so one snapshot, and needs no transaction.
        let row: Option<SessionRow> = self
            .rows(&SESSION_HEADER)
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        let Some(row) = row else { return Ok(None) };
        let header = row.decode()?;
        if header.open_from.is_none() {
            return Ok(Some(LoadedSession {
                header,
                open_commands: Vec::new(),
            }));
        }
        // Open work: the header again, with its open commands, in one snapshot.
        let mut tx = self.pool.begin().await.map_err(db)?;
        if let Some(snapshot) = self.dialect.snapshot() {
            sqlx::query(snapshot).execute(&mut *tx).await.map_err(db)?;
        }
        let row: Option<SessionRow> = self
            .rows(&SESSION_HEADER)
            .bind(id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        let Some(row) = row else { return Ok(None) };
        let header = row.decode()?;
        let commands: Vec<CommandRow> = match &header.open_from {
            None => Vec::new(),
            Some(open_from) => self
                .rows(&OPEN_COMMANDS)
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

    /// The command accepted with `request_id` in a Session, if any.
    pub async fn command_by_request(
        &self,
        session_id: &SessionId,
        request_id: &RequestId,
    ) -> Result<Option<StoredCommand>, StoreError> {
        let row: Option<CommandRow> = self
            .rows(&COMMAND_BY_REQUEST)
            .bind(session_id.as_str())
            .bind(request_id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.map(CommandRow::decode).transpose()
    }

    /// An entry by id.
    pub async fn entry(
        &self,
        session_id: &SessionId,
        entry_id: &EntryId,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let row: Option<EntryRow> = self
            .rows(&ENTRY)
            .bind(session_id.as_str())
            .bind(entry_id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.map(EntryRow::decode).transpose()
    }

    /// The entry whose commit took `sequence`, if it is an entry.
    pub async fn entry_at(
        &self,
        session_id: &SessionId,
        sequence: u64,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let row: Option<EntryRow> = self
            .rows(&ENTRY_AT)
            .bind(session_id.as_str())
            .bind(int(sequence))
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.map(EntryRow::decode).transpose()
    }

    /// From `from` towards the root: at most `limit` entries, newest first.
    pub async fn lineage(
        &self,
        session_id: &SessionId,
        from: &EntryId,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        let query = self
            .rows(&LINEAGE)
            .bind(session_id.as_str())
            .bind(from.as_str())
            .bind(int(limit as u64));
        decode_all(query.fetch_all(&self.pool).await, EntryRow::decode)
    }

    /// Entries committed strictly after `sequence`, oldest first, at most `limit`.
    pub async fn entries_after(
        &self,
        session_id: &SessionId,
        sequence: u64,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        let query = self
            .rows(&ENTRIES_AFTER)
            .bind(session_id.as_str())
            .bind(int(sequence))
            .bind(int(limit as u64));
        decode_all(query.fetch_all(&self.pool).await, EntryRow::decode)
    }

    /// Rows `R` of one Session with `after < sequence <= up_to`, in order, at most `limit`.
    async fn sequence_range<R>(
        &self,
        statement: &'static Statement,
        session_id: &SessionId,
        (after, up_to): (u64, u64),
        limit: usize,
    ) -> Result<Vec<R>, sqlx::Error>
    where
        R: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
    {
        self.rows(statement)
            .bind(session_id.as_str())
            .bind(int(after))
            .bind(int(up_to))
            .bind(int(limit as u64))
            .fetch_all(&self.pool)
            .await
    }

    /// Terminals with a sequence in `(after, up_to]`, oldest first, at most `limit`.
    pub async fn terminals_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredTerminal>, StoreError> {
        let range = (after, up_to);
        let rows = self
            .sequence_range(&TERMINALS_BETWEEN, session_id, range, limit)
            .await;
        decode_all(rows, TerminalRow::decode)
    }

    /// Sandbox failures with a sequence in `(after, up_to]`, oldest first, at most `limit`.
    pub async fn sandbox_failures_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredSandboxFailure>, StoreError> {
        let range = (after, up_to);
        let rows = self
            .sequence_range(&SANDBOX_FAILURES_BETWEEN, session_id, range, limit)
            .await;
        decode_all(rows, SandboxFailureRow::decode)
    }

    /// Every compaction of a Session, oldest first.
    pub async fn compactions(
        &self,
        session_id: &SessionId,
    ) -> Result<Vec<StoredCompaction>, StoreError> {
        let query = self.rows(&COMPACTIONS).bind(session_id.as_str());
        decode_all(query.fetch_all(&self.pool).await, CompactionRow::decode)
    }

    /// One inbox page after `after`; a row that does not decode is listed by its id.
    pub async fn list_sessions(
        &self,
        after: Option<&ListPosition>,
        limit: usize,
    ) -> Result<Vec<SummaryRow>, StoreError> {
        let rows: Vec<SessionRow> = self
            .rows(&LIST_SESSIONS)
            .bind(after.map(|a| i64::from(a.rank)))
            .bind(after.map(|a| int(a.last_activity_at)))
            .bind(after.map(|a| a.session_id.as_str()))
            .bind(int(limit as u64))
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        Ok(rows.into_iter().filter_map(summary).collect())
    }

    /// Sessions whose inbox rank says they may have open work.
    pub async fn sessions_with_open_work(&self) -> Result<Vec<SessionId>, StoreError> {
        let ids = self
            .ids(&SESSIONS_WITH_OPEN_WORK)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        ids.into_iter().map(session_id).collect()
    }

    /// Every row of one extension, of every extension in one scope, or both, or all.
    pub async fn extension_rows(
        &self,
        extension_id: Option<&ExtensionId>,
        scope: Option<&RowScope>,
    ) -> Result<Vec<StoredExtensionRow>, StoreError> {
        let query = match (extension_id, scope) {
            (Some(extension_id), Some(scope)) => self
                .rows(&EXTENSION_ROWS_OF_IN)
                .bind(extension_id.as_str())
                .bind(scope.scope_id())
                .bind(scope.kind().word()),
            (Some(extension_id), None) => self.rows(&EXTENSION_ROWS_OF).bind(extension_id.as_str()),
            (None, Some(scope)) => self
                .rows(&EXTENSION_ROWS_IN)
                .bind(scope.scope_id())
                .bind(scope.kind().word()),
            (None, None) => self.rows(&EXTENSION_ROWS),
        };
        decode_all(query.fetch_all(&self.pool).await, ExtensionRowRow::decode)
    }

    /// Every extension's stored status.
    pub async fn extension_statuses(&self) -> Result<Vec<ExtensionStatusRow>, StoreError> {
        let query = self.rows(&EXTENSION_STATUSES);
        decode_all(query.fetch_all(&self.pool).await, StatusRow::decode)
    }

    /// The stored answer to a human command of one scope.
    pub async fn extension_request(
        &self,
        extension_id: &ExtensionId,
        scope: &RowScope,
        request_id: &str,
    ) -> Result<Option<ExtensionReceipt>, StoreError> {
        let row: Option<(String, String)> = self
            .rows(&EXTENSION_REQUEST)
            .bind(extension_id.as_str())
            .bind(scope.scope_id())
            .bind(request_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.map(|(payload, response)| {
            serde_json::from_str(&response)
                .map(|response| ExtensionReceipt { payload, response })
                .map_err(|error| StoreError::Corrupt(format!("extension response: {error}")))
        })
        .transpose()
    }

    /// Attention raised on a Session.
    pub async fn attention(&self, session_id: &SessionId) -> Result<Vec<AttentionRow>, StoreError> {
        let query = self.rows(&ATTENTION).bind(session_id.as_str());
        decode_all(query.fetch_all(&self.pool).await, AttentionRowRow::decode)
    }

    /// The timer due soonest, if any.
    pub async fn next_timer(&self) -> Result<Option<TimerRow>, StoreError> {
        let row: Option<TimerRowRow> = self
            .rows(&NEXT_TIMER)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.map(TimerRowRow::decode).transpose()
    }

    /// Timers due at or before `now`, soonest first, at most `limit`.
    pub async fn due_timers(&self, now: u64, limit: usize) -> Result<Vec<TimerRow>, StoreError> {
        let query = self
            .rows(&DUE_TIMERS)
            .bind(int(now))
            .bind(int(limit as u64));
        decode_all(query.fetch_all(&self.pool).await, TimerRowRow::decode)
    }
}

/// Decodes every fetched row; a failed fetch or an undecodable row fails the read.
fn decode_all<R, T>(
    rows: Result<Vec<R>, sqlx::Error>,
    decode: impl FnMut(R) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    rows.map_err(db)?.into_iter().map(decode).collect()
}

fn session_id(id: String) -> Result<SessionId, StoreError> {
    SessionId::new(id).map_err(|error| StoreError::Corrupt(format!("session id: {error}")))
}

/// One inbox row: its place in the order, and its header or, when the header does not
/// decode, its id (listed `unavailable`). A row whose id is not an id is skipped.
fn summary(row: SessionRow) -> Option<SummaryRow> {
    let Ok(session_id) = SessionId::new(row.id.clone()) else {
        tracing::warn!(id = %row.id, "skipping a Session row whose id is not an id");
        return None;
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
    Some(SummaryRow { position, header })
}
