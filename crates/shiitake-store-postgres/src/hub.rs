//! One process's share of the database, for every tenant it serves: the pool, one
//! writer, one listener, one upkeep connection and one holder name.
//!
//! A [`PostgresHub`] is opened once per process; [`PostgresHub::store`] gives each
//! tenant a [`PostgresStore`] that runs on these parts, so the connections a process
//! holds do not grow with the tenants it has open. Each open tenant has its own row in
//! `hub_nodes` (agent, the process's holder, the upkeep connection's backend), so the
//! per-tenant rules of leases, takeover and the operator's view are those of a process
//! serving one tenant; what is shared is the connection behind them, and with it the
//! life the others see: when the process dies, every tenant's row names a backend that
//! is gone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shiitake_core::store::StoreError;
use shiitake_core::store::ownership::OwnershipEvent;
use shiitake_store_sql::db;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::leases::Held;
use crate::{
    AgentKey, DEFAULT_HEARTBEAT, OpenError, PostgresStore, check_read_connections, check_timing,
    nodes,
};
use crate::{events, upkeep, writer};

/// How to open a [`PostgresHub`]: the database and the timing every tenant of the
/// process shares.
#[derive(Clone, Debug)]
pub struct HubOptions {
    /// `postgres://user@host:port/database`.
    pub url: String,
    /// How long a lease lasts without renewal; the hub renews every third of it.
    /// [`MIN_LEASE_TTL`](crate::MIN_LEASE_TTL) to [`MAX_LEASE_TTL`](crate::MAX_LEASE_TTL).
    pub lease_ttl: Duration,
    /// How often this process beats, and looks for processes that died.
    /// [`MIN_HEARTBEAT`](crate::MIN_HEARTBEAT) to half the lease.
    pub heartbeat: Duration,
    /// Connections of the pool: reads, leases, forwarded requests and the listener, for
    /// every tenant (the writer and the upkeep have one each besides). At least
    /// [`MIN_READ_CONNECTIONS`](crate::MIN_READ_CONNECTIONS).
    pub read_connections: u32,
}

impl HubOptions {
    /// Defaults: 10 s leases, a heartbeat every 500 ms, 8 pool connections.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            lease_ttl: Duration::from_secs(10),
            heartbeat: DEFAULT_HEARTBEAT,
            read_connections: 8,
        }
    }

    /// Checks the lease and the heartbeat against their bounds (see
    /// [`check_timing`]) and the pool against [`MIN_READ_CONNECTIONS`](crate::MIN_READ_CONNECTIONS).
    pub fn check(&self) -> Result<(), OpenError> {
        check_timing(self.lease_ttl, self.heartbeat)?;
        check_read_connections(self.read_connections)
    }
}

/// Connections the Agent state locks of every tenant are held on (besides the pool).
pub(crate) const AGENT_LOCK_CONNECTIONS: u32 = 4;

/// Longest wait for a connection to hold an Agent state lock on: the locks of other
/// tenants held meanwhile are each held for one settle's hooks.
const AGENT_LOCK_WAIT: Duration = Duration::from_secs(120);

/// Longest a read, a claim or any other use of the pool waits for a connection (one
/// free in the pool, or a new one the database accepts) before it answers
/// [`StoreError::Unavailable`]: while the database is down, a request fails within
/// this rather than hang.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the others wait for a process after the database restarted before they
/// give its Sessions away (`nodes.rs`): its lease period, and at least twice the
/// longest spacing of its reconnection attempts and two heartbeats, so a process that
/// is alive is back in time.
fn rejoin_grace(lease_ttl: Duration, heartbeat: Duration) -> Duration {
    lease_ttl.max(crate::outage::CAP * 2 + heartbeat * 2)
}

/// Tenants whose freed leases are buffered for a slow [`PostgresHub::freed`] receiver.
const FREED_BUFFER: usize = 1024;

/// Announcements buffered for a tenant's slow receivers before they are told to look again.
const EVENT_BUFFER: usize = 4096;

/// The process-wide handle of the PostgreSQL store: one per process, shared by every
/// tenant store it opens; cloning it is cheap. See the module documentation.
#[derive(Clone)]
pub struct PostgresHub {
    pub(crate) inner: Arc<HubInner>,
}

impl std::fmt::Debug for PostgresHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresHub")
            .field("holder", &self.inner.holder)
            .finish_non_exhaustive()
    }
}

