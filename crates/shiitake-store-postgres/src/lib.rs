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
//! - **One process, many tenants.** A [`PostgresHub`] is opened once per process: the
//!   pool, one writer, one listener, one upkeep connection and one holder name, which
//!   every tenant store it opens ([`PostgresHub::store`]) shares, so the connections a
//!   process holds do not grow with its tenants. [`PostgresStore::open`] opens a hub
//!   for one store alone. A process that dies is reported per tenant to every hub
//!   ([`PostgresHub::freed`]), so a host can open the tenants it abandoned.
//! - **Group commit.** Owners hand their commits to one writer task per process,
//!   which commits whatever is waiting (of every tenant) in one transaction; if one
//!   request fails the group runs again with each request under its own savepoint, so
//!   a bad one fails alone (as the SQLite writer does).
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
//! What is PostgreSQL's alone stays here: the hub of a process, the writer task,
//! leases, `LISTEN`/`NOTIFY`, the migrations.

mod error;
mod events;
mod hub;
mod leases;
mod nodes;
mod outage;
pub mod registry;
mod upkeep;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use error::OpenError;
pub use hub::{ACQUIRE_TIMEOUT, HubOptions, PostgresHub};

use async_trait::async_trait;
use shiitake_core::store::{Op, Ownership, StoreError};
use shiitake_protocol::HubNode;
use shiitake_store_sql::{Dialect, Reads, SqlBackend, impl_store};
use sqlx::Postgres;
use sqlx::postgres::PgPool;
use tokio_util::task::TaskTracker;

use hub::{HubInner, Tenant};

/// The tenant a store serves: every row it reads or writes is keyed by it.
///
/// 1 to 64 characters of `A-Z a-z 0-9 _ - . :` (it travels in notifications).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// Looks a key up by its text (its hash and equality are the text's).
impl std::borrow::Borrow<str> for AgentKey {
    fn borrow(&self) -> &str {
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
    /// Connections for reads, leases, forwarded requests and the listener (the writer
    /// and the upkeep have one each besides).
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
/// The fewest pool connections: the listener holds one for good, so one more is the
/// least the reads, leases and forwarded requests can run on.
pub const MIN_READ_CONNECTIONS: u32 = 2;

impl PostgresOptions {
    /// Defaults: those of [`HubOptions::new`] (10 s leases, a heartbeat every 500 ms, 8
    /// read connections).
    pub fn new(url: impl Into<String>, agent: AgentKey) -> Self {
        let hub = HubOptions::new(url);
        Self {
            url: hub.url,
            agent,
            lease_ttl: hub.lease_ttl,
            heartbeat: hub.heartbeat,
            read_connections: hub.read_connections,
        }
    }

    /// Checks the lease and the heartbeat against their bounds: a lease of
    /// [`MIN_LEASE_TTL`] to [`MAX_LEASE_TTL`], a heartbeat of [`MIN_HEARTBEAT`] to half
    /// the lease (a beat as long as the lease could not see a death before the expiry);
    /// and the pool against [`MIN_READ_CONNECTIONS`].
    pub fn check(&self) -> Result<(), OpenError> {
        self.hub().check()
    }

    /// The options of the hub a store opened alone runs on.
    fn hub(&self) -> HubOptions {
        HubOptions {
            url: self.url.clone(),
            lease_ttl: self.lease_ttl,
            heartbeat: self.heartbeat,
            read_connections: self.read_connections,
        }
    }
}

/// Checks the pool's size against [`MIN_READ_CONNECTIONS`].
pub fn check_read_connections(read_connections: u32) -> Result<(), OpenError> {
    if read_connections < MIN_READ_CONNECTIONS {
        return Err(OpenError::ReadConnections(read_connections));
    }
    Ok(())
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

/// The PostgreSQL store of one tenant; see the crate documentation. Opened alone
/// ([`PostgresStore::open`], on a hub of its own) or on a process's shared
/// [`PostgresHub`] ([`PostgresHub::store`]).
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

/// What the store's parts share: the tenant's own, and the hub it runs on.
struct Shared {
    agent: AgentKey,
    /// This process's name in lease rows: the hub's, shared by its tenants.
    holder: String,
    lease_ttl: Duration,
    /// The hub's pool of reads, leases and forwarded requests (`reads` runs on it too).
    pool: PgPool,
    reads: Reads<Postgres>,
    /// What the hub's listener and upkeep know of this tenant.
    tenant: Arc<Tenant>,
    hub: Arc<HubInner>,
    /// The hub was opened for this store alone ([`PostgresStore::open`]): closing the
    /// store closes it.
    private: bool,
    /// The commits handed to the writer and not answered yet, which `close` waits for.
    commits: TaskTracker,
    /// Set by `close`: no more commits.
    closed: AtomicBool,
}

impl Shared {
    /// Whether this process drains this tenant (takes no more of its Sessions).
    fn draining(&self) -> bool {
        self.tenant.draining()
    }
}

impl PostgresStore {
    /// Connects, applies migrations, and opens this tenant on a hub of its own
    /// (writer, upkeep, listener and pool for this store alone), as a process serving one
    /// tenant does; closing the store closes that hub. A process serving many tenants
    /// opens one [`PostgresHub`] and takes each tenant's store from it instead.
    pub async fn open(options: PostgresOptions) -> Result<Self, OpenError> {
        let hub = PostgresHub::open(options.hub()).await?;
        let opened = hub.inner.open_tenant(options.agent, true).await;
        if opened.is_err() {
            hub.close().await;
        }
        opened
    }

    /// The store of `tenant` on `hub` (see [`HubInner::open_tenant`]).
    fn on_hub(hub: Arc<HubInner>, tenant: Arc<Tenant>, private: bool) -> Self {
        let agent = tenant.agent.clone();
        Self {
            shared: Arc::new(Shared {
                reads: Reads::new(hub.pool.clone(), Dialect::Postgres, agent.as_str()),
                agent,
                holder: hub.holder.clone(),
                lease_ttl: hub.lease_ttl,
                pool: hub.pool.clone(),
                tenant,
                hub,
                private,
                commits: TaskTracker::new(),
                closed: AtomicBool::new(false),
            }),
        }
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
        let shared = &self.shared;
        // Tracked before the check: `close` either sees this commit or refuses it.
        let _in_flight = shared.commits.token();
        if shared.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Closed);
        }
        shared.hub.writer.commit(shared.agent.clone(), ops).await
    }

    /// Waits for this tenant's commits handed over, then gives back any lease it still
    /// holds (announced) and removes its row; the hub and its other tenants run on. A
    /// store opened alone also closes its hub.
    async fn close(&self) {
        let shared = &self.shared;
        shared.closed.store(true, Ordering::SeqCst);
        shared.commits.close();
        shared.commits.wait().await;
        shared.hub.leave(&shared.tenant).await;
        if shared.private {
            shared.hub.close().await;
        }
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
    fn the_pool_has_room_for_the_listener_and_a_read() {
        let key = AgentKey::new("a").unwrap();
        let mut options = PostgresOptions::new("postgres://h/db", key);
        let mut hub = HubOptions::new("postgres://h/db");
        for (connections, allowed) in [(0, false), (1, false), (2, true), (8, true)] {
            options.read_connections = connections;
            hub.read_connections = connections;
            for checked in [options.check(), hub.check()] {
                match checked {
                    Ok(()) => assert!(allowed, "{connections}"),
                    Err(OpenError::ReadConnections(refused)) => {
                        assert!(!allowed, "{connections}");
                        assert_eq!(refused, connections);
                    }
                    Err(other) => panic!("{other}"),
                }
            }
        }
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
