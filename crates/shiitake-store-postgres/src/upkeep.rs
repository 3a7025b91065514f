//! The upkeep of one process, on a connection of its own: its heartbeat (which also
//! frees the Sessions of processes that died) and the renewal of its leases.
//!
//! The connection is the process's life as the others see it (`nodes.rs`): its
//! backend is named in the process's `hub_nodes` row, registered before the store
//! claims anything. A busy pool can never delay this connection, so neither a
//! renewal nor a heartbeat waits behind the owners' reads. Each statement here may
//! wait for a row lock at most one heartbeat (`lock_timeout`): a lock held by a
//! paused process costs a retry at the next beat, not the upkeep.
//!
//! Leases are renewed every third of the lease period, in one statement; a lease
//! found gone at renewal was taken over (or freed), and its owner here is told to
//! stop ([`OwnershipEvent::Lost`]).

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Instant;

use shiitake_core::store::FencingToken;
use shiitake_core::store::ownership::OwnershipEvent;
use shiitake_protocol::SessionId;
use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::Shared;
use crate::leases::millis;
use crate::nodes::{self, UpkeepError};

/// Opens the upkeep connection and registers this process on it.
pub(crate) async fn connect(
    connect: &PgConnectOptions,
    shared: &Shared,
) -> Result<PgConnection, UpkeepError> {
    let mut conn = connect.connect().await?;
    sqlx::query("SELECT set_config('lock_timeout', $1, false)")
        .bind(format!("{}ms", millis(shared.heartbeat).max(1)))
        .execute(&mut conn)
        .await?;
    nodes::register(
        &mut conn,
        shared.agent.as_str(),
        &shared.holder,
        shared.draining(),
    )
    .await?;
    Ok(conn)
}

/// Beats and renews until the store closes, reconnecting (and registering again)
/// when the connection breaks.
pub(crate) async fn run(shared: Weak<Shared>, conn: PgConnection, options: PgConnectOptions) {
    let mut conn = Some(conn);
    let mut renew_at = Instant::now();
    loop {
        let Some((closing, heartbeat, every)) = shared.upgrade().map(|shared| {
            (
                shared.closing.clone(),
                shared.heartbeat,
                shared.lease_ttl / 3,
            )
        }) else {
            return;
        };
        let wake = (Instant::now() + heartbeat).min(renew_at);
        tokio::select! {
            biased;
            () = closing.cancelled() => return,
            () = tokio::time::sleep_until(wake.into()) => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let connection = match conn.as_mut() {
            Some(connection) => connection,
            None => match connect(&options, &shared).await {
                Ok(fresh) => {
                    tracing::info!(
                        "the upkeep connection is back; this process is registered again"
                    );
                    conn.insert(fresh)
                }
                Err(error) => {
                    tracing::warn!(%error, "could not reconnect to renew this process's leases; its Sessions lapse unless it does soon");
                    continue;
                }
            },
        };
        if Instant::now() >= renew_at {
            match renew_once(&shared, connection).await {
                Ok(()) => renew_at = Instant::now() + every,
                Err(error) => {
                    // Due still: the next beat tries again.
                    tracing::warn!(%error, "could not renew this process's leases; they lapse unless a renewal succeeds soon");
                    if broken(&error) {
                        conn = None;
                    }
                    continue;
                }
            }
        }
        match nodes::beat(connection, shared.agent.as_str(), &shared.holder).await {
            Ok(beat) => {
                if beat.dead > 0 {
                    tracing::info!(
                        processes = beat.dead,
                        sessions = beat.released,
                        "freed the Sessions of processes whose database connection is gone"
                    );
                }
                if !beat.registered {
                    tracing::warn!("this process's row in hub_nodes was gone; registering again");
                    let draining = shared.draining();
                    if let Err(error) =
                        nodes::register(connection, shared.agent.as_str(), &shared.holder, draining)
                            .await
                    {
                        tracing::warn!(%error, "could not register this process again");
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the heartbeat failed; the next one tries again");
                if broken(&error) {
                    conn = None;
                }
            }
        }
    }
}

/// Whether an error means the connection itself is gone (else only the statement
/// failed, as on a lock timeout, and the connection is kept).
fn broken(error: &UpkeepError) -> bool {
    !matches!(error, sqlx::Error::Database(_))
}

async fn renew_once(shared: &Shared, conn: &mut PgConnection) -> Result<(), UpkeepError> {
    let started = Instant::now();
    // Only the tenures an owner here still holds: a lease whose owner left (or died
    // without giving it back) lapses instead of living on.
    let (sessions, tokens) = shared.leases.tenures();
    if sessions.is_empty() {
        return Ok(());
    }
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "UPDATE session_leases SET expires_at = clock_timestamp() + $3 * interval '1 millisecond' \
         WHERE agent_id = $1 AND holder = $2 \
           AND (session_id, token) IN (SELECT * FROM unnest($4::text[], $5::bigint[])) \
         RETURNING session_id, token",
    )
    .bind(shared.agent.as_str())
    .bind(&shared.holder)
    .bind(millis(shared.lease_ttl))
    .bind(sessions)
    .bind(tokens)
    .fetch_all(&mut *conn)
    .await?;
    let mut renewed = HashMap::with_capacity(rows.len());
    for (session_id, token) in rows {
        if let (Ok(session_id), Ok(token)) = (SessionId::new(session_id), u64::try_from(token)) {
            renewed.insert(session_id, FencingToken(token));
        }
    }
    for (session_id, token) in shared.leases.keep_only(&renewed, started) {
        tracing::warn!(session = %session_id, "this process lost a lease: another process took the Session over");
        let _receivers = shared
            .events
            .send(OwnershipEvent::Lost { session_id, token });
    }
    Ok(())
}
