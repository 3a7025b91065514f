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
//! **A restart of the database is not a death.** It ends every backend at once, so
//! every process would see every other's gone. A row therefore also records the
//! server it was registered on (`server_start`, `pg_postmaster_start_time()`) and how
//! long its process asks to be waited for after a restart (`rejoin_ms`). A process
//! whose backend is gone and whose row is of another incarnation of the server (a
//! restart, or a failover to a replica) is *away*, not dead: the first beat that finds
//! it so marks when (`gone_at`) and keeps its leases at least that long; it is dead
//! once `gone_at + rejoin_ms` passes without it registering again, and its leases are
//! then given back as a handover (the work resumes without counting a recovery). A
//! backend gone on the server the row was registered on is a death, at once, as is any
//! row from before that was recorded.
//!
//! [`OwnershipEvent::Released`]: shiitake_core::store::ownership::OwnershipEvent::Released

use std::time::Duration;

use shiitake_core::store::StoreError;
use shiitake_protocol::HubNode;
use shiitake_store_sql::{db, uint};
use sqlx::postgres::{PgConnection, PgPool};

/// How the upkeep connection failed: sqlx's error, kept whole so the upkeep can tell a
/// statement refused (the connection is fine) from a connection lost.
pub(crate) type UpkeepError = sqlx::Error;

use crate::events::CHANNEL;
use crate::leases::millis;

/// SQL true when the node row `$node` names a backend that no longer exists. Without
/// the privilege to read another role's `backend_start` the pid alone decides.
macro_rules! backend_gone {
    ($node:literal) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = ",
            $node,
            ".backend_pid AND (a.backend_start IS NULL OR a.backend_start = ",
            $node,
            ".backend_start))"
        )
    };
}

/// SQL true when the node row `$node` was registered on another incarnation of the
/// server than the one answering (it restarted, or a replica took over since).
macro_rules! other_server {
    ($node:literal) => {
        concat!(
            "(",
            $node,
            ".server_start IS NOT NULL AND ",
            $node,
            ".server_start <> pg_postmaster_start_time())"
        )
    };
}

/// SQL: when the restart grace of the node row `$node` ends, counted from when a live
/// process first found it away (now, if none has yet).
macro_rules! grace_ends {
    ($node:literal) => {
        concat!(
            "(COALESCE(",
            $node,
            ".gone_at, clock_timestamp()) + COALESCE(",
            $node,
            ".rejoin_ms, 0) * interval '1 millisecond')"
        )
    };
}

/// SQL true when the node row `$node` may be of a process whose connection the server
/// cut, not of one that died: it was registered on another incarnation of the server
/// (a restart), or a live process marked it away (`gone_at`) as it came back from
/// losing its own connection at the same time.
macro_rules! maybe_cut {
    ($node:literal) => {
        concat!(
            "(",
            $crate::nodes::other_server!($node),
            " OR ",
            $node,
            ".gone_at IS NOT NULL)"
        )
    };
}

/// SQL true when the node row `$node` is waited for should its backend be gone: its
/// connection may have been cut (`maybe_cut`) and its grace has not ended.
macro_rules! waited_for {
    ($node:literal) => {
        concat!(
            "(",
            $crate::nodes::maybe_cut!($node),
            " AND ",
            $crate::nodes::grace_ends!($node),
            " > clock_timestamp())"
        )
    };
}

/// SQL true when the node row `$node` is of a process away, which may still come back:
/// its backend is gone and it is waited for (`waited_for`).
macro_rules! node_away {
    ($node:literal) => {
        concat!(
            "(",
            $crate::nodes::backend_gone!($node),
            " AND ",
            $crate::nodes::waited_for!($node),
            ")"
        )
    };
}

/// SQL true when the node row `$node` is of a process that died: its backend is gone
/// and it is not waited for. The one definition of a death.
macro_rules! node_dead {
    ($node:literal) => {
        concat!(
            "(",
            $crate::nodes::backend_gone!($node),
            " AND NOT ",
            $crate::nodes::waited_for!($node),
            ")"
        )
    };
}

/// SQL true when the node row of the lease row `$lease`'s holder meets `$condition`
/// (SQL on the node row `n`). A holder with no node row meets nothing.
macro_rules! holder_row {
    ($lease:literal, $condition:expr) => {
        concat!(
            "EXISTS (SELECT 1 FROM hub_nodes n WHERE n.agent_id = ",
            $lease,
            ".agent_id AND n.holder = ",
            $lease,
            ".holder AND ",
            $condition,
            ")"
        )
    };
}

/// SQL true when the lease row `$lease` is held by a process that died (`node_dead`).
/// A holder with no node row is left to the expiry.
macro_rules! holder_dead {
    ($lease:literal) => {
        $crate::nodes::holder_row!($lease, $crate::nodes::node_dead!("n"))
    };
}

