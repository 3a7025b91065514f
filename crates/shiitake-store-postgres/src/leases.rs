//! Leases, fencing tokens and forwarded requests: core's [`Ownership`] on PostgreSQL.
//!
//! A lease row names its holder (a process), a token and an expiry on the
//! database's clock. Taking a lease always increments the token, also when the
//! same process takes it again, so a token names one owner's tenure; rows are
//! never deleted while their Session lives (a released lease keeps its token), so
//! a token is never reused. A lease may be taken when it is free, lapsed, ours, or
//! held by a process that died (`nodes.rs`); `upkeep.rs` renews this process's
//! leases and tells an owner here whose lease was taken over to stop
//! ([`OwnershipEvent::Lost`]). A lease given back by a draining process keeps the
//! token of the tenure that handed it over, which the next claim reports as
//! [`Lease::handed_over`].

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::Value;
use shiitake_core::store::ownership::{
    AgentStateLock, Claim, ForwardId, ForwardedRequest, Lease, Orphans, OwnershipEvent, Release,
};
use shiitake_core::store::{FencingToken, Ownership, StoreError};
use shiitake_protocol::SessionId;
use shiitake_store_sql::{db, int, uint};
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Postgres};
use tokio::sync::broadcast;

use crate::PostgresStore;
use crate::events::{CHANNEL, answered_payload, forwarded_payload, released_payload};
use crate::nodes::{
    backend_gone, holder_left_in_restart, holder_row, lease_free, lease_free_unless_cut,
    lease_lapses,
};

/// What a claim's statement answers: whether the Session exists, the token taken (if
/// any), whether it was handed over, when the lease lapses (ms), whether another process
/// held it, whether that one did not come back within its grace after a restart, and
/// whether the lease is another's whose backend is gone.
type ClaimRow = (
    i64,
    Option<i64>,
    Option<bool>,
    Option<f64>,
    Option<bool>,
    Option<bool>,
    Option<bool>,
);

/// The leases this process holds, as it believes: Session → (token, when taken).
#[derive(Default)]
pub(crate) struct Held(Mutex<HashMap<SessionId, (FencingToken, Instant)>>);

impl Held {
    pub(crate) fn set(&self, session_id: &SessionId, token: Option<FencingToken>) {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let before = held.len();
        match token {
            Some(token) => held.insert(session_id.clone(), (token, Instant::now())),
            None => held.remove(session_id),
        };
        leases_changed(before, held.len());
    }

    /// The tenures to renew: (Session ids, tokens).
    pub(crate) fn tenures(&self) -> (Vec<String>, Vec<i64>) {
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        held.iter()
            .map(|(session_id, (token, _))| (session_id.as_str().to_owned(), int(token.0)))
            .unzip()
    }

    /// Forgets every lease taken before `since` that is not in `renewed`, and
    /// returns those tenures. A lease taken after the renewal started may simply
    /// not have been there to renew.
    pub(crate) fn keep_only(
        &self,
        renewed: &HashMap<SessionId, FencingToken>,
        since: Instant,
    ) -> Vec<(SessionId, FencingToken)> {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let lost: Vec<(SessionId, FencingToken)> = held
            .iter()
            .filter(|(session_id, (token, taken))| {
                *taken < since && renewed.get(*session_id) != Some(token)
            })
            .map(|(session_id, (token, _))| (session_id.clone(), *token))
            .collect();
        let before = held.len();
        for (session_id, _) in &lost {
            held.remove(session_id);
        }
        leases_changed(before, held.len());
        lost
    }
}

/// Moves the process's gauge of held leases by one map's change in size.
fn leases_changed(before: usize, after: usize) {
    if after > before {
        shiitake_core::telemetry::leases_held(after - before, true);
    } else if before > after {
        shiitake_core::telemetry::leases_held(before - after, false);
    }
}

