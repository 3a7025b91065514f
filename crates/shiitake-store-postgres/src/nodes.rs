//! The processes of a Hub: each registers its upkeep connection's backend, so the
//! others see it die at once, and the operator sees who serves what.
//!
//! A process has one row per tenant it has open, each naming the backend of its one
//! upkeep connection. A process is alive while that backend exists
//! (`pg_stat_activity`): PostgreSQL ends a backend when its client's connection
//! closes, as it does when the process dies. PostgreSQL announces no disconnect,
//! so every process looks on its heartbeat: one statement beats all its own rows,
//! deletes the rows of dead processes (of every tenant), gives their leases back
//! (keeping each token) and announces each Session freed
//! ([`OwnershipEvent::Released`]). A paused process
//! keeps its connection and stays alive here; only its leases' expiry frees its
//! Sessions, and the fencing token refuses what it commits after waking.
//!
//! [`OwnershipEvent::Released`]: shiitake_core::store::ownership::OwnershipEvent::Released

use shiitake_core::store::StoreError;
use shiitake_protocol::HubNode;
use shiitake_store_sql::{db, uint};
use sqlx::postgres::{PgConnection, PgPool};

/// How the upkeep connection failed: sqlx's error, kept whole so the upkeep can tell a
/// statement refused (the connection is fine) from a connection lost.
pub(crate) type UpkeepError = sqlx::Error;

use crate::events::CHANNEL;

/// SQL true when the lease row `$lease` is held by a process that died: its node row
/// names a backend that is gone. (A holder with no node row is left to the expiry.)
/// Without the privilege to read another role's `backend_start` the pid alone decides.
macro_rules! holder_dead {
    ($lease:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM hub_nodes n WHERE n.agent_id = ",
            $lease,
            ".agent_id AND n.holder = ",
            $lease,
            ".holder AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a \
             WHERE a.pid = n.backend_pid \
               AND (a.backend_start IS NULL OR a.backend_start = n.backend_start)))"
        )
    };
}
pub(crate) use holder_dead;

/// Registers this process for the tenants `agents` (each with whether it drains) on
/// its upkeep connection `conn`, in one statement (again after a reconnect: the rows
/// then name the new backend), before a tenant claims anything.
pub(crate) async fn register(
    conn: &mut PgConnection,
    holder: &str,
    agents: &[(&str, bool)],
) -> Result<(), UpkeepError> {
    if agents.is_empty() {
        return Ok(());
    }
    let (keys, draining): (Vec<String>, Vec<bool>) = agents
        .iter()
        .map(|(agent, draining)| ((*agent).to_owned(), *draining))
        .unzip();
    let done = sqlx::query(
        "INSERT INTO hub_nodes (agent_id, holder, backend_pid, backend_start, started_at, \
           heartbeat_at, draining) \
         SELECT t.agent, $1, a.pid, a.backend_start, clock_timestamp(), clock_timestamp(), \
           t.draining \
         FROM unnest($2::text[], $3::bool[]) AS t(agent, draining) \
         CROSS JOIN (SELECT pid, backend_start FROM pg_stat_activity \
           WHERE pid = pg_backend_pid()) AS a \
         ON CONFLICT (agent_id, holder) DO UPDATE SET backend_pid = excluded.backend_pid, \
           backend_start = excluded.backend_start, heartbeat_at = excluded.heartbeat_at, \
           draining = hub_nodes.draining OR excluded.draining",
    )
    .bind(holder)
    .bind(keys)
    .bind(draining)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != agents.len() as u64 {
        // pg_stat_activity does not show this connection's own backend.
        return Err(sqlx::Error::RowNotFound);
    }
    Ok(())
}

/// What one heartbeat found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Beat {
    /// The tenants whose row of this process was there (the others register again).
    pub(crate) beaten: Vec<String>,
    /// Dead processes whose rows were deleted.
    pub(crate) dead: i64,
    /// Leases of theirs given back (each announced).
    pub(crate) released: i64,
    /// The tenants those leases were of, each announced (`d <agent>`) to every process.
    pub(crate) freed: Vec<String>,
}

/// One heartbeat on the upkeep connection, for every tenant of this process at once:
/// its rows show it beat, and every dead process (of any tenant) is removed with its
/// leases given back and announced, each Session (`r`) and each tenant concerned (`d`,
/// which every process's host hears through [`PostgresHub::freed`]), all in one
/// statement.
///
/// [`PostgresHub::freed`]: crate::PostgresHub::freed
pub(crate) async fn beat(conn: &mut PgConnection, holder: &str) -> Result<Beat, UpkeepError> {
    let (beaten, dead, released, freed): (Vec<String>, i64, i64, Vec<String>) = sqlx::query_as(
        "WITH me AS ( \
           UPDATE hub_nodes SET heartbeat_at = clock_timestamp() \
           WHERE holder = $1 RETURNING agent_id \
         ), dead AS ( \
           DELETE FROM hub_nodes d WHERE d.holder <> $1 \
             AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = d.backend_pid \
               AND (a.backend_start IS NULL OR a.backend_start = d.backend_start)) \
           RETURNING d.agent_id, d.holder \
         ), released AS ( \
           UPDATE session_leases l SET holder = NULL, expires_at = clock_timestamp() \
           FROM dead WHERE l.agent_id = dead.agent_id AND l.holder = dead.holder \
           RETURNING l.agent_id, l.session_id \
         ), announced AS ( \
           SELECT pg_notify($2, format('r %s %s', agent_id, session_id)) FROM released \
         ), tenants AS ( \
           SELECT agent_id, pg_notify($2, format('d %s', agent_id)) \
           FROM (SELECT DISTINCT agent_id FROM released) AS freed \
         ) SELECT ARRAY(SELECT agent_id FROM me), \
             (SELECT count(DISTINCT holder) FROM dead), (SELECT count(*) FROM announced), \
             ARRAY(SELECT agent_id FROM tenants ORDER BY agent_id)",
    )
    .bind(holder)
    .bind(CHANNEL)
    .fetch_one(&mut *conn)
    .await?;
    // The dead holders' Sessions are taken over: counted here, once, whoever claims them.
    shiitake_core::telemetry::takeovers(u64::try_from(released).unwrap_or(0));
    Ok(Beat {
        beaten,
        dead,
        released,
        freed,
    })
}

