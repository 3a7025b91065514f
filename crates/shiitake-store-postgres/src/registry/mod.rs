//! The Hub's registry: tenants, their Agents, their tokens (hashed) and the web
//! page's logins, shared by every process on the database.
//!
//! Every Hub process reads the same rows (migration `0004_hub_registry.sql`), so a
//! token issued, rotated or revoked on one process holds on all of them at once, and
//! a login link minted on one is redeemed on another. Tokens, login codes and browser
//! sessions are all `<id>.<secret>` ([`Credential`]): the id is the row's key and the
//! row keeps only the SHA-256 digest of the secret, compared in constant time.
//!
//! Time is the database's clock, so processes need not agree on theirs; a test
//! injects a [`ManualClock`] instead, to reach a bound's edge without waiting.
//!
//! What it does not own: who may call what (the server's authentication), and the
//! opening and closing of Agents (the host's directory, which asks [`Registry::wanted`]).
//! A tenant's Agents keep their rows in the store's tables under `agent_id` = the
//! Agent's name.

mod credential;
mod logins;
mod tenants;
mod tokens;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shiitake_protocol::{AgentName, TenantName};
use sqlx::PgConnection;
use sqlx::postgres::PgPool;

pub use credential::Credential;
pub use logins::{MAX_CODES_PER_CALLER, MAX_SESSIONS_PER_CALLER};

/// Why a registry operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The tenant, Agent or token named is not there.
    #[error("not found: {0}")]
    NotFound(String),
    /// The tenant or Agent name is taken (Agent names are unique on a Hub).
    #[error("already exists: {0}")]
    Exists(String),
    /// Admission refused it: a bound the host set was reached.
    #[error("refused: {reason}")]
    Refused {
        /// Which bound, in words for the operator.
        reason: String,
    },
    /// The database failed or holds a row that does not decode.
    #[error("the registry's database: {0}")]
    Database(#[from] sqlx::Error),
    /// The system gave no randomness for a new secret.
    #[error("no randomness for a new secret: {0}")]
    Random(String),
}

/// A clock a test sets by hand, so expiry is tested at its edge without waiting.
/// Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock that reads `now_ms` (Unix milliseconds) until it is moved.
    pub fn new(now_ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(now_ms)))
    }

    /// What it reads, in Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// Sets it to `now_ms`.
    pub fn set(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    /// Moves it forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        // The closure always returns `Some`, so the update cannot fail.
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(by))
            })
            .unwrap_or_else(|unchanged| unchanged);
    }
}

/// The registry over the Hub's database; cloning shares the pool.
#[derive(Clone, Debug)]
pub struct Registry {
    pool: PgPool,
    clock: Option<ManualClock>,
}

/// Now in Unix milliseconds in SQL: the injected clock's value bound at `$n`, or the
/// database's clock when it is NULL.
macro_rules! now_ms {
    ($param:literal) => {
        concat!(
            "COALESCE(",
            $param,
            "::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)"
        )
    };
}
pub(crate) use now_ms;

impl Registry {
    /// The registry on `pool`, on the database's clock. The pool's database must have
    /// the crate's migrations ([`Registry::migrate`], or a [`crate::PostgresStore`]
    /// opened on it).
    pub fn new(pool: PgPool) -> Self {
        Self { pool, clock: None }
    }

    /// The registry on `pool`, reading time from `clock` instead of the database.
    pub fn with_clock(pool: PgPool, clock: ManualClock) -> Self {
        Self {
            pool,
            clock: Some(clock),
        }
    }

    /// Applies the crate's migrations to `pool`'s database: the registry's tables are
    /// the last of the store's one sequence, so a registry can be set up before any
    /// store opens (an operator's first tenant).
    pub async fn migrate(pool: &PgPool) -> Result<(), RegistryError> {
        sqlx::migrate!("./migrations/postgres")
            .run(pool)
            .await
            .map_err(|error| sqlx::Error::Migrate(Box::new(error)))?;
        Ok(())
    }

    /// The injected clock's reading for a `now_ms!` parameter; `None` for the database's.
    fn now_param(&self) -> Option<i64> {
        self.clock
            .as_ref()
            .map(|clock| i64::try_from(clock.now_ms()).unwrap_or(i64::MAX))
    }

    /// Now, once for a whole transaction.
    async fn now(&self, conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
        sqlx::query_scalar(concat!("SELECT ", now_ms!("$1")))
            .bind(self.now_param())
            .fetch_one(conn)
            .await
    }
}

/// Milliseconds of `duration` as SQL's BIGINT, saturating.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Unix milliseconds from the database as the wire's `u64` (a negative is 0).
fn unix_ms(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

/// A tenant name read back from a row.
fn tenant_name(name: String) -> Result<TenantName, sqlx::Error> {
    TenantName::new(name).map_err(|error| sqlx::Error::Decode(Box::new(error)))
}

/// An Agent name read back from a row.
fn agent_name(name: String) -> Result<AgentName, sqlx::Error> {
    AgentName::new(name).map_err(|error| sqlx::Error::Decode(Box::new(error)))
}

/// Whether `error` is a foreign key violation (the tenant named is gone).
fn is_missing_reference(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .is_some_and(|code| code == "23503")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_saturates() {
        let clock = ManualClock::new(1_000);
        let shared = clock.clone();
        shared.advance(Duration::from_millis(500));
        assert_eq!(clock.now_ms(), 1_500);
        clock.set(u64::MAX - 1);
        clock.advance(Duration::from_secs(1));
        assert_eq!(shared.now_ms(), u64::MAX);
    }

    #[test]
    fn wire_times_and_durations_saturate() {
        assert_eq!(unix_ms(-5), 0);
        assert_eq!(unix_ms(7), 7);
        assert_eq!(millis(Duration::from_millis(1_234)), 1_234);
        assert_eq!(millis(Duration::MAX), i64::MAX);
    }
}
