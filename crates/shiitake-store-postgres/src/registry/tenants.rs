//! Tenants and their Agents: creation (with the first Agent and token), the
//! operator's list, deletion, admission of more Agents, and which Agents must be
//! open somewhere because work waits in them.

use shiitake_protocol::{
    AgentName, IssuedToken, TenantEntry, TenantList, TenantName, TokenEntry, TokenId,
};
use sqlx::PgConnection;

use super::credential::Credential;
use super::{Registry, RegistryError, agent_name, tenant_name, tokens, unix_ms};

/// Inserts the tenant; `false` when the name is taken.
async fn insert_tenant(
    conn: &mut PgConnection,
    tenant: &TenantName,
    now: i64,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query(
        "INSERT INTO hub_tenants (name, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )
    .bind(tenant.as_str())
    .bind(now)
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Inserts an Agent of `tenant`; `false` when the name is taken (by any tenant).
async fn insert_agent(
    conn: &mut PgConnection,
    tenant: &TenantName,
    agent: &AgentName,
    now: i64,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query(
        "INSERT INTO hub_agents (name, tenant, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT DO NOTHING",
    )
    .bind(agent.as_str())
    .bind(tenant.as_str())
    .bind(now)
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Locks the tenant's row for the rest of the transaction, so what is counted or
/// removed under it cannot change meanwhile; `NotFound` when there is none.
pub(super) async fn lock_tenant(
    conn: &mut PgConnection,
    tenant: &TenantName,
) -> Result<(), RegistryError> {
    let found: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM hub_tenants WHERE name = $1 FOR UPDATE")
            .bind(tenant.as_str())
            .fetch_optional(conn)
            .await?;
    found
        .map(|_| ())
        .ok_or_else(|| RegistryError::NotFound(format!("tenant {tenant}")))
}

/// Agent names read back from rows.
fn agent_names(names: Vec<String>) -> Result<Vec<AgentName>, sqlx::Error> {
    names.into_iter().map(agent_name).collect()
}

/// The Agents of `tenant`, first one first.
async fn agents_of<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    tenant: &TenantName,
) -> Result<Vec<AgentName>, sqlx::Error> {
    let names: Vec<String> =
        sqlx::query_scalar("SELECT name FROM hub_agents WHERE tenant = $1 ORDER BY position")
            .bind(tenant.as_str())
            .fetch_all(executor)
            .await?;
    agent_names(names)
}

/// A tenant, its Agents and its tokens as one row of the list.
#[derive(sqlx::FromRow)]
struct TenantRow {
    name: String,
    created_at: i64,
    agents: Vec<String>,
    token_ids: Vec<String>,
    token_times: Vec<i64>,
}

impl TenantRow {
    fn entry(self) -> Result<TenantEntry, sqlx::Error> {
        let agents = agent_names(self.agents)?;
        let tokens = self
            .token_ids
            .into_iter()
            .zip(self.token_times)
            .map(|(id, created_at)| {
                Ok(TokenEntry {
                    id: TokenId::new(id).map_err(|error| sqlx::Error::Decode(Box::new(error)))?,
                    created_at: unix_ms(created_at),
                })
            })
            .collect::<Result<_, sqlx::Error>>()?;
        Ok(TenantEntry {
            name: tenant_name(self.name)?,
            created_at: unix_ms(self.created_at),
            agents,
            tokens,
        })
    }
}

impl Registry {
    /// Creates `tenant` with its first Agent (of the same name) and one token, in one
    /// transaction; `Exists` when the tenant or that Agent name is taken.
    pub async fn create_tenant(&self, tenant: &TenantName) -> Result<IssuedToken, RegistryError> {
        let credential = Credential::generate()?;
        let mut tx = self.pool.begin().await?;
        let now = self.now(&mut tx).await?;
        if !insert_tenant(&mut tx, tenant, now).await? {
            return Err(RegistryError::Exists(format!("tenant {tenant}")));
        }
        let agent = tenant.first_agent();
        if !insert_agent(&mut tx, tenant, &agent, now).await? {
            return Err(RegistryError::Exists(format!("Agent {agent}")));
        }
        let issued = tokens::insert(&mut tx, tenant, &credential, now).await?;
        tx.commit().await?;
        Ok(issued)
    }

    /// Creates `tenant` and its first Agent when the tenant is missing, with no token;
    /// whether it did. For `serve --agent NAME`, so a single-tenant Hub that predates
    /// the registry keeps serving its Agent. `Exists` when the tenant is missing but
    /// another tenant has an Agent of that name.
    pub async fn ensure_tenant(&self, tenant: &TenantName) -> Result<bool, RegistryError> {
        let mut tx = self.pool.begin().await?;
        let now = self.now(&mut tx).await?;
        if !insert_tenant(&mut tx, tenant, now).await? {
            return Ok(false);
        }
        let agent = tenant.first_agent();
        if !insert_agent(&mut tx, tenant, &agent, now).await? {
            return Err(RegistryError::Exists(format!("Agent {agent}")));
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Every tenant by name, with its Agents first one first and its live tokens
    /// oldest first (never their secrets): the operator's `GET /v1/hub/tenants`.
    pub async fn tenants(&self) -> Result<TenantList, RegistryError> {
        let rows: Vec<TenantRow> = sqlx::query_as(
            "SELECT t.name, t.created_at, \
               ARRAY(SELECT a.name FROM hub_agents a WHERE a.tenant = t.name \
                 ORDER BY a.position) AS agents, \
               ARRAY(SELECT k.id FROM hub_tokens k WHERE k.tenant = t.name \
                 ORDER BY k.created_at, k.id) AS token_ids, \
               ARRAY(SELECT k.created_at FROM hub_tokens k WHERE k.tenant = t.name \
                 ORDER BY k.created_at, k.id) AS token_times \
             FROM hub_tenants t ORDER BY t.name",
        )
        .fetch_all(&self.pool)
        .await?;
        let tenants = rows
            .into_iter()
            .map(TenantRow::entry)
            .collect::<Result<_, _>>()?;
        Ok(TenantList { tenants })
    }

    /// Deletes `tenant` and everything it has, in one transaction: its Agents, its
    /// tokens, its logins, and its Agents' rows in the store (Sessions with all they
    /// hold, timers, extension state, forwarded requests), so a tenant created later
    /// under the same name starts empty. Answers the Agents removed, for the host to
    /// close wherever they are open (a commit of an owner still running is fenced:
    /// its lease row is gone). `NotFound` when there is no such tenant.
    pub async fn delete_tenant(
        &self,
        tenant: &TenantName,
    ) -> Result<Vec<AgentName>, RegistryError> {
        let mut tx = self.pool.begin().await?;
        // Locked first, so an Agent being added meanwhile is either seen here or refused.
        lock_tenant(&mut tx, tenant).await?;
        let agents = agents_of(&mut *tx, tenant).await?;
        let names: Vec<&str> = agents.iter().map(AgentName::as_str).collect();
        sqlx::query(
            "WITH sessions AS (DELETE FROM sessions WHERE agent_id = ANY($1)), \
               timers AS (DELETE FROM timers WHERE agent_id = ANY($1)), \
               extension_rows AS (DELETE FROM extension_rows WHERE agent_id = ANY($1)), \
               extension_status AS (DELETE FROM extension_status WHERE agent_id = ANY($1)), \
               extension_requests AS (DELETE FROM extension_requests WHERE agent_id = ANY($1)), \
               forwarded AS (DELETE FROM forwarded_requests WHERE agent_id = ANY($1)) \
             DELETE FROM hub_tenants WHERE name = $2",
        )
        .bind(&names)
        .bind(tenant.as_str())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(agents)
    }

    /// The tenant that owns `agent`, if it is registered.
    pub async fn tenant_of_agent(
        &self,
        agent: &AgentName,
    ) -> Result<Option<TenantName>, RegistryError> {
        let tenant: Option<String> =
            sqlx::query_scalar("SELECT tenant FROM hub_agents WHERE name = $1")
                .bind(agent.as_str())
                .fetch_optional(&self.pool)
                .await?;
        Ok(tenant.map(tenant_name).transpose()?)
    }

    /// The Agents of `tenant`, first one first (none for an unknown tenant).
    pub async fn agents(&self, tenant: &TenantName) -> Result<Vec<AgentName>, RegistryError> {
        Ok(agents_of(&self.pool, tenant).await?)
    }

    /// Adds `agent` to `tenant` when the tenant has fewer than `max_per_tenant`
    /// Agents, counted in the same transaction as the insert (under the tenant's row
    /// lock, so two processes admitting at once cannot both pass the bound).
    /// `NotFound` for an unknown tenant, `Refused` at the bound, `Exists` when the
    /// Agent name is taken on the Hub.
    pub async fn add_agent(
        &self,
        tenant: &TenantName,
        agent: &AgentName,
        max_per_tenant: usize,
    ) -> Result<(), RegistryError> {
        let mut tx = self.pool.begin().await?;
        lock_tenant(&mut tx, tenant).await?;
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM hub_agents WHERE tenant = $1")
            .bind(tenant.as_str())
            .fetch_one(&mut *tx)
            .await?;
        if usize::try_from(count).unwrap_or(usize::MAX) >= max_per_tenant {
            return Err(RegistryError::Refused {
                reason: format!(
                    "tenant {tenant} has {count} Agents, the most one tenant may have is {max_per_tenant}"
                ),
            });
        }
        let now = self.now(&mut tx).await?;
        if !insert_agent(&mut tx, tenant, agent, now).await? {
            return Err(RegistryError::Exists(format!("Agent {agent}")));
        }
        tx.commit().await?;
        Ok(())
    }

    /// The registered Agents that have work waiting, by name: a Session with a
    /// command pending or running, or an armed timer (of a Session or of the Agent).
    /// Such an Agent must be open on some process for its work to go on; the host
    /// opens those it finds closed. One statement.
    pub async fn wanted(&self) -> Result<Vec<AgentName>, RegistryError> {
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT a.name FROM hub_agents a WHERE a.name IN ( \
               SELECT agent_id FROM sessions WHERE open_from IS NOT NULL \
               UNION SELECT agent_id FROM timers) \
             ORDER BY a.name",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(agent_names(names)?)
    }
}
