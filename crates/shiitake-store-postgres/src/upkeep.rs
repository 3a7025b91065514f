//! The upkeep of one process, on a connection of its own, for every tenant it has
//! open: its heartbeat (which also frees the Sessions of processes that died) and the
//! renewal of its leases, each one statement whatever the number of tenants.
//!
//! The connection is the process's life as the others see it (`nodes.rs`): its
//! backend is named in the process's `hub_nodes` row of each tenant, registered before
//! that tenant claims anything. A busy pool can never delay this connection, so neither a
//! renewal nor a heartbeat waits behind the owners' reads. Each statement here may
//! wait for a row lock at most one heartbeat (`lock_timeout`): a lock held by a
//! paused process costs a retry at the next beat, not the upkeep.
//!
//! Leases are renewed every third of the lease period, in one statement; a lease
//! found gone at renewal was taken over (or freed), and its owner here is told to
//! stop ([`OwnershipEvent::Lost`]).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use shiitake_core::store::FencingToken;
use shiitake_core::store::ownership::OwnershipEvent;
use shiitake_protocol::SessionId;
use sqlx::ConnectOptions;
use sqlx::postgres::PgConnection;
use tokio::sync::MutexGuard;

use crate::hub::{HubInner, Tenant};
use crate::leases::millis;
use crate::nodes::{self, UpkeepError};
use shiitake_core::backoff::Backoff;

use crate::outage::{Connection, Outage};

/// How long opening the upkeep connection may take before the attempt counts as
/// failed (a host that does not answer at all).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens an upkeep connection whose statements wait for a row lock at most a heartbeat.
pub(crate) async fn connect(hub: &HubInner) -> Result<PgConnection, UpkeepError> {
    let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, hub.connect.connect())
        .await
        .map_err(|_| {
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("connecting took longer than {CONNECT_TIMEOUT:?}"),
            ))
        })??;
    sqlx::query("SELECT set_config('lock_timeout', $1, false)")
        .bind(format!("{}ms", millis(hub.heartbeat).max(1)))
        .execute(&mut conn)
        .await?;
    Ok(conn)
}

/// Opens a new upkeep connection for this process and makes it the process's life:
/// first the leases its owners hold are renewed, then every open tenant (and `also`,
/// a tenant opening) is registered under the new backend. In that order, so no moment
/// shows a live process whose leases lapsed while it was away (a renewal matches
/// holder and token, whatever the expiry); a lease found gone meanwhile is told to its
/// owner ([`OwnershipEvent::Lost`]).
pub(crate) async fn reconnect(
    hub: &HubInner,
    tenants: &[Arc<Tenant>],
    also: Option<(&str, bool)>,
) -> Result<PgConnection, UpkeepError> {
    let mut conn = connect(hub).await?;
    renew_once(hub, tenants, &mut conn).await?;
    let mut agents = registrations(tenants);
    agents.extend(also);
    nodes::register(&mut conn, &hub.holder, hub.rejoin, &agents).await?;
    Ok(conn)
}

/// The open tenants as `register` takes them.
pub(crate) fn registrations(tenants: &[Arc<Tenant>]) -> Vec<(&str, bool)> {
    tenants
        .iter()
        .map(|tenant| (tenant.agent.as_str(), tenant.draining()))
        .collect()
}

/// Whether this process's own upkeep connection is lost now or came back a moment ago:
/// meanwhile a backend found gone is more likely cut with it (the server ended every
/// connection, or had none to spare) than of a process that died, so neither a beat nor
/// a claim of this process declares that death.
#[derive(Debug, Default)]
pub(crate) struct OwnCut(std::sync::Mutex<Cut>);

/// The state of [`OwnCut`].
#[derive(Debug, Default, Clone, Copy)]
enum Cut {
    #[default]
    Up,
    Down,
    Back(Instant),
}

impl OwnCut {
    /// The upkeep connection was lost.
    pub(crate) fn lost(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Cut::Down;
    }

    /// The upkeep connection is back, now.
    pub(crate) fn back(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Cut::Back(Instant::now());
    }

    /// Whether the connection is lost now, or came back less than `grace` ago.
    pub(crate) fn recent(&self, grace: Duration) -> bool {
        match *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Cut::Up => false,
            Cut::Down => true,
            Cut::Back(at) => at.elapsed() < grace,
        }
    }
}

