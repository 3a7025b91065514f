//! The operator's routes of the Hub: its tenants and their tokens
//! (`/v1/hub/tenants`) and its processes (`/v1/hub/nodes`), over the registry and the
//! process's [`PostgresHub`].

use async_trait::async_trait;
use shiitake_protocol::{
    HubNodeList, IssueToken, IssuedToken, ShiitakeError, TenantList, TenantName, TokenId,
};
use shiitake_roster_hub::directory::HubDirectory;
use shiitake_server::{HubNodes, HubTenants};
use shiitake_store_postgres::PostgresHub;
use shiitake_store_postgres::registry::{Registry, RegistryError};

use super::credentials::unavailable;

/// Tenants and tokens, as the operator manages them.
#[derive(Debug)]
pub struct Tenants {
    pub registry: Registry,
    pub directory: HubDirectory,
}

fn answer(error: RegistryError) -> ShiitakeError {
    match error {
        RegistryError::NotFound(what) => ShiitakeError::not_found(what),
        RegistryError::Exists(what) => ShiitakeError::conflict(what),
        RegistryError::Refused { reason } => ShiitakeError::not_granted(reason),
        other => unavailable(other),
    }
}

#[async_trait]
impl HubTenants for Tenants {
    async fn create(&self, name: &TenantName) -> Result<IssuedToken, ShiitakeError> {
        self.registry.create_tenant(name).await.map_err(answer)
    }

    async fn list(&self) -> Result<TenantList, ShiitakeError> {
        self.registry.tenants().await.map_err(answer)
    }

    async fn delete(&self, name: &TenantName) -> Result<(), ShiitakeError> {
        // Deleted first, so a request arriving meanwhile finds no tenant to open again;
        // then closed here. Another process's open copy finds its rows gone and closes
        // when idle.
        self.registry.delete_tenant(name).await.map_err(answer)?;
        self.directory.close_tenant(name).await;
        Ok(())
    }

    async fn issue_token(
        &self,
        tenant: &TenantName,
        request: &IssueToken,
    ) -> Result<IssuedToken, ShiitakeError> {
        self.registry
            .issue_token(tenant, request.revoke_others)
            .await
            .map_err(answer)
    }

    async fn revoke_token(&self, tenant: &TenantName, id: &TokenId) -> Result<(), ShiitakeError> {
        self.registry.revoke_token(tenant, id).await.map_err(answer)
    }
}

/// The processes of the Hub, every tenant's rows.
#[derive(Debug)]
pub struct Nodes(pub PostgresHub);

#[async_trait]
impl HubNodes for Nodes {
    async fn nodes(&self) -> Result<HubNodeList, ShiitakeError> {
        Ok(HubNodeList {
            nodes: self.0.nodes().await?,
        })
    }
}