/// Announces `payload` when, and only if, the transaction `conn` is in commits.
async fn notify(conn: &mut PgConnection, payload: String) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(payload)
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(())
}

/// A number of milliseconds from SQL as a duration; `None` for none, a negative or a
/// non-finite value.
fn lapse(ms: Option<f64>) -> Option<Duration> {
    ms.filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
}

/// Now in Unix milliseconds, the clock timers are due on.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Milliseconds of a duration, for SQL intervals.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl PostgresStore {
    /// One claim (see [`Ownership::claim`]). A lease whose holder's backend is gone is
    /// taken only when `confirmed`: the first claim that finds it so leaves it, and
    /// [`claim`](Self::claim) asks again after [`CONFIRM_GONE`].
    async fn claim_once(
        &self,
        session_id: &SessionId,
        confirmed: bool,
    ) -> Result<(Claim, HolderGone), StoreError> {
        let shared = &self.shared;
        if shared.draining() {
            // Leaving: the Sessions go to the processes that stay.
            let present: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM sessions WHERE agent_id = $1 AND id = $2)",
            )
            .bind(shared.agent.as_str())
            .bind(session_id.as_str())
            .fetch_one(&shared.pool)
            .await
            .map_err(db)?;
            let claim = if present {
                Claim::Elsewhere {
                    lapses_in: shared.lease_ttl,
                }
            } else {
                Claim::Missing
            };
            return Ok((claim, HolderGone(false)));
        }
        let (present, token, handed_over, lapses_ms, held_by_another, left_in_restart, gone): ClaimRow =
            sqlx::query_as(concat!(
                "WITH present AS ( \
                   SELECT 1 FROM sessions WHERE agent_id = $1 AND id = $2 \
                 ), prior AS ( \
                   SELECT l.holder, ",
                holder_left_in_restart!("l"),
                " AS left_in_restart \
                   FROM session_leases l WHERE l.agent_id = $1 AND l.session_id = $2 \
                 ), claimed AS ( \
                   INSERT INTO session_leases (agent_id, session_id, holder, token, expires_at) \
                   SELECT $1, $2, $3, 1, clock_timestamp() + $4 * interval '1 millisecond' \
                   FROM present \
                   ON CONFLICT (agent_id, session_id) DO UPDATE \
                     SET holder = excluded.holder, token = session_leases.token + 1, \
                         expires_at = excluded.expires_at \
                     WHERE session_leases.holder = excluded.holder OR ",
                lease_free_unless_cut!(
                    "session_leases",
                    concat!(
                        "($5 OR NOT $6 OR EXISTS (SELECT 1 FROM hub_nodes me WHERE me.agent_id = $1 \
                         AND me.holder = $3 AND ",
                        backend_gone!("me"),
                        "))"
                    )
                ),
                " RETURNING token, \
                     handover_token IS NOT NULL AND handover_token + 1 = token AS handed_over \
                 ) SELECT (SELECT count(*) FROM present), (SELECT token FROM claimed), \
                     (SELECT handed_over FROM claimed), \
                     (SELECT EXTRACT(EPOCH FROM (",
                lease_lapses!("l"),
                " - clock_timestamp()))::float8 * 1000 \
                      FROM session_leases l WHERE l.agent_id = $1 AND l.session_id = $2), \
                     (SELECT holder IS NOT NULL AND holder <> $3 FROM prior), \
                     (SELECT left_in_restart AND holder <> $3 FROM prior), \
                     (SELECT l.holder <> $3 AND ",
                holder_row!("l", backend_gone!("n")),
                " FROM session_leases l WHERE l.agent_id = $1 AND l.session_id = $2)"
            ))
            .bind(shared.agent.as_str())
            .bind(session_id.as_str())
            .bind(&shared.holder)
            .bind(millis(shared.lease_ttl))
            .bind(
                shared
                    .hub
                    .own_cut
                    .recent(crate::upkeep::cut_grace(&shared.hub)),
            )
            .bind(confirmed)
            .fetch_one(&shared.pool)
            .await
            .map_err(db)?;
        if present == 0 {
            return Ok((Claim::Missing, HolderGone(false)));
        }
        let gone = HolderGone(gone == Some(true));
        let claim = match token {
            Some(token) => {
                let token = FencingToken(uint(token, "lease token")?);
                shared.tenant.leases.set(session_id, Some(token));
                // A holder that did not come back after a restart of the database is
                // handed over from, as a drain would have: the work resumes without
                // counting a recovery.
                let left_in_restart = left_in_restart == Some(true);
                let handed_over = handed_over.unwrap_or(false) || left_in_restart;
                if left_in_restart {
                    shiitake_core::telemetry::restart_releases(1);
                } else if held_by_another == Some(true) && !handed_over {
                    // Another process held it and neither gave it back nor handed it
                    // over: it lapsed, or its holder died.
                    shiitake_core::telemetry::takeovers(1);
                }
                Claim::Held(Lease { token, handed_over })
            }
            None => Claim::Elsewhere {
                lapses_in: lapse(lapses_ms).unwrap_or(Duration::ZERO),
            },
        };
        Ok((claim, gone))
    }

    /// A claim, confirmed once when the lease's holder was found with its backend gone.
    async fn claim_confirming(&self, session_id: &SessionId) -> Result<Claim, StoreError> {
        let (claim, gone) = self.claim_once(session_id, false).await?;
        if !(gone.0 && matches!(claim, Claim::Elsewhere { .. })) {
            return Ok(claim);
        }
        tokio::time::sleep(CONFIRM_GONE).await;
        Ok(self.claim_once(session_id, true).await?.0)
    }
}