/// SQL true when the lease row `$lease` is held by a process that did not come back
/// within its grace after the server restarted: its lease is given back as a handover.
macro_rules! holder_left_in_restart {
    ($lease:literal) => {
        $crate::nodes::holder_row!(
            $lease,
            concat!(
                $crate::nodes::other_server!("n"),
                " AND ",
                $crate::nodes::node_dead!("n")
            )
        )
    };
}

/// SQL: when the lease row `$lease` lapses unless its holder renews it: its expiry, or
/// the end of its holder's restart grace while the holder is away, whichever is later
/// (`GREATEST` passes over the NULL of a holder that is not away). A lease whose expiry
/// passed while the database was down is not free while its holder may still come back.
macro_rules! lease_lapses {
    ($lease:literal) => {
        concat!(
            "GREATEST(",
            $lease,
            ".expires_at, (SELECT ",
            $crate::nodes::grace_ends!("n"),
            " FROM hub_nodes n WHERE n.agent_id = ",
            $lease,
            ".agent_id AND n.holder = ",
            $lease,
            ".holder AND ",
            $crate::nodes::node_away!("n"),
            "))"
        )
    };
}

/// SQL true when the lease row `$lease` is held by a process whose backend is gone and
/// of which nothing says yet whether it was cut or died (no restart, not marked away).
macro_rules! holder_lost_unmarked {
    ($lease:literal) => {
        $crate::nodes::holder_row!(
            $lease,
            concat!(
                $crate::nodes::backend_gone!("n"),
                " AND NOT ",
                $crate::nodes::maybe_cut!("n")
            )
        )
    };
}

/// SQL true when the lease row `$lease` may be taken by another process, with `$cut`
/// (SQL) true while this process's own connection was cut a moment ago or is found cut
/// now: nobody holds it, it lapsed (`lease_lapses`), or its holder died (`holder_dead`)
/// and this process is not cut itself (`upkeep::OwnCut`). A process that is cut takes
/// a holder whose backend is gone for one cut with it: not even its lapsed lease is
/// free until a beat has marked it away (`gone_at`), and then its grace decides. Its
/// lease may have lapsed only because the server had no connection to spare for its
/// renewal, as it had none for this process's.
macro_rules! lease_free_unless_cut {
    ($lease:literal, $cut:expr) => {
        concat!(
            "(",
            $lease,
            ".holder IS NULL OR (",
            $crate::nodes::lease_lapses!($lease),
            " < clock_timestamp() AND NOT (",
            $cut,
            " AND ",
            $crate::nodes::holder_lost_unmarked!($lease),
            ")) OR (NOT ",
            $cut,
            " AND ",
            $crate::nodes::holder_dead!($lease),
            "))"
        )
    };
}

/// [`lease_free_unless_cut`] for a reader that is not cut: nobody holds the lease, it
/// lapsed, or its holder died.
macro_rules! lease_free {
    ($lease:literal) => {
        $crate::nodes::lease_free_unless_cut!($lease, "false")
    };
}

pub(crate) use {
    backend_gone, grace_ends, holder_dead, holder_left_in_restart, holder_lost_unmarked,
    holder_row, lease_free, lease_free_unless_cut, lease_lapses, maybe_cut, node_away, node_dead,
    other_server, waited_for,
};

/// Registers this process for the tenants `agents` (each with whether it drains) on
/// its upkeep connection `conn`, in one statement (again after a reconnect: the rows
/// then name the new backend and the server answering now), before a tenant claims
/// anything. `rejoin` is how long the others wait for this process after a restart of
/// the database before they give its Sessions away.
pub(crate) async fn register(
    conn: &mut PgConnection,
    holder: &str,
    rejoin: Duration,
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
           heartbeat_at, draining, server_start, gone_at, rejoin_ms) \
         SELECT t.agent, $1, a.pid, a.backend_start, clock_timestamp(), clock_timestamp(), \
           t.draining, pg_postmaster_start_time(), NULL, $4 \
         FROM unnest($2::text[], $3::bool[]) AS t(agent, draining) \
         CROSS JOIN (SELECT pid, backend_start FROM pg_stat_activity \
           WHERE pid = pg_backend_pid()) AS a \
         ON CONFLICT (agent_id, holder) DO UPDATE SET backend_pid = excluded.backend_pid, \
           backend_start = excluded.backend_start, heartbeat_at = excluded.heartbeat_at, \
           draining = hub_nodes.draining OR excluded.draining, \
           server_start = excluded.server_start, gone_at = NULL, \
           rejoin_ms = excluded.rejoin_ms",
    )
    .bind(holder)
    .bind(keys)
    .bind(draining)
    .bind(millis(rejoin))
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
    /// Processes found away after a restart of the database (first seen so now): their
    /// leases wait for them.
    pub(crate) away: i64,
    /// Dead processes whose rows were deleted.
    pub(crate) dead: i64,
    /// Leases of theirs given back (each announced).
    pub(crate) released: i64,
    /// Of those, the leases of processes that did not come back after a restart,
    /// given back as handovers.
    pub(crate) restart_released: i64,
    /// The tenants those leases were of, each announced (`d <agent>`) to every process.
    pub(crate) freed: Vec<String>,
}

