//! Leases, fencing tokens and forwarded requests: core's [`Ownership`] on PostgreSQL.
//!
//! A lease row names its holder (a process), a token and an expiry on the
//! database's clock. Taking a lease always increments the token, also when the
//! same process takes it again, so a token names one owner's tenure; rows are
//! never deleted while their Session lives (a released lease keeps its token), so
//! a token is never reused. This process renews all its leases every third of the
//! lease period in one statement; a lease it finds gone at renewal was taken over,
//! and its owner here is told to stop ([`OwnershipEvent::Lost`]).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use shiitake_core::store::ownership::{
    AgentStateLock, Claim, ForwardId, ForwardedRequest, Orphans, OwnershipEvent,
};
use shiitake_core::store::{FencingToken, Ownership, StoreError};
use shiitake_protocol::SessionId;
use shiitake_store_sql::{db, int, uint};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection, Postgres};
use tokio::sync::broadcast;

use crate::events::{CHANNEL, answered_payload, forwarded_payload, released_payload};
use crate::{PostgresStore, Shared};

/// The leases this process holds, as it believes: Session → (token, when taken).
#[derive(Default)]
pub(crate) struct Held(Mutex<HashMap<SessionId, (FencingToken, Instant)>>);

impl Held {
    fn set(&self, session_id: &SessionId, token: Option<FencingToken>) {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match token {
            Some(token) => held.insert(session_id.clone(), (token, Instant::now())),
            None => held.remove(session_id),
        };
    }

    /// The tenures to renew: (Session ids, tokens).
    fn tenures(&self) -> (Vec<String>, Vec<i64>) {
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        held.iter()
            .map(|(session_id, (token, _))| (session_id.as_str().to_owned(), int(token.0)))
            .unzip()
    }