/// One open tenant, as the hub's tasks see it: where its announcements go, the leases
/// its owners hold (renewed by the upkeep) and whether it takes Sessions.
pub(crate) struct Tenant {
    pub(crate) agent: AgentKey,
    /// Set by a drain: this tenant takes no more Sessions here.
    pub(crate) draining: AtomicBool,
    pub(crate) leases: Held,
    pub(crate) events: broadcast::Sender<OwnershipEvent>,
}

impl Tenant {
    /// Whether this tenant drains here (takes no more Sessions).
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// What the hub's parts share.
pub(crate) struct HubInner {
    /// This process's name in lease and node rows: one ULID for the process.
    pub(crate) holder: String,
    pub(crate) lease_ttl: Duration,
    pub(crate) heartbeat: Duration,
    /// How long the others wait for this process after a restart of the database.
    pub(crate) rejoin: Duration,
    /// Reads, leases and forwarded requests of every tenant (and the listener).
    pub(crate) pool: PgPool,
    /// The connections Agent state locks are held on (`lock_agent_state`), apart from
    /// `pool`: a holder reads the Agent's rows through `pool` while it holds the lock, so
    /// holders sharing `pool` with their lock could take every connection and wait for
    /// one more forever (many tenants locking at once did, until the acquire timed out).
    pub(crate) locks: PgPool,
    pub(crate) writer: writer::Writer,
    /// How the upkeep connection is opened again when it breaks.
    pub(crate) connect: PgConnectOptions,
    /// The upkeep connection (`None` while it is broken): each beat holds it, and so do
    /// a tenant registering and a tenant leaving, so a beat never registers a tenant
    /// again after it left.
    pub(crate) upkeep: tokio::sync::Mutex<Option<PgConnection>>,
    /// Whether the upkeep connection was lost a moment ago (`upkeep::OwnCut`).
    pub(crate) own_cut: crate::upkeep::OwnCut,
    /// The open tenants: whom the listener routes to and the upkeep beats for.
    tenants: Mutex<HashMap<AgentKey, Arc<Tenant>>>,
    /// Set by [`PostgresHub::drain`]: every tenant, also one opened later, drains.
    draining: AtomicBool,
    /// Set by [`PostgresHub::close`]: no more tenants open.
    closed: AtomicBool,
    pub(crate) freed: broadcast::Sender<AgentKey>,
    /// Cancelled by `close`: the upkeep and listening tasks stop.
    pub(crate) closing: CancellationToken,
    /// The listener and the upkeep, awaited by `close` before the pool closes.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl HubInner {
    /// The open tenants now.
    pub(crate) fn tenants(&self) -> Vec<Arc<Tenant>> {
        self.tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// The open tenant of `agent`, if any.
    pub(crate) fn tenant(&self, agent: &str) -> Option<Arc<Tenant>> {
        // By the text: every notification of every process comes here.
        let tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        tenants.get(agent).cloned()
    }

    /// Opens the store of `agent`: its row names the upkeep connection's backend before
    /// it claims anything.
    pub(crate) async fn open_tenant(
        self: &Arc<Self>,
        agent: AgentKey,
        private: bool,
    ) -> Result<PostgresStore, OpenError> {
        let mut upkeep = self.upkeep.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return Err(OpenError::HubClosed);
        }
        if self
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&agent)
        {
            return Err(OpenError::TenantOpen(agent.to_string()));
        }
        let draining = self.draining.load(Ordering::SeqCst);
        let open = self.tenants();
        // A connection found broken is replaced once, here rather than at the next beat.
        let mut attempts = 2;
        loop {
            attempts -= 1;
            let registered = match upkeep.as_mut() {
                Some(conn) => {
                    nodes::register(
                        conn,
                        &self.holder,
                        self.rejoin,
                        &[(agent.as_str(), draining)],
                    )
                    .await
                }
                // A new backend: every open tenant's row must name it too.
                None => upkeep::reconnect(self, &open, Some((agent.as_str(), draining)))
                    .await
                    .map(|conn| *upkeep = Some(conn)),
            };
            match registered {
                Ok(()) => break,
                Err(error) => {
                    let broken = upkeep::broken(&error);
                    if broken {
                        *upkeep = None;
                    }
                    if !broken || attempts == 0 {
                        return Err(OpenError::connect(error));
                    }
                }
            }
        }
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let tenant = Arc::new(Tenant {
            agent: agent.clone(),
            draining: AtomicBool::new(draining),
            leases: Held::default(),
            events,
        });
        self.tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(agent, tenant.clone());
        drop(upkeep);
        Ok(PostgresStore::on_hub(self.clone(), tenant, private))
    }

