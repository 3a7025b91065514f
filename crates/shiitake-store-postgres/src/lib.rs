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
//!   process's owners still hold; a process that is paused past the expiry loses
//!   them, and another process adopts its Sessions and resumes their work under
//!   core's recovery rules.
//! - **Liveness.** That connection is also the process's life as the others see it:
//!   its backend is registered in `hub_nodes`, and when the process dies PostgreSQL
//!   ends the backend. Every process looks on a short heartbeat (500 ms by default)
//!   and frees, in one statement, the leases of every process whose backend is gone,
//!   announcing each Session; a claim on such a lease succeeds at once. A process
//!   that stops on purpose drains: it takes no more Sessions and hands its own over.
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
mod nodes;
pub mod registry;
mod upkeep;
mod writer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub use error::OpenError;

use async_trait::async_trait;
use shiitake_core::store::ownership::OwnershipEvent;
use shiitake_core::store::{Op, Ownership, StoreError};
use shiitake_protocol::HubNode;
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
    /// A process that is alive but stopped (paused) has its Sessions taken over after
    /// this time; one that dies, within about a heartbeat.
    /// [`MIN_LEASE_TTL`] to [`MAX_LEASE_TTL`].
    pub lease_ttl: Duration,
    /// How often this process beats, and looks for processes that died (their
    /// Sessions are freed at the first beat of any process after the death).
    /// [`MIN_HEARTBEAT`] to half the lease.
    pub heartbeat: Duration,
    /// Connections for reads, leases and forwarded requests (the writer, the
    /// listener and the upkeep have one each besides).
    pub read_connections: u32,
}

/// The shortest lease: shorter would have a loaded process lose its Sessions to a
/// slow renewal.
pub const MIN_LEASE_TTL: Duration = Duration::from_millis(500);
/// The longest lease: a paused process keeps its Sessions this long.
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(600);
/// The shortest heartbeat: each beat is one statement on every process's upkeep
/// connection.
pub const MIN_HEARTBEAT: Duration = Duration::from_millis(50);

impl PostgresOptions {
    /// Defaults: 10 s leases, a heartbeat every 500 ms, 8 read connections.
    pub fn new(url: impl Into<String>, agent: AgentKey) -> Self {
        Self {
            url: url.into(),
            agent,
            lease_ttl: Duration::from_secs(10),
            heartbeat: DEFAULT_HEARTBEAT,
            read_connections: 8,
        }
    }

    /// Checks the lease and the heartbeat against their bounds: a lease of
    /// [`MIN_LEASE_TTL`] to [`MAX_LEASE_TTL`], a heartbeat of [`MIN_HEARTBEAT`] to half
    /// the lease (a beat as long as the lease could not see a death before the expiry).
    pub fn check(&self) -> Result<(), OpenError> {
        check_timing(self.lease_ttl, self.heartbeat)
    }
}

/// The default heartbeat for a lease of `lease_ttl`: 500 ms, or half the lease when
/// that is shorter.
pub fn default_heartbeat(lease_ttl: Duration) -> Duration {
    DEFAULT_HEARTBEAT.min(lease_ttl / 2)
}

/// The heartbeat of [`PostgresOptions::new`].
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_millis(500);

/// Checks a lease period and a heartbeat against their bounds (see
/// [`PostgresOptions::check`]), for a host that checks its flags before it starts.
pub fn check_timing(lease_ttl: Duration, heartbeat: Duration) -> Result<(), OpenError> {
    if !(MIN_LEASE_TTL..=MAX_LEASE_TTL).contains(&lease_ttl) {
        return Err(OpenError::LeaseTtl(lease_ttl));
    }
    if heartbeat < MIN_HEARTBEAT || heartbeat > lease_ttl / 2 {
        return Err(OpenError::Heartbeat {
            heartbeat,
            lease_ttl,
        });
    }
    Ok(())
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
    heartbeat: Duration,
    /// Set by [`Ownership::drain`]: this process takes no more Sessions.
    draining: AtomicBool,
    /// The listener and the upkeep, awaited by `close` before the pool closes.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The pool of reads, leases and forwarded requests (`reads` runs on it too).
    pool: PgPool,
    reads: Reads<Postgres>,
    writer: writer::Writer,
    leases: leases::Held,
    events: broadcast::Sender<OwnershipEvent>,
    /// Cancelled by `close`: the upkeep and listening tasks stop.
    closing: tokio_util::sync::CancellationToken,
}

