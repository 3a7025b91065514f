//! `serve --database postgres://…`: one process of a Hub that serves every tenant of
//! its database (`docs/hub.md`).
//!
//! The process opens one [`PostgresHub`] (a fixed set of connections whatever the
//! number of tenants), the registry of tenants and tokens on its pool, and a
//! [`HubDirectory`] that opens a tenant's Agents on first use and closes them when
//! idle. The server in front of it tells the operator (the process's token) from the
//! tenants (their own tokens, kept hashed), keeps web logins in the database, and
//! answers another tenant's Agent as one that does not exist.

mod agents;
mod catalog;
mod credentials;
mod operator;

use std::sync::Arc;

use axum::Router;
use shiitake_core::AgentConfig;
use shiitake_ext_home::{ComputerList, Computers};
use shiitake_protocol::{AgentName, TenantName};
use shiitake_roster_hub::directory::{CatalogError, HubDirectory, HubDirectoryOptions};
use shiitake_server::{
    DEFAULT_CODE_TTL, DEFAULT_SESSION_TTL, ServerConfig, Token, WebLogins, directory_router,
};
use shiitake_store_postgres::registry::Registry;
use shiitake_store_postgres::{AgentKey, HubOptions, PostgresHub};

use super::database::Postgres;
use super::host::HostParts;
use super::tenant_roots::TenantRoots;
use crate::error::CliError;

/// One Hub process: the shared connections, the registry and the directory.
#[derive(Debug)]
pub struct HubHost {
    hub: PostgresHub,
    registry: Registry,
    directory: HubDirectory,
    default: AgentName,
    freed: tokio::task::JoinHandle<()>,
}

impl HubHost {
    /// Opens the process's share of `database`, makes sure the operator's default
    /// tenant `default` exists (a Hub started with `--agent NAME` keeps serving NAME),
    /// and starts the directory.
    pub async fn open(
        database: &Postgres,
        default: &AgentName,
        parts: HostParts,
        roots: TenantRoots,
    ) -> Result<Self, CliError> {
        let failed = |what: &str, error: String| {
            CliError::Setup(format!("store: {}: {what}: {error}", database.describe()))
        };
        let mut options = HubOptions::new(database.url());
        (options.lease_ttl, options.heartbeat) = database.timing();
        let hub = PostgresHub::open(options)
            .await
            .map_err(|error| failed("open", error.to_string()))?;
        let registry = Registry::new(hub.pool().clone());
        let tenant = TenantName::new(default.as_str())
            .map_err(|error| CliError::Setup(format!("--agent: {error}")))?;
        registry
            .ensure_tenant(&tenant)
            .await
            .map_err(|error| failed("the default tenant", error.to_string()))?;
        let catalog = Arc::new(catalog::PgCatalog {
            hub: hub.clone(),
            registry: registry.clone(),
        });
        let models = parts.models.clone();
        let offered = parts.offered_tools.clone();
        let mut directory = HubDirectoryOptions::new(catalog, models.clone());
        directory.tools = parts.tools;
        directory.skills = parts.skills;
        directory.approval = parts.approval;
        directory.limits = database.limits();
        directory.config = Arc::new(move |_| AgentConfig {
            offered_tools: offered.clone(),
            ..AgentConfig::new(models.clone())
        });
        directory.computers = Arc::new(move |tenant: &TenantName| -> Arc<dyn Computers> {
            roots.computers(tenant).unwrap_or_else(|error| {
                tracing::warn!(%error, "the tenant opens without that Computer");
                Arc::new(ComputerList::default())
            })
        });
        let directory =
            HubDirectory::start(directory).map_err(|error| CliError::Setup(error.to_string()))?;
        // The operator's default tenant opens now, as one Agent per process did: its
        // accepted work resumes at once.
        directory
            .agent(default)
            .await
            .map_err(|error| failed("the default Agent", error.to_string()))?;
        let freed = tokio::spawn(adopt_freed(hub.clone(), directory.clone()));
        Ok(Self {
            hub,
            registry,
            directory,
            default: default.clone(),
            freed,
        })
    }

    /// The Agents open in this process now.
    pub fn names(&self) -> Vec<String> {
        self.directory
            .open_tenants()
            .into_iter()
            .map(String::from)
            .collect()
    }

    /// The routes of every tenant, behind the operator's token of `config` and the
    /// tenants' tokens, with the web logins in the database and the operator's routes.
    pub fn router(&self, operator: Token, config: ServerConfig) -> Router {
        let credentials = credentials::HubCredentials::new(operator, self.registry.clone());
        let config = config
            .with_credentials(Arc::new(credentials))
            .with_web_logins(self.web_logins())
            .with_hub_nodes(Arc::new(operator::Nodes(self.hub.clone())))
            .with_hub_tenants(Arc::new(operator::Tenants {
                registry: self.registry.clone(),
                directory: self.directory.clone(),
            }));
        directory_router(
            Arc::new(agents::HubAgents {
                directory: self.directory.clone(),
                registry: self.registry.clone(),
                default: self.default.clone(),
            }),
            config,
        )
    }

    /// The web logins every process of the Hub shares.
    pub fn web_logins(&self) -> Arc<dyn WebLogins> {
        Arc::new(credentials::HubWebLogins {
            registry: self.registry.clone(),
            code_ttl: DEFAULT_CODE_TTL,
            session_ttl: DEFAULT_SESSION_TTL,
        })
    }

    /// Drains the process (it takes no more Sessions), closes every tenant (each hands
    /// its Sessions over) and the connections; accepted work stays durable.
    pub async fn close(self) {
        self.freed.abort();
        if let Err(error) = self.hub.drain().await {
            tracing::warn!(%error, "the Hub process could not mark itself draining");
        }
        self.directory.close().await;
        self.hub.close().await;
    }
}

/// Opens each tenant whose Sessions this process's heartbeat freed from a dead one, so
/// its abandoned work resumes here at once (the directory's sweep would find it later).
async fn adopt_freed(hub: PostgresHub, directory: HubDirectory) {
    let mut freed = hub.freed();
    loop {
        let key: AgentKey = match freed.recv().await {
            Ok(key) => key,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        let Ok(name) = AgentName::new(key.as_str()) else {
            continue;
        };
        match directory.agent(&name).await {
            Ok(_) => {}
            // Rows of a store opened without the registry (not a tenant of this Hub).
            Err(CatalogError::NotFound(_)) => {
                tracing::debug!(agent = %name, "freed Sessions of an Agent the registry does not hold");
            }
            Err(error) => {
                tracing::warn!(%error, agent = %name, "could not adopt a dead process's tenant");
            }
        }
    }
}