    /// The tenant leaves: the hub stops serving it, then any lease it still holds is
    /// given back (announced) and its row deleted. Nothing when it is no longer open
    /// (closed twice, or the hub closed first): the rows of the process under that key
    /// may be a newer store's of the same tenant.
    pub(crate) async fn leave(&self, tenant: &Arc<Tenant>) {
        {
            let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
            if !tenants
                .get(&tenant.agent)
                .is_some_and(|open| Arc::ptr_eq(open, tenant))
            {
                return;
            }
            tenants.remove(&tenant.agent);
        }
        // After any beat in progress, which may have registered it again.
        let _upkeep = self.upkeep.lock().await;
        report_left(nodes::leave(&self.pool, &[tenant.agent.as_str()], &self.holder).await);
    }

    /// Closes the hub: waits for the writer, stops the tasks, gives back what every
    /// tenant still open holds, closes the pool.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.writer.close().await;
        self.closing.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            if let Err(error) = task.await {
                tracing::warn!(%error, "a task of the PostgreSQL hub ended badly");
            }
        }
        let open: Vec<AgentKey> = self
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(agent, _)| agent)
            .collect();
        if !open.is_empty() {
            let agents: Vec<&str> = open.iter().map(AgentKey::as_str).collect();
            report_left(nodes::leave(&self.pool, &agents, &self.holder).await);
        }
        if let Some(conn) = self.upkeep.lock().await.take() {
            // A connection the database no longer answers is dropped, not waited for.
            match tokio::time::timeout(upkeep::CONNECT_TIMEOUT, conn.close()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::trace!(%error, "closing the upkeep connection"),
                Err(_) => tracing::trace!("the upkeep connection did not close in time"),
            }
        }
        self.pool.close().await;
        self.locks.close().await;
    }
}

/// Logs how leaving went: a failure is not fatal, since the others free this process's
/// Sessions when its connection is gone.
fn report_left(left: Result<u64, StoreError>) {
    match left {
        Ok(0) => {}
        Ok(released) => tracing::info!(
            sessions = released,
            "gave back the leases still held as this process left"
        ),
        Err(error) => {
            tracing::warn!(%error, "could not leave the Hub cleanly; the others free this process's Sessions when its connection is gone")
        }
    }
}