/// What the upkeep task keeps between beats.
struct Upkeep {
    /// When the leases are renewed next.
    renew_at: Instant,
    /// When the next attempt to reconnect is due, while the connection is gone.
    retry_at: Instant,
    /// Whether the connection was there at the end of the last round.
    connected: bool,
    backoff: Backoff,
    outage: Outage,
}

/// Beats and renews for every open tenant until the hub closes, reconnecting (and
/// registering every tenant again) when the connection breaks: at once, then spaced
/// by the backoff while the database cannot be reached.
pub(crate) async fn run(hub: Weak<HubInner>) {
    let now = Instant::now();
    let mut upkeep = Upkeep {
        renew_at: now,
        retry_at: now,
        connected: true,
        backoff: Outage::backoff(),
        outage: Outage::new(Connection::Upkeep),
    };
    loop {
        let Some((closing, heartbeat)) = hub
            .upgrade()
            .map(|hub| (hub.closing.clone(), hub.heartbeat))
        else {
            return;
        };
        let wake = if upkeep.connected {
            (Instant::now() + heartbeat).min(upkeep.renew_at)
        } else {
            // Without a connection: the next attempt, not the next beat (a renewal
            // overdue meanwhile must not wake the task again and again).
            upkeep.retry_at
        };
        tokio::select! {
            biased;
            () = closing.cancelled() => return,
            () = tokio::time::sleep_until(wake.into()) => {}
        }
        let Some(hub) = hub.upgrade() else {
            return;
        };
        let mut conn = hub.upkeep.lock().await;
        let stepped = tokio::select! {
            biased;
            () = closing.cancelled() => false,
            () = step(&hub, &mut conn, &mut upkeep) => true,
        };
        if !stepped {
            // Perhaps mid-statement: dropped, not closed politely.
            drop(conn.take());
            return;
        }
        upkeep.connected = conn.is_some();
    }
}

/// One round: reconnect if the connection is gone, renew when due, beat.
async fn step(
    hub: &HubInner,
    conn: &mut MutexGuard<'_, Option<PgConnection>>,
    upkeep: &mut Upkeep,
) {
    let tenants = hub.tenants();
    if conn.is_none() {
        if upkeep.connected {
            // Lost elsewhere (a tenant opening found it broken and could not replace it).
            hub.own_cut.lost();
            upkeep.retry_at = Instant::now();
        }
        if Instant::now() < upkeep.retry_at {
            return;
        }
        match reconnect(hub, &tenants, None).await {
            Ok(fresh) => {
                **conn = Some(fresh);
                upkeep.backoff.reset();
                upkeep.outage.back();
                hub.own_cut.back();
                // Renewed with the reconnection.
                upkeep.renew_at = Instant::now() + hub.lease_ttl / 3;
            }
            Err(error) => {
                upkeep.outage.failed(&error);
                upkeep.retry_at = Instant::now() + upkeep.backoff.next_delay();
                return;
            }
        }
    }
    let Some(connection) = conn.as_mut() else {
        return;
    };
    if Instant::now() >= upkeep.renew_at {
        match renew_once(hub, &tenants, connection).await {
            Ok(()) => upkeep.renew_at = Instant::now() + hub.lease_ttl / 3,
            Err(error) if broken(&error) => {
                upkeep.outage.failed(&error);
                **conn = None;
                hub.own_cut.lost();
                upkeep.retry_at = Instant::now();
                return;
            }
            Err(error) => {
                // The statement failed, not the connection (a lock held too long):
                // again at the next beat, well before the lease lapses.
                tracing::warn!(%error, "could not renew this process's leases; trying again at the next beat");
                upkeep.renew_at = Instant::now() + hub.heartbeat;
                return;
            }
        }
    }
    // Just back from losing its own connection: the others' may have been cut with it.
    let cut_too = hub.own_cut.recent(cut_grace(hub));
    match nodes::beat(connection, &hub.holder, cut_too).await {
        Ok(beat) => {
            report(&beat);
            let missing: Vec<Arc<Tenant>> = tenants
                .into_iter()
                .filter(|tenant| !beat.beaten.iter().any(|a| a == tenant.agent.as_str()))
                .collect();
            if !missing.is_empty() {
                tracing::warn!(
                    tenants = missing.len(),
                    "this process's rows in hub_nodes were gone; registering again"
                );
                if let Err(error) = nodes::register(
                    connection,
                    &hub.holder,
                    hub.rejoin,
                    &registrations(&missing),
                )
                .await
                {
                    tracing::warn!(%error, "could not register this process again");
                }
            }
        }
        Err(error) if broken(&error) => {
            upkeep.outage.failed(&error);
            **conn = None;
            hub.own_cut.lost();
            upkeep.retry_at = Instant::now();
        }
        Err(error) => {
            tracing::warn!(%error, "the heartbeat failed; the next one tries again");
        }
    }
}