/// Whether a claim found the lease held by another process whose backend is gone.
struct HolderGone(bool);

/// How long a claim that found a holder's backend gone waits before it looks again and
/// takes the lease. The server may be ending every connection at once (an operator's
/// `pg_terminate_backend`, a connection limit): backends end one by one, so a claim can
/// run in the instant the holder's is gone and the claimer's own not yet. By the second
/// look the claimer's own backend is found gone too (it then takes the holder for cut
/// with it, `nodes.rs`), unless the holder really died. A kill -9 is taken over this
/// much later.
const CONFIRM_GONE: Duration = Duration::from_millis(200);

#[async_trait]
impl Ownership for PostgresStore {
    fn lease_ttl(&self) -> Duration {
        self.shared.lease_ttl
    }

    async fn claim(&self, session_id: &SessionId) -> Result<Claim, StoreError> {
        match self.claim_confirming(session_id).await {
            // Two first claims of a Session raced to insert its lease row: the loser
            // trips the token index (only the key is ON CONFLICT's arbiter). The row
            // is there now, so the claim runs again as an update.
            Err(error) if error.is_unique_violation() => self.claim_confirming(session_id).await,
            claimed => claimed,
        }
    }

    async fn release(
        &self,
        session_id: &SessionId,
        token: FencingToken,
        why: Release,
    ) -> Result<(), StoreError> {
        let shared = &self.shared;
        shared.tenant.leases.set(session_id, None);
        sqlx::query(
            "WITH released AS ( \
               UPDATE session_leases SET holder = NULL, expires_at = clock_timestamp(), \
                 handover_token = CASE WHEN $5 THEN token ELSE handover_token END \
               WHERE agent_id = $1 AND session_id = $2 AND holder = $3 AND token = $4 \
               RETURNING session_id \
             ) SELECT pg_notify($6, $7) FROM released",
        )
        .bind(shared.agent.as_str())
        .bind(session_id.as_str())
        .bind(&shared.holder)
        .bind(int(token.0))
        .bind(why == Release::Handover)
        .bind(CHANNEL)
        .bind(released_payload(shared.agent.as_str(), session_id.as_str()))
        .execute(&shared.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn drain(&self) -> Result<(), StoreError> {
        self.shared
            .tenant
            .draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        crate::nodes::mark_draining(
            &self.shared.pool,
            self.shared.agent.as_str(),
            &self.shared.holder,
        )
        .await
    }

    async fn orphans(&self) -> Result<Orphans, StoreError> {
        let shared = &self.shared;
        // A Session has something to do when it has open work, a request forwarded to
        // an owner that is not there, or a timer due; it is an orphan when nobody
        // alive holds its lease.
        let (ids, next_lapse): (Vec<String>, Option<f64>) = sqlx::query_as(concat!(
            "WITH wanted AS ( \
               SELECT id AS session_id FROM sessions WHERE agent_id = $1 AND open_from IS NOT NULL \
               UNION SELECT f.session_id FROM forwarded_requests f JOIN sessions s \
                 ON s.agent_id = f.agent_id AND s.id = f.session_id \
                 WHERE f.agent_id = $1 AND f.answer IS NULL \
               UNION SELECT t.session_id FROM timers t \
                 WHERE t.agent_id = $1 AND t.session_id IS NOT NULL AND t.due_at <= $3 \
             ), candidates AS ( \
               SELECT w.session_id, l.holder, ",
            lease_lapses!("l"),
            " AS lapses, ",
            lease_free!("l"),
            " AS free \
               FROM wanted w LEFT JOIN session_leases l \
                 ON l.agent_id = $1 AND l.session_id = w.session_id \
             ) SELECT ARRAY(SELECT session_id FROM candidates WHERE free \
                 ORDER BY session_id LIMIT 256), \
               (SELECT EXTRACT(EPOCH FROM (min(lapses) - clock_timestamp()))::float8 * 1000 \
                FROM candidates WHERE NOT free AND holder <> $2)"
        ))
        .bind(shared.agent.as_str())
        .bind(&shared.holder)
        .bind(int(now_ms()))
        .fetch_one(&shared.pool)
        .await
        .map_err(db)?;
        Ok(Orphans {
            sessions: ids
                .into_iter()
                .filter_map(|id| SessionId::new(id).ok())
                .collect(),
            next_lapse: lapse(next_lapse),
        })
    }

    async fn forward(
        &self,
        session_id: &SessionId,
        request: &Value,
    ) -> Result<ForwardId, StoreError> {
        let shared = &self.shared;
        let agent = shared.agent.as_str();
        // The owner is woken; and when nobody alive holds the lease (its owner left
        // while this process could not take it: this process drains), every process is
        // told the Session is free, so one takes it and serves the request.
        let (id, _woken, _freed): (i64, i64, i64) = sqlx::query_as(concat!(
            "WITH inserted AS ( \
               INSERT INTO forwarded_requests (agent_id, session_id, request) \
               VALUES ($1, $2, $3) RETURNING id \
             ), woken AS ( \
               SELECT pg_notify($4, $5) \
             ), freed AS ( \
               SELECT pg_notify($4, $6) WHERE NOT EXISTS ( \
                 SELECT 1 FROM session_leases l WHERE l.agent_id = $1 AND l.session_id = $2 \
                   AND NOT ",
            lease_free!("l"),
            ")) SELECT (SELECT id FROM inserted), (SELECT count(*) FROM woken), \
               (SELECT count(*) FROM freed)"
        ))
        .bind(agent)
        .bind(session_id.as_str())
        .bind(request.to_string())
        .bind(CHANNEL)
        .bind(forwarded_payload(agent, session_id.as_str()))
        .bind(released_payload(agent, session_id.as_str()))
        .fetch_one(&shared.pool)
        .await
        .map_err(db)?;
        Ok(ForwardId(id))
    }

    async fn forwarded(
        &self,
        session_id: &SessionId,
        after: ForwardId,
    ) -> Result<Vec<ForwardedRequest>, StoreError> {
        let shared = &self.shared;
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT id, request FROM forwarded_requests \
             WHERE agent_id = $1 AND session_id = $2 AND answer IS NULL AND id > $3 ORDER BY id",
        )
        .bind(shared.agent.as_str())
        .bind(session_id.as_str())
        .bind(after.0)
        .fetch_all(&shared.pool)
        .await
        .map_err(db)?;
        rows.into_iter()
            .map(|(id, request)| {
                serde_json::from_str(&request)
                    .map(|request| ForwardedRequest {
                        id: ForwardId(id),
                        request,
                    })
                    .map_err(|error| StoreError::Corrupt(format!("forwarded request: {error}")))
            })
            .collect()
    }

    async fn answer(&self, id: ForwardId, answer: &Value) -> Result<(), StoreError> {
        let shared = &self.shared;
        let mut tx = shared.pool.begin().await.map_err(db)?;
        sqlx::query(
            "UPDATE forwarded_requests SET answer = $3 WHERE agent_id = $1 AND id = $2 \
             AND answer IS NULL",
        )
        .bind(shared.agent.as_str())
        .bind(id.0)
        .bind(answer.to_string())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        notify(&mut tx, answered_payload(shared.agent.as_str(), id)).await?;
        tx.commit().await.map_err(db)
    }

    async fn take_answer(&self, id: ForwardId) -> Result<Option<Value>, StoreError> {
        let shared = &self.shared;
        let answer: Option<String> = sqlx::query_scalar(
            "DELETE FROM forwarded_requests WHERE agent_id = $1 AND id = $2 AND answer IS NOT NULL \
             RETURNING answer",
        )
        .bind(shared.agent.as_str())
        .bind(id.0)
        .fetch_optional(&shared.pool)
        .await
        .map_err(db)?;
        answer
            .map(|answer| {
                serde_json::from_str(&answer)
                    .map_err(|error| StoreError::Corrupt(format!("forwarded answer: {error}")))
            })
            .transpose()
    }

    async fn withdraw(&self, id: ForwardId) -> Result<bool, StoreError> {
        let shared = &self.shared;
        let withdrawn = sqlx::query(
            "DELETE FROM forwarded_requests WHERE agent_id = $1 AND id = $2 AND answer IS NULL",
        )
        .bind(shared.agent.as_str())
        .bind(id.0)
        .execute(&shared.pool)
        .await
        .map_err(db)?;
        Ok(withdrawn.rows_affected() == 1)
    }

    fn events(&self) -> broadcast::Receiver<OwnershipEvent> {
        self.shared.tenant.events.subscribe()
    }

    async fn lock_agent_state(&self) -> Result<AgentStateLock, StoreError> {
        let key = agent_lock_key(self.shared.agent.as_str());
        // On a connection of its own pool: the holder reads through the main one.
        let mut conn = self.shared.hub.locks.acquire().await.map_err(db)?;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
        Ok(AgentStateLock::new(AdvisoryLock {
            conn: Some(conn),
            key,
        }))
    }
}

/// The advisory lock key of one Agent's state: FNV-1a of a fixed prefix and the key.
fn agent_lock_key(agent: &str) -> i64 {
    let hash = format!("shiitake-agent-state:{agent}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// A session-level advisory lock on one pooled connection, unlocked when dropped.
/// If unlocking fails the connection is closed instead, which also releases it.
struct AdvisoryLock {
    conn: Option<PoolConnection<Postgres>>,
    key: i64,
}

impl Drop for AdvisoryLock {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let key = self.key;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let unlocked: Result<bool, _> =
                        sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
                            .bind(key)
                            .fetch_one(&mut *conn)
                            .await;
                    if !matches!(unlocked, Ok(true))
                        && let Err(error) = conn.detach().close().await
                    {
                        tracing::trace!(%error, "closing the connection of an advisory lock");
                    }
                });
            }
            // No runtime to unlock on: dropping the raw connection ends its session.
            Err(_) => drop(conn.detach()),
        }
    }
}