impl PostgresHub {
    /// Connects, applies migrations, and starts the process's writer, upkeep
    /// (heartbeat and lease renewal of every open tenant) and listener. No tenant is
    /// open yet: [`PostgresHub::store`] opens each.
    pub async fn open(options: HubOptions) -> Result<Self, OpenError> {
        options.check()?;
        let holder = ulid::Ulid::generate().to_string();
        let mut connect: PgConnectOptions = options
            .url
            .parse::<PgConnectOptions>()
            .map_err(|error| OpenError::Url(error.to_string()))?
            .disable_statement_logging();
        if connect.get_application_name().is_none() {
            // So an operator (and a test) finds this process's backends in pg_stat_activity.
            connect = connect.application_name(&format!("shiitake {holder}"));
        }
        let mut migrator_conn = connect.connect().await.map_err(OpenError::connect)?;
        sqlx::migrate!("./migrations/postgres")
            .run_direct(&mut migrator_conn)
            .await
            .map_err(|error| OpenError::Migration(error.to_string()))?;
        migrator_conn.close().await.map_err(OpenError::connect)?;
        let pool = PgPoolOptions::new()
            .max_connections(options.read_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // A ping before every query doubles the round trips; a broken connection
            // fails its query instead, and the pool replaces it.
            .test_before_acquire(false)
            .connect_with(connect.clone())
            .await
            .map_err(OpenError::connect)?;
        // Opened as locks are taken; a locker waits for a free one (each is held for a
        // settle's hooks only) rather than going on without the lock.
        let locks = PgPoolOptions::new()
            .max_connections(AGENT_LOCK_CONNECTIONS)
            .min_connections(0)
            .acquire_timeout(AGENT_LOCK_WAIT)
            .test_before_acquire(false)
            .connect_lazy_with(connect.clone());
        let writer = writer::Writer::start(writer::config(&options.url, &connect), holder.clone())
            .await
            .map_err(|error| OpenError::Connect(error.to_string()))?;
        let (freed, _) = broadcast::channel(FREED_BUFFER);
        let inner = Arc::new(HubInner {
            holder,
            lease_ttl: options.lease_ttl,
            heartbeat: options.heartbeat,
            rejoin: rejoin_grace(options.lease_ttl, options.heartbeat),
            pool,
            locks,
            writer,
            connect,
            upkeep: tokio::sync::Mutex::new(None),
            own_cut: crate::upkeep::OwnCut::default(),
            tenants: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            freed,
            closing: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
        });
        let upkeep_conn = upkeep::connect(&inner).await.map_err(OpenError::connect)?;
        *inner.upkeep.lock().await = Some(upkeep_conn);
        let listener = events::listen(&inner.pool)
            .await
            .map_err(OpenError::connect)?;
        let tasks = vec![
            tokio::spawn(events::run(listener, Arc::downgrade(&inner))),
            tokio::spawn(upkeep::run(Arc::downgrade(&inner))),
        ];
        inner
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(tasks);
        Ok(Self { inner })
    }

    /// The store of the tenant `agent`, on this process's connections: its row in
    /// `hub_nodes` is registered before it claims anything. One store per tenant per
    /// hub ([`OpenError::TenantOpen`] while one is open); closing it
    /// ([`Store::close`](shiitake_core::store::Store::close), which `Agent::close`
    /// calls) leaves the hub and the other tenants running.
    pub async fn store(&self, agent: AgentKey) -> Result<PostgresStore, OpenError> {
        self.inner.open_tenant(agent, false).await
    }

    /// This process's name in lease and node rows, shared by all its tenants; its
    /// connections show `shiitake <holder>` as `application_name` unless the URL sets one.
    pub fn holder(&self) -> &str {
        &self.inner.holder
    }

    /// The pool every tenant's reads run on, for other parts of the process that need
    /// the database (the registry of tenants) without connections of their own.
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The tenants open on this hub now.
    pub fn open_tenants(&self) -> Vec<AgentKey> {
        let mut open: Vec<AgentKey> = self
            .inner
            .tenants()
            .iter()
            .map(|tenant| tenant.agent.clone())
            .collect();
        open.sort();
        open
    }

    /// The tenants whose Sessions a process gave up: one that died (its leases freed by
    /// some process's heartbeat, one message per tenant per beat that freed any) or one
    /// that drains (each tenant it holds Sessions of, once). Every hub hears them, the
    /// giving one included: a host opens such a tenant (if it is not open) so the work
    /// is adopted at once, whichever process it lived on; the freed Sessions themselves
    /// reach the tenants open here as `Released`.
    pub fn freed(&self) -> broadcast::Receiver<AgentKey> {
        self.inner.freed.subscribe()
    }

    /// Drains the process: every open tenant (and any opened later) takes no more
    /// Sessions, and their rows say `draining`; each tenant holding Sessions is
    /// announced on every hub's [`PostgresHub::freed`], as after a death, so a process
    /// without it open opens it. The host then closes each Agent (`Agent::close`),
    /// which hands its Sessions over, as a deploy does.
    pub async fn drain(&self) -> Result<(), StoreError> {
        self.inner.draining.store(true, Ordering::SeqCst);
        for tenant in self.inner.tenants() {
            tenant.draining.store(true, Ordering::SeqCst);
        }
        sqlx::query("UPDATE hub_nodes SET draining = true WHERE holder = $1")
            .bind(&self.inner.holder)
            .execute(&self.inner.pool)
            .await
            .map_err(db)?;
        // The tenants whose Sessions this process is about to hand over are announced
        // as a death announces them (`d <agent>`), so a process that has none of them
        // open opens them now and adopts the work at once, not at its next sweep. A
        // tenant holding no lease has nothing to hand over.
        let handing_over: Vec<String> = self
            .inner
            .tenants()
            .iter()
            .filter(|tenant| !tenant.leases.tenures().0.is_empty())
            .map(|tenant| events::freed_payload(tenant.agent.as_str()))
            .collect();
        if !handing_over.is_empty() {
            sqlx::query("SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload")
                .bind(events::CHANNEL)
                .bind(&handing_over)
                .execute(&self.inner.pool)
                .await
                .map_err(db)?;
        }
        Ok(())
    }

    /// Closes everything: waits for the commits handed over, stops the upkeep and the
    /// listener, gives back every lease still held by a tenant still open (announced),
    /// removes their rows and closes the pool. Close the Agents first (each drains and
    /// hands its Sessions over); a store used after this answers `closed`.
    pub async fn close(&self) {
        self.inner.close().await;
    }
}
