//! The server's view of the Hub directory: which Agents a caller reaches. The
//! operator reaches every tenant's; a tenant its own only, and another tenant's Agent
//! is answered exactly as an Agent that does not exist (`not_found`).

use std::sync::Arc;

use async_trait::async_trait;
use shiitake_core::Agent;
use shiitake_protocol::{AgentName, ShiitakeError};
use shiitake_roster_hub::directory::{CatalogError, HubDirectory};
use shiitake_server::{AgentDirectoryApi, Caller};
use shiitake_store_postgres::registry::Registry;

use super::catalog::catalog_error;

/// The Hub directory behind the HTTP routes.
#[derive(Clone, Debug)]
pub struct HubAgents {
    pub directory: HubDirectory,
    pub registry: Registry,
    /// The operator's routes without an Agent segment serve this one (`--agent`).
    pub default: AgentName,
}

/// A directory error as the server answers it.
pub fn answer(error: CatalogError) -> ShiitakeError {
    match error {
        CatalogError::NotFound(what) => ShiitakeError::not_found(what),
        CatalogError::Exists(what) => ShiitakeError::conflict(what),
        CatalogError::Refused(what) => ShiitakeError::not_granted(what),
        CatalogError::Unavailable(what) => ShiitakeError::unavailable(what),
    }
}

fn no_such(name: &AgentName) -> ShiitakeError {
    ShiitakeError::not_found(format!("no Agent named {name}"))
}

#[async_trait]
impl AgentDirectoryApi for HubAgents {
    type Agent = Agent;

    async fn agent(&self, name: &AgentName, caller: &Caller) -> Result<Arc<Agent>, ShiitakeError> {
        if let Caller::Tenant(tenant) = caller {
            // Checked before anything opens: another tenant's Agent is never touched.
            let owner = self.directory.tenant_of(name).await.map_err(answer)?;
            if owner.as_ref() != Some(tenant) {
                return Err(no_such(name));
            }
        }
        self.directory.shared_agent(name).await.map_err(answer)
    }

    async fn names(&self, caller: &Caller) -> Result<Vec<AgentName>, ShiitakeError> {
        match caller {
            Caller::Tenant(tenant) => self.directory.names_of(tenant).await.map_err(answer),
            Caller::Operator => {
                let list = self
                    .registry
                    .tenants()
                    .await
                    .map_err(|error| answer(catalog_error(error)))?;
                Ok(list
                    .tenants
                    .into_iter()
                    .flat_map(|tenant| tenant.agents)
                    .collect())
            }
        }
    }

    fn default_name(&self, caller: &Caller) -> Option<AgentName> {
        match caller {
            Caller::Operator => Some(self.default.clone()),
            Caller::Tenant(tenant) => Some(tenant.first_agent()),
        }
    }
}
