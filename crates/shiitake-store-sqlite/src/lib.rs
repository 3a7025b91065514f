//! The embedded store of a Shiitake Agent: one SQLite file in WAL mode.
//!
//! [`SqliteStore`] implements core's `Store`. What it owns is what is SQLite's alone:
//! opening the file (its pragmas, [`Durability`]), the migrations in
//! `migrations/sqlite/` (applied through sqlx when the store opens), a small sqlx pool
//! of read-only connections, and the one **writer thread** on a `rusqlite` connection
//! that commits every write of the Agent in groups (see `writer`).
//!
//! What it does not own: the SQL. Statements, the turning of ops into statements, the
//! reads and row decoding are written once for SQLite and PostgreSQL in
//! `shiitake-store-sql`, which also writes `Store` on top of this crate's small
//! backend. One process owns a SQLite file, so there are no leases (`Op::Fence` writes
//! nothing) and no `Ownership`.

mod writer;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use shiitake_core::store::{Op, StoreError};
use shiitake_store_sql::queue::Queue;
use shiitake_store_sql::{Dialect, Reads, SqlBackend, Stmt, db, encode, impl_store};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection, Sqlite, SqliteConnection};

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

/// Read connections of one store, all opened with it and kept open.
const READ_CONNECTIONS: u32 = 4;

/// The SQLite store: reads on a sqlx pool, every write on one group-commit writer thread.
pub struct SqliteStore {
    reads: Reads<Sqlite>,
    /// Transactions the writer committed (each one fsync under [`Durability::Full`]).
    commits: Arc<AtomicU64>,
    /// Commits for the writer thread, which runs until the queue closes.
    writer: Queue<Vec<Stmt>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies migrations.
    pub async fn open(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(db)?
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
        let mut conn = SqliteConnection::connect_with(&options).await.map_err(db)?;
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
        conn.close().await.map_err(db)?;
        // A connection to a local file does not go stale: pinging it before each read
        // (sqlx's default) would only add a round trip to its worker thread. The read
        // connections are opened now and kept, so a process out of file descriptors
        // (slow clients holding them all) can still read: nothing is opened per read.
        let pool = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .min_connections(READ_CONNECTIONS)
            .idle_timeout(None)
            .max_lifetime(None)
            .test_before_acquire(false)
            .connect_with(options.read_only(true))
            .await
            .map_err(db)?;
        let (writer, groups) = Queue::new();
        let commits = Arc::new(AtomicU64::new(0));
        let counted = commits.clone();
        std::thread::Builder::new()
            .name("shiitake-sqlite-writer".to_owned())
            .spawn(move || writer::run(writer_conn, groups, &counted))
            .map_err(|error| {
                StoreError::database(format!("starting the writer thread: {error}"))
            })?;
        Ok(Self {
            reads: Reads::new(pool, Dialect::Sqlite, ""),
            commits,
            writer,
        })
    }

    /// Transactions committed since this store was opened: a group of commits counts
    /// once, as it costs one fsync. Benchmarks divide a raw commit rate by it.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl SqlBackend for SqliteStore {
    type Db = Sqlite;

    fn reads(&self) -> &Reads<Sqlite> {
        &self.reads
    }

    async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        // Encoding (JSON, packed messages) happens here, on the committing task, so
        // the one writer thread spends its time only on SQLite.
        let statements = encode(Dialect::Sqlite, "", &ops)?;
        self.writer.submit(statements).await
    }

    async fn close(&self) {
        self.writer.close().await;
        self.reads.pool().close().await;
    }
}

impl_store!(SqliteStore);
