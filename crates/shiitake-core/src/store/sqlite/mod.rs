//! The embedded default store: one SQLite file in WAL mode.
//!
//! Reads go through a small sqlx pool; every write goes through one writer
//! thread that commits in groups (group commit).

mod statements;
mod writer;

use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use shiitake_protocol::{EntryId, RequestId, SessionId};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use std::thread::JoinHandle;
use tokio::sync::{mpsc, oneshot};

use self::writer::WriteRequest;
use crate::store::columns::{
    AttentionRowRow, CommandRow, CompactionRow, EntryRow, ExtensionRowRow, SandboxFailureRow,
    SessionRow, StatusRow, TerminalRow, TimerRowRow, int, uint,
};
use shiitake_protocol::ExtensionId;

use super::{
    AttentionRow, ExtensionReceipt, ExtensionStatusRow, ListPosition, LoadedSession, Op, RowScope,
    Store, StoreError, StoredCommand, StoredCompaction, StoredEntry, StoredExtensionRow,
    StoredSandboxFailure, StoredTerminal, StoredWord, SummaryRow, TimerRow,
};

/// sqlx reports a refused write as a database error; core sees only whether a unique
/// index refused it.
impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        let unique = error
            .as_database_error()
            .is_some_and(|error| error.is_unique_violation());
        StoreError::Database {
            message: error.to_string(),
            unique,
        }
    }
}

/// How durable a commit is on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Every commit is fsynced before it is acknowledged (`synchronous = FULL`): survives power loss.
    #[default]
    Full,
    /// Commits survive a process crash but may be lost on power loss (`synchronous = NORMAL`).
    Normal,
}

impl Durability {
    /// The `synchronous` pragma that gives this durability.
    fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }
}

