//! What the host supplies: where the tenants, their Agents and their stores are.
//!
//! The directory keeps no list of its own: the catalog (PostgreSQL's tenant tables on
//! the Hub, memory in the tests) is the one truth, so every process of the Hub sees a
//! tenant or an Agent as soon as another process records it.

use std::sync::Arc;

use async_trait::async_trait;
use shiitake_core::store::Store;
use shiitake_protocol::{AgentName, TenantName};

/// Why the catalog (or the directory in front of it) could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// No such tenant or Agent.
    #[error("not found: {0}")]
    NotFound(String),
    /// The name is taken.
    #[error("exists: {0}")]
    Exists(String),
    /// The host's rules refuse it (a bound reached).
    #[error("refused: {0}")]
    Refused(String),
    /// It cannot be done now (the database is unreachable, every open tenant is busy,
    /// the directory is closing); trying again later may work.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

/// The tenants of a Hub's database and their Agents, as the host keeps them.
///
/// Every method may be called from any process at any time; the catalog, not the
/// directory, decides whether a name is taken and when a tenant is full.
#[async_trait]
pub trait TenantCatalog: Send + Sync + 'static {
    /// The tenant that owns `agent`, if the Hub has that Agent.
    async fn tenant_of(&self, agent: &AgentName) -> Result<Option<TenantName>, CatalogError>;

    /// The tenant's Agents, its first one first.
    async fn agents(&self, tenant: &TenantName) -> Result<Vec<AgentName>, CatalogError>;

    /// Records a new Agent of `tenant`; at `max_per_tenant` Agents it is Refused, a
    /// taken name Exists.
    async fn add_agent(
        &self,
        tenant: &TenantName,
        agent: &AgentName,
        max_per_tenant: usize,
    ) -> Result<(), CatalogError>;

    /// Opens the store of `agent` (a tenant store sharing the process's connections
    /// on the Hub).
    async fn store(&self, agent: &AgentName) -> Result<Arc<dyn Store>, CatalogError>;

    /// Agents with work waiting (unsettled Sessions, armed timers): they must be open
    /// somewhere.
    async fn wanted(&self) -> Result<Vec<AgentName>, CatalogError>;
}