impl Shared {
    /// Whether this process drains (takes no more Sessions).
    fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// Announcements buffered for slow receivers before they are told to look again.
const EVENT_BUFFER: usize = 4096;

impl PostgresStore {
    /// Connects, applies migrations, registers this process, and starts its writer,
    /// upkeep (heartbeat and lease renewal) and listener.
    pub async fn open(options: PostgresOptions) -> Result<Self, OpenError> {
        options.check()?;
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
        let connect_for_upkeep = connect.clone();
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let holder = ulid::Ulid::generate().to_string();
        let closing = tokio_util::sync::CancellationToken::new();
        let writer =
            writer::Writer::start(writer_conn, connect, options.agent.clone(), holder.clone());
        let shared = Arc::new(Shared {
            agent: options.agent.clone(),
            holder,
            lease_ttl: options.lease_ttl,
            heartbeat: options.heartbeat,
            draining: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
            reads: Reads::new(pool.clone(), Dialect::Postgres, options.agent.as_str()),
            pool,
            writer,
            leases: leases::Held::default(),
            events,
            closing,
        });
        // Registered before anything is claimed: from here on, the others see this
        // process die with this connection.
        let upkeep_conn = upkeep::connect(&connect_for_upkeep, &shared)
            .await
            .map_err(OpenError::connect)?;
        let listener = events::listen(&shared.pool)
            .await
            .map_err(OpenError::connect)?;
        let tasks = vec![
            tokio::spawn(events::run(listener, Arc::downgrade(&shared))),
            tokio::spawn(upkeep::run(
                Arc::downgrade(&shared),
                upkeep_conn,
                connect_for_upkeep,
            )),
        ];
        shared
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(tasks);
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

    /// Every process of this Agent on the database, oldest first, with its heartbeat
    /// and the Sessions and runs it holds: the operator's view (`GET /v1/hub/nodes`).
    pub async fn nodes(&self) -> Result<Vec<HubNode>, StoreError> {
        nodes::list(&self.shared.pool, self.shared.agent.as_str()).await
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

    /// Waits for the commits handed over, stops the upkeep and the listener, gives
    /// back any lease still held (announced) and removes this process's row, then
    /// closes the pool.
    async fn close(&self) {
        let shared = &self.shared;
        shared.writer.close().await;
        shared.closing.cancel();
        let tasks =
            std::mem::take(&mut *shared.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            if let Err(error) = task.await {
                tracing::warn!(%error, "a task of the PostgreSQL store ended badly");
            }
        }
        match nodes::leave(&shared.pool, shared.agent.as_str(), &shared.holder).await {
            Ok(0) => {}
            Ok(released) => tracing::info!(
                sessions = released,
                "gave back the leases still held as this process left"
            ),
            Err(error) => {
                tracing::warn!(%error, "could not leave the Hub cleanly; the others free this process's Sessions when its connection is gone")
            }
        }
        shared.pool.close().await;
    }

    fn ownership(&self) -> Option<Arc<dyn Ownership>> {
        Some(Arc::new(self.clone()))
    }
}

impl_store!(PostgresStore);

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn the_lease_and_heartbeat_are_checked_at_their_edges() {
        assert!(check_timing(ms(500), ms(250)).is_ok());
        assert!(matches!(
            check_timing(ms(499), ms(100)),
            Err(OpenError::LeaseTtl(_))
        ));
        assert!(check_timing(ms(600_000), ms(500)).is_ok());
        assert!(matches!(
            check_timing(ms(600_001), ms(500)),
            Err(OpenError::LeaseTtl(_))
        ));
        assert!(check_timing(ms(10_000), ms(50)).is_ok());
        assert!(matches!(
            check_timing(ms(10_000), ms(49)),
            Err(OpenError::Heartbeat { .. })
        ));
        assert!(check_timing(ms(10_000), ms(5_000)).is_ok());
        assert!(matches!(
            check_timing(ms(10_000), ms(5_001)),
            Err(OpenError::Heartbeat { .. })
        ));
        assert!(matches!(
            check_timing(ms(10_000), ms(10_000)),
            Err(OpenError::Heartbeat { .. })
        ));
    }

    #[test]
    fn the_default_heartbeat_fits_any_lease() {
        assert_eq!(default_heartbeat(ms(10_000)), ms(500));
        assert_eq!(default_heartbeat(ms(600)), ms(300));
        for lease in [MIN_LEASE_TTL, ms(999), ms(1_000), MAX_LEASE_TTL] {
            assert!(
                check_timing(lease, default_heartbeat(lease)).is_ok(),
                "{lease:?}"
            );
        }
        let options = PostgresOptions::new("postgres://h/db", AgentKey::new("a").unwrap());
        assert!(options.check().is_ok());
    }
}
