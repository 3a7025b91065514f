//! What `serve` hosts: the Local roster (a directory of Agents on SQLite in the data
//! directory), or the Hub roster (one Agent per process on a PostgreSQL database that
//! other `serve` processes share).

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use knapsack::ui::UiBridge;
use shiitake_capabilities::Catalog;
use shiitake_core::{AgentConfig, ModelResolver, OfferedTools};
use shiitake_ext_approval::policy::Policy;
use shiitake_ext_home::ComputerList;
use shiitake_ext_skills::SkillLibrary;
use shiitake_protocol::AgentName;
use shiitake_roster_hub::{HubAgent, HubOptions, SoleAgentDirectory};
use shiitake_roster_local::{LocalDirectory, LocalOptions};
use shiitake_server::{HubNodes, ServerConfig, directory_router, router};

use super::database::{self, Database};
use crate::error::CliError;

/// What either roster is built from.
pub struct HostParts {
    /// The models Sessions may use.
    pub models: Arc<dyn ModelResolver>,
    /// The tools besides the extensions' (`--mcp`).
    pub tools: Arc<Catalog>,
    /// The `--skills` library, if any.
    pub skills: Option<Arc<SkillLibrary>>,
    /// The Computers Home chooses from.
    pub computers: Arc<ComputerList>,
    /// The browser App bridge (the Local default Agent only).
    pub bridge: UiBridge,
    /// Which tools runs offer, by the profile of their model (`--tools`).
    pub offered_tools: OfferedTools,
    /// Which tool calls wait for a person's approval (`--approve`, `--approve-tool`).
    pub approval: Policy,
}

/// The Agents one `serve` process serves.
pub enum Host {
    /// The Local directory; the bridge is mounted for its default Agent.
    Local(Arc<LocalDirectory>, UiBridge),
    /// One Hub Agent (and its name), sharing its database's Sessions with other
    /// processes, and the view of those processes (`GET /v1/hub/nodes`).
    Hub(HubAgent, AgentName, Arc<dyn HubNodes>),
}

impl Host {
    /// Opens the roster `database` calls for: SQLite → Local, PostgreSQL → Hub (the
    /// tenant `agent`).
    pub async fn open(
        database: &Database,
        data_dir: &Path,
        agent: &str,
        parts: HostParts,
    ) -> Result<Self, CliError> {
        let setup = |error: String| CliError::Setup(format!("store: {error}"));
        match database {
            Database::Sqlite(path) => {
                let mut options = LocalOptions::new(data_dir, parts.models);
                options.default_database = Some(path.clone());
                options.tools = parts.tools;
                options.skills = parts.skills;
                options.computers = parts.computers;
                options.ui = Some(parts.bridge.clone());
                options.offered_tools = parts.offered_tools;
                options.approval = parts.approval;
                let directory = LocalDirectory::open(options)
                    .await
                    .map_err(|error| setup(error.to_string()))?;
                Ok(Self::Local(Arc::new(directory), parts.bridge))
            }
            Database::Postgres(postgres) => {
                let (store, nodes) = database::open_postgres(postgres, agent).await?;
                let name = AgentName::new(agent)
                    .map_err(|error| CliError::Setup(format!("--agent {agent:?}: {error}")))?;
                let directory = SoleAgentDirectory::new(
                    name.clone(),
                    "this Hub process serves one Agent; Agents are added by the operator",
                );
                let hub = HubAgent::open(HubOptions {
                    name: name.clone(),
                    store,
                    tools: parts.tools,
                    config: AgentConfig {
                        offered_tools: parts.offered_tools,
                        ..AgentConfig::new(parts.models)
                    },
                    skills: parts.skills,
                    computers: parts.computers,
                    directory: directory.clone(),
                    approval: parts.approval,
                })
                .await
                .map_err(|error| setup(error.to_string()))?;
                directory.set(hub.agent().clone());
                Ok(Self::Hub(hub, name, nodes))
            }
        }
    }

    /// The Agents' names, for the start-up lines.
    pub fn names(&self) -> Vec<String> {
        match self {
            Self::Local(directory, _) => directory.names().into_iter().map(String::from).collect(),
            Self::Hub(_, name, _) => vec![name.to_string()],
        }
    }

    /// The HTTP routes (`docs/http.md`) in front of the Agents.
    pub fn router(&self, config: ServerConfig) -> Router {
        match self {
            Self::Local(directory, bridge) => {
                directory_router(directory.clone(), config.with_browser(bridge.clone()))
            }
            Self::Hub(hub, _, nodes) => router(
                Arc::new(hub.agent().clone()),
                config.with_hub_nodes(nodes.clone()),
            ),
        }
    }

    /// Stops the Agents' tasks and closes them; accepted work stays durable.
    pub async fn close(self) {
        match self {
            Self::Local(directory, bridge) => {
                bridge.close();
                directory.close().await;
            }
            Self::Hub(hub, _, _) => {
                if let Err(error) = hub.close().await {
                    tracing::warn!(%error, "the Hub Agent did not close cleanly");
                }
            }
        }
    }
}