/// Marks this process draining, so the operator sees it leave.
pub(crate) async fn mark_draining(
    pool: &PgPool,
    agent: &str,
    holder: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE hub_nodes SET draining = true WHERE agent_id = $1 AND holder = $2")
        .bind(agent)
        .bind(holder)
        .execute(pool)
        .await
        .map_err(db)?;
    Ok(())
}

/// The process leaves the tenants `agents`: any lease it still holds of theirs is given
/// back and announced, and their rows are deleted, in one statement.
pub(crate) async fn leave(pool: &PgPool, agents: &[&str], holder: &str) -> Result<u64, StoreError> {
    let agents: Vec<String> = agents.iter().map(|agent| (*agent).to_owned()).collect();
    let released: i64 = sqlx::query_scalar(
        "WITH gone AS ( \
           DELETE FROM hub_nodes WHERE agent_id = ANY($1) AND holder = $2 \
         ), released AS ( \
           UPDATE session_leases SET holder = NULL, expires_at = clock_timestamp() \
           WHERE agent_id = ANY($1) AND holder = $2 RETURNING agent_id, session_id \
         ) SELECT count(pg_notify($3, format('r %s %s', agent_id, session_id))) FROM released",
    )
    .bind(agents)
    .bind(holder)
    .bind(CHANNEL)
    .fetch_one(pool)
    .await
    .map_err(db)?;
    uint(released, "released leases")
}

/// One row of `hub_nodes` with what the operator view adds to it.
#[derive(sqlx::FromRow)]
struct NodeRow {
    holder: String,
    agent_id: String,
    started_at_ms: i64,
    heartbeat_age_ms: i64,
    draining: bool,
    connected: bool,
    sessions: i64,
    open_runs: i64,
}

/// Every process of the Agent, oldest first, with the Sessions it holds and the runs
/// in progress in them (counted now, from the leases and commands).
pub(crate) async fn list(pool: &PgPool, agent: &str) -> Result<Vec<HubNode>, StoreError> {
    list_of(pool, Some(agent)).await
}

/// The rows of `agent`, or of every tenant when `None`, oldest first.
async fn list_of(pool: &PgPool, agent: Option<&str>) -> Result<Vec<HubNode>, StoreError> {
    let rows: Vec<NodeRow> = sqlx::query_as(
        "SELECT n.holder, n.agent_id, \
           (EXTRACT(EPOCH FROM n.started_at) * 1000)::bigint AS started_at_ms, \
           GREATEST(0, (EXTRACT(EPOCH FROM clock_timestamp() - n.heartbeat_at) * 1000)::bigint) \
             AS heartbeat_age_ms, \
           n.draining, \
           EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = n.backend_pid \
             AND (a.backend_start IS NULL OR a.backend_start = n.backend_start)) AS connected, \
           (SELECT count(*) FROM session_leases l \
             WHERE l.agent_id = n.agent_id AND l.holder = n.holder) AS sessions, \
           (SELECT count(*) FROM session_leases l \
             JOIN sessions s ON s.agent_id = l.agent_id AND s.id = l.session_id \
             JOIN commands c ON c.agent_id = s.agent_id AND c.session_id = s.id \
               AND c.id >= s.open_from AND c.state = 'running' \
             WHERE l.agent_id = n.agent_id AND l.holder = n.holder) AS open_runs \
         FROM hub_nodes n WHERE ($1::text IS NULL OR n.agent_id = $1) \
         ORDER BY n.started_at, n.holder, n.agent_id",
    )
    .bind(agent)
    .fetch_all(pool)
    .await
    .map_err(db)?;
    rows.into_iter()
        .map(|row| {
            Ok(HubNode {
                holder: row.holder,
                agent: row.agent_id,
                started_at: uint(row.started_at_ms, "node start")?,
                heartbeat_age_ms: uint(row.heartbeat_age_ms, "heartbeat age")?,
                draining: row.draining,
                connected: row.connected,
                sessions: uint(row.sessions, "held Sessions")?,
                open_runs: uint(row.open_runs, "open runs")?,
            })
        })
        .collect()
}

impl crate::PostgresHub {
    /// Every process of the Hub with each tenant it has open, one row per (tenant,
    /// process), oldest first: the operator's view of a Hub serving many tenants
    /// (`GET /v1/hub/nodes`).
    pub async fn nodes(&self) -> Result<Vec<HubNode>, StoreError> {
        list_of(self.pool(), None).await
    }
}