/// The SQLite store.
pub struct SqliteStore {
    reads: SqlitePool,
    /// Transactions the writer committed (each one fsync under [`Durability::Full`]).
    commits: Arc<AtomicU64>,
    writer: Mutex<Option<mpsc::Sender<WriteRequest>>>,
    writer_task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

/// Queued commits the writer accepts before callers wait for room.
const WRITE_QUEUE: usize = 4096;

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies migrations.
    pub async fn open(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Normal => SqliteSynchronous::Normal,
            })
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .disable_statement_logging();
        let mut conn = SqliteConnection::connect_with(&options).await?;
        sqlx::migrate!("./migrations/sqlite")
            .run_direct(&mut conn)
            .await
            .map_err(|error| StoreError::Migration(error.to_string()))?;
        // The writer connects before the migration connection closes, so the WAL and
        // its shared-memory file stay in place for the read-only pool.
        let owned_path = path.to_owned();
        let writer_conn =
            tokio::task::spawn_blocking(move || writer::open(&owned_path, durability))
                .await
                .map_err(|error| StoreError::database(format!("opening the writer: {error}")))??;
        conn.close().await?;
        // A connection to a local file does not go stale: pinging it before each read
        // (sqlx's default) would only add a round trip to its worker thread.
        let reads = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(options.read_only(true))
            .await?;
        let (sender, receiver) = mpsc::channel(WRITE_QUEUE);
        let commits = Arc::new(AtomicU64::new(0));
        let counted = commits.clone();
        let task = std::thread::Builder::new()
            .name("shiitake-sqlite-writer".to_owned())
            .spawn(move || writer::run(writer_conn, receiver, &counted))
            .map_err(|error| {
                StoreError::database(format!("starting the writer thread: {error}"))
            })?;
        Ok(Self {
            reads,
            commits,
            writer: Mutex::new(Some(sender)),
            writer_task: Mutex::new(Some(task)),
        })
    }

    /// Transactions committed since this store was opened: a group of commits counts
    /// once, as it costs one fsync. Benchmarks divide a raw commit rate by it.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Rows of one Session with `after < sequence <= up_to`, in order, at most `limit`;
    /// `sql` selects from a table and ends with [`IN_SEQUENCE_RANGE`].
    async fn sequence_range<R>(
        &self,
        sql: &str,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<R>, StoreError>
    where
        R: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
    {
        Ok(sqlx::query_as(sql)
            .bind(session_id.as_str())
            .bind(int(after))
            .bind(int(up_to))
            .bind(int(limit as u64))
            .fetch_all(&self.reads)
            .await?)
    }

    fn sender(&self) -> Option<mpsc::Sender<WriteRequest>> {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

const SESSION_COLUMNS: &str = "id, created_at, last_activity_at, settled_at, title, \
     head_sequence, leaf_entry_id, lineage_epoch, model_preference, inbox_state, inbox_rank, \
     open_from";
const COMMAND_COLUMNS: &str =
    "id, request_id, origin, kind, payload, accepted_sequence, state, run_id, recoveries";
const TERMINAL_COLUMNS: &str = "command_id, outcome, sequence, diagnostic, anchor_entry";
/// The tail of a query for [`SqliteStore::sequence_range`].
const IN_SEQUENCE_RANGE: &str =
    "WHERE session_id = ? AND sequence > ? AND sequence <= ? ORDER BY sequence LIMIT ?";
/// An entry as the `entry_rows` view gives it: with its parent's id, its message packed.
const ENTRY_COLUMNS: &str = "id, parent_id, sequence, command_id, message";

#[async_trait]
impl Store for SqliteStore {
    async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let sender = self.sender().ok_or(StoreError::Closed)?;
        // Encoding (JSON, packed messages) happens here, on the committing task, so
        // the one writer thread spends its time only on SQLite.
        let batch = statements::batch(&ops)?;
        let (reply, answer) = oneshot::channel();
        sender
            .send(WriteRequest { batch, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn session_by_request(
        &self,
        request_id: &RequestId,
    ) -> Result<Option<SessionId>, StoreError> {
        let id: Option<String> =
            sqlx::query_scalar("SELECT id FROM sessions WHERE create_request_id = ?")
                .bind(request_id.as_str())
                .fetch_optional(&self.reads)
                .await?;
        id.map(|id| {
            SessionId::new(id).map_err(|error| StoreError::Corrupt(format!("session id: {error}")))
        })
        .transpose()
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<LoadedSession>, StoreError> {
        let header_sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?");
        // Most Sessions have no open work when their owner starts: the header alone is
        // one statement, so one snapshot, and needs no transaction.
        let row: Option<SessionRow> = sqlx::query_as(&header_sql)
            .bind(id.as_str())
            .fetch_optional(&self.reads)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let header = row.decode()?;
        if header.open_from.is_none() {
            return Ok(Some(LoadedSession {
                header,
                open_commands: Vec::new(),
            }));
        }
        // Open work: the header again, with its open commands, in one read transaction.
        let mut tx = self.reads.begin().await?;
        let row: Option<SessionRow> = sqlx::query_as(&header_sql)
            .bind(id.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let header = row.decode()?;
        // Every open command's id is at or after the watermark (the lowest open id), so
        // the scan skips the settled history before it; a Session with none reads nothing.
        let commands: Vec<CommandRow> = match &header.open_from {
            None => Vec::new(),
            Some(open_from) => {
                sqlx::query_as(&format!(
                    "SELECT {COMMAND_COLUMNS} FROM commands WHERE session_id = ? AND id >= ? \
                     AND state <> 'settled' ORDER BY accepted_sequence"
                ))
                .bind(id.as_str())
                .bind(open_from.as_str())
                .fetch_all(&mut *tx)
                .await?
            }
        };
        tx.commit().await?;
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
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM sessions WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.reads)
            .await?;
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
        let row: Option<CommandRow> = sqlx::query_as(&format!(
            "SELECT {COMMAND_COLUMNS} FROM commands WHERE session_id = ? AND request_id = ?"
        ))
        .bind(session_id.as_str())
        .bind(request_id.as_str())
        .fetch_optional(&self.reads)
        .await?;
        row.map(CommandRow::decode).transpose()
    }

    async fn entry(
        &self,
        session_id: &SessionId,
        entry_id: &EntryId,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let row: Option<EntryRow> = sqlx::query_as(&format!(
            "SELECT {ENTRY_COLUMNS} FROM entry_rows WHERE session_id = ? AND id = ?"
        ))
        .bind(session_id.as_str())
        .bind(entry_id.as_str())
        .fetch_optional(&self.reads)
        .await?;
        row.map(EntryRow::decode).transpose()
    }

    async fn entry_at(
        &self,
        session_id: &SessionId,
        sequence: u64,
    ) -> Result<Option<StoredEntry>, StoreError> {
        let row: Option<EntryRow> = sqlx::query_as(&format!(
            "SELECT {ENTRY_COLUMNS} FROM entry_rows WHERE session_id = ? AND sequence = ?"
        ))
        .bind(session_id.as_str())
        .bind(int(sequence))
        .fetch_optional(&self.reads)
        .await?;
        row.map(EntryRow::decode).transpose()
    }

    async fn lineage(
        &self,
        session_id: &SessionId,
        from: &EntryId,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        // The walk follows parent sequences through the primary key, then reads each
        // entry of the path once with its parent's id.
        let rows: Vec<EntryRow> = sqlx::query_as(
            "WITH RECURSIVE path (session_key, sequence, parent_sequence, depth) AS ( \
               SELECT session_key, sequence, parent_sequence, 1 FROM entries \
                 WHERE session_key = (SELECT key FROM sessions WHERE id = ?1) AND id = ?2 \
               UNION ALL \
               SELECT e.session_key, e.sequence, e.parent_sequence, p.depth + 1 \
                 FROM entries e JOIN path p \
                   ON e.session_key = p.session_key AND e.sequence = p.parent_sequence \
                 WHERE p.depth < ?3 \
             ) SELECT r.id, r.parent_id, r.sequence, r.command_id, r.message \
               FROM path JOIN entry_rows r \
                 ON r.session_key = path.session_key AND r.sequence = path.sequence \
               ORDER BY path.depth",
        )
        .bind(session_id.as_str())
        .bind(from.as_str())
        .bind(int(limit as u64))
        .fetch_all(&self.reads)
        .await?;
        rows.into_iter().map(EntryRow::decode).collect()
    }

    async fn entries_after(
        &self,
        session_id: &SessionId,
        sequence: u64,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        let rows: Vec<EntryRow> = sqlx::query_as(&format!(
            "SELECT {ENTRY_COLUMNS} FROM entry_rows \
             WHERE session_id = ? AND sequence > ? ORDER BY sequence LIMIT ?"
        ))
        .bind(session_id.as_str())
        .bind(int(sequence))
        .bind(int(limit as u64))
        .fetch_all(&self.reads)
        .await?;
        rows.into_iter().map(EntryRow::decode).collect()
    }

    async fn terminals_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredTerminal>, StoreError> {
        let sql = format!("SELECT {TERMINAL_COLUMNS} FROM terminals {IN_SEQUENCE_RANGE}");
        let rows: Vec<TerminalRow> = self
            .sequence_range(&sql, session_id, after, up_to, limit)
            .await?;
        rows.into_iter().map(TerminalRow::decode).collect()
    }

    async fn compactions(
        &self,
        session_id: &SessionId,
    ) -> Result<Vec<StoredCompaction>, StoreError> {
        let rows: Vec<CompactionRow> = sqlx::query_as(
            "SELECT id, commit_sequence, first_kept_entry, precedes_sequence, at, summary \
             FROM compactions WHERE session_id = ? ORDER BY commit_sequence",
        )
        .bind(session_id.as_str())
        .fetch_all(&self.reads)
        .await?;
        rows.into_iter().map(CompactionRow::decode).collect()
    }

    async fn sandbox_failures_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredSandboxFailure>, StoreError> {
        let sql = format!(
            "SELECT id, sequence, at, capability, message FROM sandbox_failures {IN_SEQUENCE_RANGE}"
        );
        let rows: Vec<SandboxFailureRow> = self
            .sequence_range(&sql, session_id, after, up_to, limit)
            .await?;
        rows.into_iter().map(SandboxFailureRow::decode).collect()
    }

    async fn list_sessions(
        &self,
        after: Option<&ListPosition>,
        limit: usize,
    ) -> Result<Vec<SummaryRow>, StoreError> {
        let query = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE ?1 IS NULL \
               OR inbox_rank > ?1 \
               OR (inbox_rank = ?1 AND last_activity_at < ?2) \
               OR (inbox_rank = ?1 AND last_activity_at = ?2 AND id > ?3) \
             ORDER BY inbox_rank, last_activity_at DESC, id LIMIT ?4"
        );
        let rows: Vec<SessionRow> = sqlx::query_as(&query)
            .bind(after.map(|a| i64::from(a.rank)))
            .bind(after.map(|a| int(a.last_activity_at)))
            .bind(after.map(|a| a.session_id.as_str()))
            .bind(int(limit as u64))
            .fetch_all(&self.reads)
            .await?;
        let mut page = Vec::with_capacity(rows.len());
        for row in rows {
            let raw_id = row.id.clone();
            let Ok(session_id) = SessionId::new(raw_id.clone()) else {
                tracing::warn!(id = %raw_id, "skipping a Session row whose id is not an id");
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
        let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM sessions WHERE inbox_rank <= 1")
            .fetch_all(&self.reads)
            .await?;
        ids.into_iter()
            .map(|id| {
                SessionId::new(id)
                    .map_err(|error| StoreError::Corrupt(format!("session id: {error}")))
            })
            .collect()
    }

    async fn extension_rows(
        &self,
        extension_id: Option<&ExtensionId>,
        scope: Option<&RowScope>,
    ) -> Result<Vec<StoredExtensionRow>, StoreError> {
        // One query per shape, so each uses its index (the primary key leads with the
        // extension, `extension_rows_by_scope` with the scope id).
        macro_rules! select {
            ($where:literal) => {
                concat!(
                    "SELECT extension_id, scope, scope_id, collection, key, value ",
                    "FROM extension_rows",
                    $where
                )
            };
        }
        let query = match (extension_id, scope) {
            (Some(extension_id), Some(scope)) => sqlx::query_as(select!(
                " WHERE extension_id = ? AND scope_id = ? AND scope = ?"
            ))
            .bind(extension_id.as_str())
            .bind(scope.scope_id())
            .bind(scope.kind().word()),
            (Some(extension_id), None) => {
                sqlx::query_as(select!(" WHERE extension_id = ?")).bind(extension_id.as_str())
            }
            (None, Some(scope)) => sqlx::query_as(select!(" WHERE scope_id = ? AND scope = ?"))
                .bind(scope.scope_id())
                .bind(scope.kind().word()),
            (None, None) => sqlx::query_as(select!("")),
        };
        let rows: Vec<ExtensionRowRow> = query.fetch_all(&self.reads).await?;
        rows.into_iter().map(ExtensionRowRow::decode).collect()
    }

    async fn extension_statuses(&self) -> Result<Vec<ExtensionStatusRow>, StoreError> {
        let rows: Vec<StatusRow> = sqlx::query_as(
            "SELECT extension_id, revision, schema_version, stopped_reason FROM extension_status",
        )
        .fetch_all(&self.reads)
        .await?;
        rows.into_iter().map(StatusRow::decode).collect()
    }

    async fn extension_request(
        &self,
        extension_id: &ExtensionId,
        scope: &RowScope,
        request_id: &str,
    ) -> Result<Option<ExtensionReceipt>, StoreError> {
        let row: Option<(String, String)> = sqlx::query_as(
            "SELECT payload, response FROM extension_requests \
             WHERE extension_id = ? AND scope_id = ? AND request_id = ?",
        )
        .bind(extension_id.as_str())
        .bind(scope.scope_id())
        .bind(request_id)
        .fetch_optional(&self.reads)
        .await?;
        row.map(|(payload, response)| {
            serde_json::from_str(&response)
                .map(|response| ExtensionReceipt { payload, response })
                .map_err(|error| StoreError::Corrupt(format!("extension response: {error}")))
        })
        .transpose()
    }

    async fn attention(&self, session_id: &SessionId) -> Result<Vec<AttentionRow>, StoreError> {
        let rows: Vec<AttentionRowRow> = sqlx::query_as(
            "SELECT extension_id, kind, inbox, text FROM attention WHERE session_id = ?",
        )
        .bind(session_id.as_str())
        .fetch_all(&self.reads)
        .await?;
        rows.into_iter().map(AttentionRowRow::decode).collect()
    }

    async fn next_timer(&self) -> Result<Option<TimerRow>, StoreError> {
        let row: Option<TimerRowRow> = sqlx::query_as(
            "SELECT id, extension_id, session_id, due_at, cadence, payload, kind FROM timers \
             ORDER BY due_at LIMIT 1",
        )
        .fetch_optional(&self.reads)
        .await?;
        row.map(TimerRowRow::decode).transpose()
    }

    async fn due_timers(&self, now: u64, limit: usize) -> Result<Vec<TimerRow>, StoreError> {
        let rows: Vec<TimerRowRow> = sqlx::query_as(
            "SELECT id, extension_id, session_id, due_at, cadence, payload, kind FROM timers \
             WHERE due_at <= ? ORDER BY due_at LIMIT ?",
        )
        .bind(int(now))
        .bind(int(limit as u64))
        .fetch_all(&self.reads)
        .await?;
        rows.into_iter().map(TimerRowRow::decode).collect()
    }

    async fn close(&self) {
        let sender = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(sender);
        let task = self
            .writer_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            match tokio::task::spawn_blocking(move || task.join()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => tracing::warn!("the SQLite writer thread panicked"),
                Err(error) => tracing::warn!(%error, "waiting for the SQLite writer thread"),
            }
        }
        self.reads.close().await;
    }
}