/// How long after this process's own reconnection a backend found gone is taken for
/// one cut with it rather than a death: as long as another live process may take to
/// reconnect (twice the backoff's cap) and two heartbeats.
pub(crate) fn cut_grace(hub: &HubInner) -> Duration {
    crate::outage::CAP * 2 + hub.heartbeat * 2
}

/// Logs what a beat did to other processes.
fn report(beat: &nodes::Beat) {
    if beat.away > 0 {
        tracing::info!(
            processes = beat.away,
            "processes lost their database connection as this one did (a restart, or the server ending connections); their Sessions wait for them to reconnect"
        );
    }
    if beat.dead > 0 {
        tracing::info!(
            processes = beat.dead,
            sessions = beat.released,
            handed_over = beat.restart_released,
            tenants = beat.freed.len(),
            "freed the Sessions of processes whose database connection is gone"
        );
    }
}

/// Whether an error means the connection itself is gone (else only the statement
/// failed, as on a lock timeout, and the connection is kept). A backend ended by the
/// server (`pg_terminate_backend`, a shutdown: SQLSTATE `57P…`) or a connection
/// exception (`08…`) answers its last statement with a database error, and is gone too.
pub(crate) fn broken(error: &UpkeepError) -> bool {
    match error {
        sqlx::Error::Database(error) => error
            .code()
            .is_some_and(|code| code.starts_with("57P") || code.starts_with("08")),
        sqlx::Error::RowNotFound => false,
        _ => true,
    }
}

/// Renews, in one statement, every lease an owner of any open tenant still holds, and
/// tells each tenant's owners of the leases found gone.
async fn renew_once(
    hub: &HubInner,
    tenants: &[Arc<Tenant>],
    conn: &mut PgConnection,
) -> Result<(), UpkeepError> {
    let started = Instant::now();
    // Only the tenures an owner here still holds: a lease whose owner left (or died
    // without giving it back) lapses instead of living on.
    let (mut agents, mut sessions, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
    for tenant in tenants {
        let (held, held_tokens) = tenant.leases.tenures();
        agents.extend(held.iter().map(|_| tenant.agent.as_str().to_owned()));
        sessions.extend(held);
        tokens.extend(held_tokens);
    }
    if sessions.is_empty() {
        return Ok(());
    }
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "UPDATE session_leases SET expires_at = clock_timestamp() + $2 * interval '1 millisecond' \
         WHERE holder = $1 \
           AND (agent_id, session_id, token) IN \
             (SELECT * FROM unnest($3::text[], $4::text[], $5::bigint[])) \
         RETURNING agent_id, session_id, token",
    )
    .bind(&hub.holder)
    .bind(millis(hub.lease_ttl))
    .bind(agents)
    .bind(sessions)
    .bind(tokens)
    .fetch_all(&mut *conn)
    .await?;
    let mut renewed: HashMap<String, HashMap<SessionId, FencingToken>> = HashMap::new();
    for (agent, session_id, token) in rows {
        if let (Ok(session_id), Ok(token)) = (SessionId::new(session_id), u64::try_from(token)) {
            renewed
                .entry(agent)
                .or_default()
                .insert(session_id, FencingToken(token));
        }
    }
    let none = HashMap::new();
    for tenant in tenants {
        let renewed = renewed.get(tenant.agent.as_str()).unwrap_or(&none);
        for (session_id, token) in tenant.leases.keep_only(renewed, started) {
            tracing::warn!(agent = %tenant.agent, session = %session_id, "this process lost a lease: another process took the Session over");
            let _receivers = tenant
                .events
                .send(OwnershipEvent::Lost { session_id, token });
        }
    }
    Ok(())
}
