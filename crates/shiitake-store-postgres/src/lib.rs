//! The PostgreSQL store of a Shiitake Agent, for the Hub: several processes on one
//! database, each Session owned by exactly one of them at a time.
//!
//! [`PostgresStore`] implements core's [`Store`](shiitake_core::store::Store) and
//! its [`Ownership`], so an
//! [`Agent`](shiitake_core::Agent) opened on it behaves as on SQLite and, in
//! addition, shares its Sessions with every other process opened on the same
//! database and [`AgentKey`]:
//!
//! - **Tenants.** Every row is keyed by the Agent first. A store sees only its own
//!   Agent's rows; another tenant's Session is simply not there (`not_found`).
//! - **Group commit.** Owners hand their commits to one writer task per process,
//!   which commits whatever is waiting in one transaction, each request under its
//!   own savepoint so a bad one fails alone (as the SQLite writer does).
//! - **Leases and fencing.** An owner first takes its Session's lease: a row with
//!   the holding process, an expiry on the database's clock and a fencing token
//!   that grows whenever the lease changes hands. The writer checks the token in
//!   every commit under a key-share lock of the lease row, so a stale owner's
//!   commit fails whole and a takeover waits for a commit in flight (a renewal
//!   does not). A background task on its own connection renews the leases this
//!   process's owners still hold; a process that stops (or is paused past the
//!   expiry) loses them, and another process adopts its Sessions and resumes their
//!   work under core's recovery rules.
//! - **Across processes.** Requests for a Session owned elsewhere are rows the
//!   owner is woken for with `LISTEN`/`NOTIFY`; committed changes are announced the
//!   same way, so subscribers on any process see every frame.
//! - **Timers** are claimed by a conditional update of their row, which
//!   PostgreSQL serialises: of several processes exactly one fires an occurrence.
//!
//! Migrations are plain SQL in `migrations/postgres/`, applied when the store
//! opens. This crate is separate from `shiitake-core` so that Local builds do not
//! compile a PostgreSQL driver.
//!
//! What it does not own: the SQL of the store's operations. Statements, the turning of
//! ops into them, the reads and row decoding are written once for SQLite and
//! PostgreSQL in `shiitake-store-sql`, which also writes core's `Store` on top of this
//! crate's backend (its writer, reads, close and [`Ownership`]).
//! What is PostgreSQL's alone stays here: the writer task, leases, `LISTEN`/`NOTIFY`,
//! the migrations.

mod error;
mod events;
mod leases;
mod writer;

use std::sync::Arc;
use std::time::Duration;

pub use error::OpenError;

use async_trait::async_trait;
use shiitake_core::store::ownership::OwnershipEvent;
use shiitake_core::store::{Op, Ownership, StoreError};
use shiitake_store_sql::{Dialect, Reads, SqlBackend, impl_store};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Postgres};
use tokio::sync::broadcast;

/// The tenant a store serves: every row it reads or writes is keyed by it.
///
/// 1 to 64 characters of `A-Z a-z 0-9 _ - . :` (it travels in notifications).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AgentKey(String);

impl AgentKey {
    /// Longest key, in characters.
    pub const MAX_LEN: usize = 64;

    /// Checks and wraps a key.
    pub fn new(key: impl Into<String>) -> Result<Self, OpenError> {
        let key = key.into();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
        if key.is_empty() || key.len() > Self::MAX_LEN || !key.chars().all(allowed) {
            return Err(OpenError::AgentKey(key));
        }
        Ok(Self(key))
    }

    /// The key as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for AgentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How to open a [`PostgresStore`].
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// `postgres://user@host:port/database`.
    pub url: String,
    /// The tenant.
    pub agent: AgentKey,
    /// How long a lease lasts without renewal; the store renews every third of it.
    /// A process that stops has its Sessions taken over within this time.
    pub lease_ttl: Duration,
    /// Connections for reads, leases and forwarded requests (the writer and the
    /// listener have one each besides).
    pub read_connections: u32,
}

impl PostgresOptions {
    /// Defaults: 10 s leases, 8 read connections.
    pub fn new(url: impl Into<String>, agent: AgentKey) -> Self {
        Self {
            url: url.into(),
            agent,
            lease_ttl: Duration::from_secs(10),
            read_connections: 8,
        }
    }
}

/// The PostgreSQL store; see the crate documentation.
#[derive(Clone)]
pub struct PostgresStore {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("agent", &self.shared.agent)
            .field("holder", &self.shared.holder)
            .finish_non_exhaustive()
    }
}

/// What the store's parts share.
struct Shared {
    agent: AgentKey,
    /// This process's name in lease rows: a fresh ULID per opened store.
    holder: String,
    lease_ttl: Duration,
    /// The pool of reads, leases and forwarded requests (`reads` runs on it too).
    pool: PgPool,
    reads: Reads<Postgres>,
    writer: writer::Writer,
    leases: leases::Held,
    events: broadcast::Sender<OwnershipEvent>,
    /// Cancelled by `close`: the renewal and listening tasks stop.
    closing: tokio_util::sync::CancellationToken,
}

/// Announcements buffered for slow receivers before they are told to look again.
const EVENT_BUFFER: usize = 4096;

impl PostgresStore {
    /// Connects, applies migrations, and starts the writer, lease renewal and
    /// listener of this process.
    pub async fn open(options: PostgresOptions) -> Result<Self, OpenError> {
        let connect: PgConnectOptions = options
            .url
            .parse::<PgConnectOptions>()
            .map_err(|error| OpenError::Url(error.to_string()))?
            .disable_statement_logging();
        let mut migrator_conn = connect.connect().await.map_err(OpenError::connect)?;
        sqlx::migrate!("./migrations/postgres")
            .run_direct(&mut migrator_conn)
            .await
            .map_err(|error| OpenError::Migration(error.to_string()))?;
        migrator_conn.close().await.map_err(OpenError::connect)?;
        let pool = PgPoolOptions::new()
            .max_connections(options.read_connections.max(1))
            // A ping before every query doubles the round trips; a broken connection
            // fails its query instead, and the pool replaces it.
            .test_before_acquire(false)
            .connect_with(connect.clone())
            .await
            .map_err(OpenError::connect)?;
        let writer_conn = connect.connect().await.map_err(OpenError::connect)?;
        let connect_for_renewal = connect.clone();
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let holder = ulid::Ulid::generate().to_string();
        let closing = tokio_util::sync::CancellationToken::new();
        let writer =
            writer::Writer::start(writer_conn, connect, options.agent.clone(), holder.clone());
        let shared = Arc::new(Shared {
            agent: options.agent.clone(),
            holder,
            lease_ttl: options.lease_ttl,
            reads: Reads::new(pool.clone(), Dialect::Postgres, options.agent.as_str()),
            pool,
            writer,
            leases: leases::Held::default(),
            events,
            closing,
        });
        let listener = events::listen(&shared.pool)
            .await
            .map_err(OpenError::connect)?;
        tokio::spawn(events::run(listener, Arc::downgrade(&shared)));
        tokio::spawn(leases::renew(Arc::downgrade(&shared), connect_for_renewal));
        Ok(Self { shared })
    }

    /// The tenant this store serves.
    pub fn agent(&self) -> &AgentKey {
        &self.shared.agent
    }

    /// This process's name in lease rows.
    pub fn holder(&self) -> &str {
        &self.shared.holder
    }
}

#[async_trait]
impl SqlBackend for PostgresStore {
    type Db = Postgres;

    fn reads(&self) -> &Reads<Postgres> {
        &self.shared.reads
    }

    async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        self.shared.writer.commit(ops).await
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

impl_store!(PostgresStore);
