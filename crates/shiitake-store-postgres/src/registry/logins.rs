//! The web page's logins in the database: one-time login codes and the browser
//! sessions they open, valid on every process and across restarts.
//!
//! The rules are those of the in-memory `shiitake-server` `web_login.rs`: a code
//! works once and only before it expires, a wrong secret neither works nor spends
//! it, a session lasts its lifetime unless ended, and each caller (a tenant, or the
//! operator) keeps at most [`MAX_CODES_PER_CALLER`] unused codes and
//! [`MAX_SESSIONS_PER_CALLER`] sessions: one more drops the expired ones, then those
//! closest to expiry. The bound is kept in the transaction of the insert, under a
//! per-caller advisory lock, so processes minting at once cannot pass it.
//!
//! Lock order, so nothing here deadlocks with itself: a redemption holds its code's
//! row, then the caller's session lock; ending a caller's logins deletes its codes
//! before it takes that lock.

use std::time::Duration;

use shiitake_protocol::TenantName;
use sqlx::PgConnection;

use super::credential::Credential;
use super::{Registry, RegistryError, is_missing_reference, millis, now_ms, tenant_name};

/// Most unused login codes one caller keeps; minting one more forgets the oldest.
pub const MAX_CODES_PER_CALLER: usize = 8;
/// Most browser sessions one caller keeps; one more login ends the one closest to expiry.
pub const MAX_SESSIONS_PER_CALLER: usize = 32;

/// The two kinds of login row, which follow the same rules in two tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Code,
    Session,
}

impl Kind {
    fn table(self) -> &'static str {
        match self {
            Self::Code => "hub_login_codes",
            Self::Session => "hub_web_sessions",
        }
    }

    fn max(self) -> usize {
        match self {
            Self::Code => MAX_CODES_PER_CALLER,
            Self::Session => MAX_SESSIONS_PER_CALLER,
        }
    }

    /// The first key of the per-caller advisory lock (the second is the caller's hash).
    fn lock_class(self) -> i32 {
        match self {
            Self::Code => 0x5348_0001,
            Self::Session => 0x5348_0002,
        }
    }
}

/// The caller as the `caller` column holds it: the tenant, or '' for the operator.
fn caller_key(caller: Option<&TenantName>) -> &str {
    caller.map_or("", TenantName::as_str)
}

/// What a spent code or an ended session held.
#[derive(sqlx::FromRow)]
struct Taken {
    secret_sha256: Vec<u8>,
    tenant: Option<String>,
    live: bool,
}

impl Registry {
    /// Takes the caller's lock for `kind`, makes room for one more row (expired ones
    /// first, then those closest to expiry) and inserts `credential` valid for `ttl`.
    async fn insert_login(
        &self,
        conn: &mut PgConnection,
        kind: Kind,
        caller: Option<&TenantName>,
        credential: &Credential,
        ttl: Duration,
    ) -> Result<(), RegistryError> {
        let key = caller_key(caller);
        let now: i64 = sqlx::query_scalar(concat!(
            "SELECT ",
            now_ms!("$3"),
            " FROM (SELECT pg_advisory_xact_lock($1, hashtext($2))) AS locked"
        ))
        .bind(kind.lock_class())
        .bind(key)
        .bind(self.now_param())
        .fetch_one(&mut *conn)
        .await?;
        let table = kind.table();
        let keep = i64::try_from(kind.max().saturating_sub(1)).unwrap_or(i64::MAX);
        sqlx::query(&format!(
            "DELETE FROM {table} WHERE caller = $1 AND (expires_at <= $2 OR id IN ( \
               SELECT id FROM {table} WHERE caller = $1 AND expires_at > $2 \
               ORDER BY expires_at DESC, id DESC OFFSET $3))"
        ))
        .bind(key)
        .bind(now)
        .bind(keep)
        .execute(&mut *conn)
        .await?;
        let inserted = sqlx::query(&format!(
            "INSERT INTO {table} (id, secret_sha256, tenant, expires_at) VALUES ($1, $2, $3, $4)"
        ))
        .bind(credential.id())
        .bind(credential.digest())
        .bind(caller.map(TenantName::as_str))
        .bind(now.saturating_add(millis(ttl)))
        .execute(&mut *conn)
        .await;
        match inserted {
            Ok(_) => Ok(()),
            Err(error) if is_missing_reference(&error) => Err(RegistryError::NotFound(format!(
                "tenant {}",
                caller_key(caller)
            ))),
            Err(error) => Err(error.into()),
        }
    }

    /// Removes the row `credential` names when its secret matches, answering whether
    /// it was still live and whose it was; a wrong secret removes nothing (the
    /// transaction is rolled back) and answers `None`. An expired match is removed.
    async fn take(
        &self,
        conn: &mut PgConnection,
        kind: Kind,
        credential: &Credential,
    ) -> Result<Option<Taken>, RegistryError> {
        let taken: Option<Taken> = sqlx::query_as(&format!(
            concat!(
                "DELETE FROM {} WHERE id = $1 RETURNING secret_sha256, tenant, expires_at > ",
                now_ms!("$2"),
                " AS live"
            ),
            kind.table()
        ))
        .bind(credential.id())
        .bind(self.now_param())
        .fetch_optional(conn)
        .await?;
        Ok(taken.filter(|taken| credential.matches(&taken.secret_sha256)))
    }

