//! The directory's catalog on PostgreSQL: tenants and Agents from the registry, each
//! Agent's store a tenant store on the process's one [`PostgresHub`].

use std::sync::Arc;

use async_trait::async_trait;
use shiitake_core::store::Store;
use shiitake_protocol::{AgentName, TenantName};
use shiitake_roster_hub::directory::{CatalogError, TenantCatalog};
use shiitake_store_postgres::registry::{Registry, RegistryError};
use shiitake_store_postgres::{AgentKey, PostgresHub};

/// The tenants of the Hub's database, as every process sees them.
#[derive(Clone, Debug)]
pub struct PgCatalog {
    pub hub: PostgresHub,
    pub registry: Registry,
}

/// A registry error as the directory's.
pub fn catalog_error(error: RegistryError) -> CatalogError {
    match error {
        RegistryError::NotFound(what) => CatalogError::NotFound(what),
        RegistryError::Exists(what) => CatalogError::Exists(what),
        RegistryError::Refused { reason } => CatalogError::Refused(reason),
        other => CatalogError::Unavailable(other.to_string()),
    }
}

#[async_trait]
impl TenantCatalog for PgCatalog {
    async fn tenant_of(&self, agent: &AgentName) -> Result<Option<TenantName>, CatalogError> {
        self.registry
            .tenant_of_agent(agent)
            .await
            .map_err(catalog_error)
    }

    async fn agents(&self, tenant: &TenantName) -> Result<Vec<AgentName>, CatalogError> {
        self.registry.agents(tenant).await.map_err(catalog_error)
    }

    async fn add_agent(
        &self,
        tenant: &TenantName,
        agent: &AgentName,
        max_per_tenant: usize,
    ) -> Result<(), CatalogError> {
        self.registry
            .add_agent(tenant, agent, max_per_tenant)
            .await
            .map_err(catalog_error)
    }

    async fn store(&self, agent: &AgentName) -> Result<Arc<dyn Store>, CatalogError> {
        let key = AgentKey::new(agent.as_str())
            .map_err(|error| CatalogError::Refused(error.to_string()))?;
        let store = self
            .hub
            .store(key)
            .await
            .map_err(|error| CatalogError::Unavailable(error.to_string()))?;
        Ok(Arc::new(store))
    }

    async fn wanted(&self) -> Result<Vec<AgentName>, CatalogError> {
        self.registry.wanted().await.map_err(catalog_error)
    }
}