/// One heartbeat on the upkeep connection, for every tenant of this process at once,
/// in one statement: its rows show it beat; every process newly found away after a
/// restart of the database is marked (`gone_at`) and its leases kept until its grace
/// ends; every dead process (of any tenant) is removed with its leases given back
/// (as a handover when it was one that did not come back after a restart) and
/// announced, each Session (`r`) and each tenant concerned (`d`, which every process's
/// host hears through [`PostgresHub::freed`]).
///
/// `cut_too`: this process itself lost its connection a moment ago, so a backend gone
/// now is more likely cut with it (the server ended every connection, or ran out of
/// them) than of a process that died: every such process is marked away, not dead,
/// and waited for as after a restart.
///
/// [`PostgresHub::freed`]: crate::PostgresHub::freed
pub(crate) async fn beat(
    conn: &mut PgConnection,
    holder: &str,
    cut_too: bool,
) -> Result<Beat, UpkeepError> {
    let (beaten, away, dead, released, restart_released, freed): (
        Vec<String>,
        i64,
        i64,
        i64,
        i64,
        Vec<String>,
    ) = sqlx::query_as(concat!(
        "WITH me AS ( \
           UPDATE hub_nodes SET heartbeat_at = clock_timestamp() \
           WHERE holder = $1 RETURNING agent_id \
         ), away AS ( \
           UPDATE hub_nodes m SET gone_at = clock_timestamp() \
           WHERE m.holder <> $1 AND m.gone_at IS NULL AND (",
        node_away!("m"),
        " OR ($3 AND ",
        backend_gone!("m"),
        ")) RETURNING m.agent_id, m.holder, m.rejoin_ms \
         ), kept AS ( \
           UPDATE session_leases l SET expires_at = GREATEST(l.expires_at, \
             clock_timestamp() + away.rejoin_ms * interval '1 millisecond') \
           FROM away WHERE l.agent_id = away.agent_id AND l.holder = away.holder \
           RETURNING 1 \
         ), dead AS ( \
           DELETE FROM hub_nodes d WHERE d.holder <> $1 AND NOT ($3 AND d.gone_at IS NULL) \
             AND ",
        node_dead!("d"),
        " RETURNING d.agent_id, d.holder, ",
        other_server!("d"),
        " AS restarted \
         ), released AS ( \
           UPDATE session_leases l SET holder = NULL, expires_at = clock_timestamp(), \
             handover_token = CASE WHEN dead.restarted THEN l.token ELSE l.handover_token END \
           FROM dead WHERE l.agent_id = dead.agent_id AND l.holder = dead.holder \
           RETURNING l.agent_id, l.session_id, dead.restarted \
         ), announced AS ( \
           SELECT pg_notify($2, format('r %s %s', agent_id, session_id)), restarted \
           FROM released \
         ), tenants AS ( \
           SELECT agent_id, pg_notify($2, format('d %s', agent_id)) \
           FROM (SELECT DISTINCT agent_id FROM released) AS freed \
         ) SELECT ARRAY(SELECT agent_id FROM me), \
             (SELECT count(DISTINCT holder) FROM away), \
             (SELECT count(DISTINCT holder) FROM dead), (SELECT count(*) FROM announced), \
             (SELECT count(*) FILTER (WHERE restarted) FROM announced), \
             ARRAY(SELECT agent_id FROM tenants ORDER BY agent_id)"
    ))
    .bind(holder)
    .bind(CHANNEL)
    .bind(cut_too)
    .fetch_one(&mut *conn)
    .await?;
    // The dead holders' Sessions are taken over: counted here, once, whoever claims
    // them; those of processes that did not come back after a restart are handovers.
    let restart_released_count = u64::try_from(restart_released).unwrap_or(0);
    shiitake_core::telemetry::takeovers(
        u64::try_from(released)
            .unwrap_or(0)
            .saturating_sub(restart_released_count),
    );
    shiitake_core::telemetry::restart_releases(restart_released_count);
    Ok(Beat {
        beaten,
        away,
        dead,
        released,
        restart_released,
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