    /// Mints a one-time login code for `caller` (a tenant, or `None` for the operator)
    /// valid for `ttl`: its text `<id>.<secret>`, shown once. The caller's oldest
    /// unused code goes when it has [`MAX_CODES_PER_CALLER`]. `NotFound` for an
    /// unknown tenant.
    pub async fn issue_code(
        &self,
        caller: Option<&TenantName>,
        ttl: Duration,
    ) -> Result<String, RegistryError> {
        let credential = Credential::generate()?;
        let mut tx = self.pool.begin().await?;
        self.insert_login(&mut tx, Kind::Code, caller, &credential, ttl)
            .await?;
        tx.commit().await?;
        Ok(credential.text())
    }

    /// Spends `code` and opens a browser session for its caller lasting
    /// `session_ttl`: the session's text and the caller. `None` when the code is
    /// malformed, unknown, spent, expired or its secret is wrong (which does not spend
    /// it). The code is taken by `DELETE … RETURNING` in the session's transaction, so
    /// it works once whichever process redeems it.
    pub async fn redeem(
        &self,
        code: &str,
        session_ttl: Duration,
    ) -> Result<Option<(String, Option<TenantName>)>, RegistryError> {
        let Some(code) = Credential::parse(code) else {
            return Ok(None);
        };
        let session = Credential::generate()?;
        let mut tx = self.pool.begin().await?;
        let Some(taken) = self.take(&mut tx, Kind::Code, &code).await? else {
            return Ok(None);
        };
        if !taken.live {
            tx.commit().await?;
            return Ok(None);
        }
        let caller = taken.tenant.map(tenant_name).transpose()?;
        self.insert_login(
            &mut tx,
            Kind::Session,
            caller.as_ref(),
            &session,
            session_ttl,
        )
        .await?;
        tx.commit().await?;
        Ok(Some((session.text(), caller)))
    }

    /// Whose live browser session `session` is: `Some(None)` for the operator's,
    /// `Some(Some(tenant))` for a tenant's, `None` when it is not a live session (an
    /// expired one is removed).
    pub async fn check(&self, session: &str) -> Result<Option<Option<TenantName>>, RegistryError> {
        let Some(session) = Credential::parse(session) else {
            return Ok(None);
        };
        let row: Option<Taken> = sqlx::query_as(concat!(
            "SELECT secret_sha256, tenant, expires_at > ",
            now_ms!("$2"),
            " AS live FROM hub_web_sessions WHERE id = $1"
        ))
        .bind(session.id())
        .bind(self.now_param())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row.filter(|row| session.matches(&row.secret_sha256)) else {
            return Ok(None);
        };
        if !row.live {
            sqlx::query(concat!(
                "DELETE FROM hub_web_sessions WHERE id = $1 AND expires_at <= ",
                now_ms!("$2")
            ))
            .bind(session.id())
            .bind(self.now_param())
            .execute(&self.pool)
            .await?;
            return Ok(None);
        }
        Ok(Some(row.tenant.map(tenant_name).transpose()?))
    }

    /// Ends the browser session `session` (logging out, on every process); whether
    /// there was a live one.
    pub async fn end(&self, session: &str) -> Result<bool, RegistryError> {
        let Some(session) = Credential::parse(session) else {
            return Ok(false);
        };
        let mut tx = self.pool.begin().await?;
        let Some(taken) = self.take(&mut tx, Kind::Session, &session).await? else {
            return Ok(false);
        };
        tx.commit().await?;
        Ok(taken.live)
    }

    /// Ends every browser session of `caller` and forgets its unused login codes
    /// (a rotation does this for a tenant); how many rows went.
    pub async fn end_sessions_of(&self, caller: Option<&TenantName>) -> Result<u64, RegistryError> {
        let mut tx = self.pool.begin().await?;
        let ended = end_all(&mut tx, caller).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// Removes every expired code and session, of every caller; how many. Rows
    /// another transaction holds are left for the next sweep, so a sweep never
    /// waits for (or deadlocks with) a login.
    pub async fn sweep(&self) -> Result<u64, RegistryError> {
        let mut removed = 0;
        for kind in [Kind::Code, Kind::Session] {
            let table = kind.table();
            let done = sqlx::query(&format!(
                concat!(
                    "DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE expires_at <= ",
                    now_ms!("$1"),
                    " FOR UPDATE SKIP LOCKED)"
                ),
                table = table
            ))
            .bind(self.now_param())
            .execute(&self.pool)
            .await?;
            removed += done.rows_affected();
        }
        Ok(removed)
    }
}

/// Deletes `caller`'s codes, then (under its session lock) its sessions; how many.
pub(super) async fn end_all(
    conn: &mut PgConnection,
    caller: Option<&TenantName>,
) -> Result<u64, RegistryError> {
    let key = caller_key(caller);
    let codes = sqlx::query("DELETE FROM hub_login_codes WHERE caller = $1")
        .bind(key)
        .execute(&mut *conn)
        .await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(Kind::Session.lock_class())
        .bind(key)
        .execute(&mut *conn)
        .await?;
    let sessions = sqlx::query("DELETE FROM hub_web_sessions WHERE caller = $1")
        .bind(key)
        .execute(&mut *conn)
        .await?;
    Ok(codes.rows_affected() + sessions.rows_affected())
}
