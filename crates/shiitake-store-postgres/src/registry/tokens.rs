//! Tenant tokens: issued (with a rotation's revocation of the others in the same
//! transaction), revoked, and verified by one indexed lookup and a constant-time
//! comparison of digests. Every process reads the same rows, so a revocation holds
//! on all of them at its commit.

use shiitake_protocol::{IssuedToken, TenantName, TokenId};
use sqlx::PgConnection;

use super::credential::Credential;
use super::tenants::lock_tenant;
use super::{Registry, RegistryError, logins, tenant_name};

/// Inserts a token of `tenant` holding `credential`'s digest; what to show its holder.
pub(super) async fn insert(
    conn: &mut PgConnection,
    tenant: &TenantName,
    credential: &Credential,
    now: i64,
) -> Result<IssuedToken, RegistryError> {
    // A generated id is always a token id; the check keeps the two rules one.
    let id = TokenId::new(credential.id()).map_err(|error| sqlx::Error::Decode(Box::new(error)))?;
    sqlx::query(
        "INSERT INTO hub_tokens (id, tenant, secret_sha256, created_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(id.as_str())
    .bind(tenant.as_str())
    .bind(credential.digest())
    .bind(now)
    .execute(conn)
    .await?;
    Ok(IssuedToken {
        tenant: tenant.clone(),
        id,
        token: credential.text(),
    })
}

impl Registry {
    /// Issues a new token of `tenant`. With `revoke_others` (a rotation) the tenant's
    /// other tokens are revoked and its web logins ended in the same transaction, so
    /// from its commit only the new token works, on every process. `NotFound` for an
    /// unknown tenant.
    pub async fn issue_token(
        &self,
        tenant: &TenantName,
        revoke_others: bool,
    ) -> Result<IssuedToken, RegistryError> {
        let credential = Credential::generate()?;
        let mut tx = self.pool.begin().await?;
        lock_tenant(&mut tx, tenant).await?;
        if revoke_others {
            sqlx::query("DELETE FROM hub_tokens WHERE tenant = $1")
                .bind(tenant.as_str())
                .execute(&mut *tx)
                .await?;
            logins::end_all(&mut tx, Some(tenant)).await?;
        }
        let now = self.now(&mut tx).await?;
        let issued = insert(&mut tx, tenant, &credential, now).await?;
        tx.commit().await?;
        Ok(issued)
    }

    /// Revokes the token `id` of `tenant` and ends the tenant's web logins (one may
    /// have been opened with the revoked token; a login does not record which).
    /// `NotFound` when the tenant has no such token.
    pub async fn revoke_token(
        &self,
        tenant: &TenantName,
        id: &TokenId,
    ) -> Result<(), RegistryError> {
        let mut tx = self.pool.begin().await?;
        let revoked = sqlx::query("DELETE FROM hub_tokens WHERE id = $1 AND tenant = $2")
            .bind(id.as_str())
            .bind(tenant.as_str())
            .execute(&mut *tx)
            .await?;
        if revoked.rows_affected() == 0 {
            return Err(RegistryError::NotFound(format!(
                "token {id} of tenant {tenant}"
            )));
        }
        logins::end_all(&mut tx, Some(tenant)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The tenant a bearer token reaches; `None` for text that is not a live token
    /// (malformed text costs no round trip).
    pub async fn verify_token(&self, text: &str) -> Result<Option<TenantName>, RegistryError> {
        let Some(credential) = Credential::parse(text) else {
            return Ok(None);
        };
        let row: Option<(String, Vec<u8>)> =
            sqlx::query_as("SELECT tenant, secret_sha256 FROM hub_tokens WHERE id = $1")
                .bind(credential.id())
                .fetch_optional(&self.pool)
                .await?;
        match row {
            Some((tenant, digest)) if credential.matches(&digest) => Ok(Some(tenant_name(tenant)?)),
            _ => Ok(None),
        }
    }
}