    /// Forgets every lease taken before `since` that is not in `renewed`, and
    /// returns those tenures. A lease taken after the renewal started may simply
    /// not have been there to renew.
    fn keep_only(
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
        for (session_id, _) in &lost {
            held.remove(session_id);
        }
        lost
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

/// Milliseconds of a duration, for SQL intervals.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Renews this process's leases until the store closes, on a connection of its
/// own, so a busy pool never delays a renewal past the expiry.
pub(crate) async fn renew(shared: Weak<Shared>, connect: PgConnectOptions) {
    let mut conn: Option<PgConnection> = None;
    loop {
        let Some((closing, every)) = shared
            .upgrade()
            .map(|shared| (shared.closing.clone(), shared.lease_ttl / 3))
        else {
            return;
        };
        tokio::select! {
            () = closing.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if conn.is_none() {
            match connect.connect().await {
                Ok(fresh) => conn = Some(fresh),
                Err(error) => {
                    tracing::warn!(%error, "could not connect to renew this process's leases");
                    continue;
                }
            }
        }
        let Some(connection) = conn.as_mut() else {
            continue;
        };
        if let Err(error) = renew_once(&shared, connection).await {
            tracing::warn!(%error, "could not renew this process's leases; they lapse unless the next renewal succeeds");
            // Start the next renewal on a fresh connection, in case this one broke.
            conn = None;
        }
    }
}

async fn renew_once(shared: &Shared, conn: &mut PgConnection) -> Result<(), StoreError> {
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
    .await
    .map_err(db)?;
    let mut renewed = HashMap::with_capacity(rows.len());
    for (session_id, token) in rows {
        if let Ok(session_id) = SessionId::new(session_id) {
            renewed.insert(session_id, FencingToken(uint(token, "lease token")?));
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

#[async_trait]
impl Ownership for PostgresStore {
    fn lease_ttl(&self) -> Duration {
        self.shared.lease_ttl
    }

    async fn claim(&self, session_id: &SessionId) -> Result<Claim, StoreError> {
        let shared = &self.shared;
        let (present, token): (i64, Option<i64>) = sqlx::query_as(
            "WITH present AS ( \
               SELECT 1 FROM sessions WHERE agent_id = $1 AND id = $2 \
             ), claimed AS ( \
               INSERT INTO session_leases (agent_id, session_id, holder, token, expires_at) \
               SELECT $1, $2, $3, 1, clock_timestamp() + $4 * interval '1 millisecond' FROM present \
               ON CONFLICT (agent_id, session_id) DO UPDATE \
                 SET holder = excluded.holder, token = session_leases.token + 1, \
                     expires_at = excluded.expires_at \
                 WHERE session_leases.holder IS NULL OR session_leases.holder = excluded.holder \
                    OR session_leases.expires_at < clock_timestamp() \
               RETURNING token \
             ) SELECT (SELECT count(*) FROM present), (SELECT token FROM claimed)",
        )
        .bind(shared.agent.as_str())
        .bind(session_id.as_str())
        .bind(&shared.holder)
        .bind(millis(shared.lease_ttl))
        .fetch_one(&shared.pool)
        .await
        .map_err(db)?;
        if present == 0 {
            return Ok(Claim::Missing);
        }
        match token {
            Some(token) => {
                let token = FencingToken(uint(token, "lease token")?);
                shared.leases.set(session_id, Some(token));
                Ok(Claim::Held(token))
            }
            None => Ok(Claim::Elsewhere),
        }
    }

    async fn release(&self, session_id: &SessionId, token: FencingToken) -> Result<(), StoreError> {
        let shared = &self.shared;
        shared.leases.set(session_id, None);
        let mut tx = shared.pool.begin().await.map_err(db)?;
        let released = sqlx::query(
            "UPDATE session_leases SET holder = NULL, expires_at = clock_timestamp() \
             WHERE agent_id = $1 AND session_id = $2 AND holder = $3 AND token = $4",
        )
        .bind(shared.agent.as_str())
        .bind(session_id.as_str())
        .bind(&shared.holder)
        .bind(int(token.0))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        if released.rows_affected() == 1 {
            let payload = released_payload(shared.agent.as_str(), session_id.as_str());
            notify(&mut tx, payload).await?;
        }
        tx.commit().await.map_err(db)
    }

    async fn orphans(&self) -> Result<Orphans, StoreError> {
        let shared = &self.shared;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT s.id FROM sessions s LEFT JOIN session_leases l \
               ON l.agent_id = s.agent_id AND l.session_id = s.id \
             WHERE s.agent_id = $1 AND s.open_from IS NOT NULL \
               AND (l.session_id IS NULL OR l.holder IS NULL OR l.expires_at < clock_timestamp()) \
             ORDER BY s.id LIMIT 256",
        )
        .bind(shared.agent.as_str())
        .fetch_all(&shared.pool)
        .await
        .map_err(db)?;
        let next_lapse: Option<f64> = sqlx::query_scalar(
            "SELECT EXTRACT(EPOCH FROM (min(l.expires_at) - clock_timestamp()))::float8 * 1000 \
             FROM session_leases l JOIN sessions s ON s.agent_id = l.agent_id AND s.id = l.session_id \
             WHERE l.agent_id = $1 AND l.holder IS NOT NULL AND l.holder <> $2 \
               AND l.expires_at >= clock_timestamp() AND s.open_from IS NOT NULL",
        )
        .bind(shared.agent.as_str())
        .bind(&shared.holder)
        .fetch_one(&shared.pool)
        .await
        .map_err(db)?;
        Ok(Orphans {
            sessions: ids
                .into_iter()
                .filter_map(|id| SessionId::new(id).ok())
                .collect(),
            next_lapse: next_lapse
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map(|ms| Duration::from_secs_f64(ms / 1000.0)),
        })
    }

    async fn forward(
        &self,
        session_id: &SessionId,
        request: &Value,
    ) -> Result<ForwardId, StoreError> {
        let shared = &self.shared;
        let mut tx = shared.pool.begin().await.map_err(db)?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO forwarded_requests (agent_id, session_id, request) VALUES ($1, $2, $3) \
             RETURNING id",
        )
        .bind(shared.agent.as_str())
        .bind(session_id.as_str())
        .bind(request.to_string())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        notify(
            &mut tx,
            forwarded_payload(shared.agent.as_str(), session_id.as_str()),
        )
        .await?;
        tx.commit().await.map_err(db)?;
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
        self.shared.events.subscribe()
    }

    async fn lock_agent_state(&self) -> Result<AgentStateLock, StoreError> {
        let key = agent_lock_key(self.shared.agent.as_str());
        let mut conn = self.shared.pool.acquire().await.map_err(db)?;
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
