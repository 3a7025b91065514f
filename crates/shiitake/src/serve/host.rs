//! What `serve` hosts: the Local roster (a directory of Agents on SQLite in the data
//! directory), or a Hub process (every tenant of a PostgreSQL database that other
//! `serve` processes share, `hub/`).

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use knapsack::ui::UiBridge;
use shiitake_capabilities::Catalog;
use std::path::PathBuf;

use shiitake_core::{ModelResolver, OfferedTools};
use shiitake_ext_approval::policy::Policy;
use shiitake_ext_home::ComputerList;
use shiitake_ext_skills::SkillLibrary;
use shiitake_protocol::AgentName;
use shiitake_roster_local::{LocalDirectory, LocalOptions};
use shiitake_server::{ServerConfig, Token, WebLogin, WebLogins, directory_router};

use super::database::Database;
#[cfg(feature = "postgres")]
use super::hub::HubHost;
#[cfg(feature = "postgres")]
use super::tenant_roots::TenantRoots;
use crate::error::CliError;

/// What either roster is built from.
pub struct HostParts {
    /// The models Sessions may use.
    pub models: Arc<dyn ModelResolver>,
    /// The tools besides the extensions' (`--mcp`).
    pub tools: Arc<Catalog>,
    /// The `--skills` library, if any.
    pub skills: Option<Arc<SkillLibrary>>,
    /// The Computers Home chooses from (Local).
    pub computers: Arc<ComputerList>,
    /// The Computers' directories by name: on a Hub, roots each tenant gets its own
    /// folder under.
    pub roots: Vec<(String, PathBuf)>,
    /// How the Computers run commands (on a Hub, each tenant's as it opens).
    pub commands: super::commands::CommandSetup,
    /// The browser App bridge (the Local default Agent only).
    pub bridge: UiBridge,
    /// Which tools runs offer, by the profile of their model (`--tools`).
    pub offered_tools: OfferedTools,
    /// Which tool calls wait for a person's approval (`--approve`, `--approve-tool`).
    pub approval: Policy,
}

/// The Agents one `serve` process serves.
pub enum Host {
    /// The Local directory; the bridge is mounted for its default Agent; web logins in
    /// this process's memory.
    Local(Arc<LocalDirectory>, UiBridge, WebLogin),
    /// Every tenant of a PostgreSQL database, shared with the Hub's other processes.
    #[cfg(feature = "postgres")]
    Hub(Box<HubHost>),
}

impl Host {
    /// Opens the roster `database` calls for: SQLite → Local, PostgreSQL → Hub; either
    /// way `agent` is the default Agent (on a Hub, the operator's default tenant).
    pub async fn open(
        database: &Database,
        data_dir: &Path,
        agent: &AgentName,
        parts: HostParts,
    ) -> Result<Self, CliError> {
        let setup = |error: String| CliError::Setup(format!("store: {error}"));
        match database {
            Database::Sqlite(path) => {
                let mut options = LocalOptions::new(data_dir, parts.models);
                options.default_database = Some(path.clone());
                options.default_agent = agent.clone();
                options.tools = parts.tools;
                options.skills = parts.skills;
                options.computers = parts.computers;
                options.ui = Some(parts.bridge.clone());
                options.offered_tools = parts.offered_tools;
                options.approval = parts.approval;
                let directory = LocalDirectory::open(options)
                    .await
                    .map_err(|error| setup(error.to_string()))?;
                Ok(Self::Local(
                    Arc::new(directory),
                    parts.bridge,
                    WebLogin::default(),
                ))
            }
            #[cfg(feature = "postgres")]
            Database::Postgres(postgres) => {
                let roots = TenantRoots::new(parts.roots.clone(), data_dir, parts.commands.clone());
                let hub = HubHost::open(postgres, agent, parts, roots).await?;
                Ok(Self::Hub(Box::new(hub)))
            }
            #[cfg(not(feature = "postgres"))]
            Database::Postgres(_) => Err(CliError::Setup(
                "this shiitake was built without PostgreSQL (cargo feature `postgres`)".to_owned(),
            )),
        }
    }

    /// The Agents' names, for the start-up lines (on a Hub, the tenants open here).
    pub fn names(&self) -> Vec<String> {
        match self {
            Self::Local(directory, _, _) => {
                directory.names().into_iter().map(String::from).collect()
            }
            #[cfg(feature = "postgres")]
            Self::Hub(hub) => hub.names(),
        }
    }

    /// Where the web page's logins are kept: this process's memory (Local), or the
    /// database every process of the Hub shares.
    pub fn web_logins(&self) -> Arc<dyn WebLogins> {
        match self {
            Self::Local(_, _, web) => Arc::new(web.clone()),
            #[cfg(feature = "postgres")]
            Self::Hub(hub) => hub.web_logins(),
        }
    }

    /// The HTTP routes (`docs/http.md`) in front of the Agents; `token` is the
    /// operator's (on a Hub, tenants have their own besides).
    pub fn router(&self, token: &Token, config: ServerConfig) -> Router {
        let config = config.with_web_logins(self.web_logins());
        match self {
            Self::Local(directory, bridge, _) => {
                directory_router(directory.clone(), config.with_browser(bridge.clone()))
            }
            #[cfg(feature = "postgres")]
            Self::Hub(hub) => hub.router(token.clone(), config),
        }
    }

    /// Stops the Agents' tasks and closes them; accepted work stays durable.
    pub async fn close(self) {
        match self {
            Self::Local(directory, bridge, _) => {
                bridge.close();
                directory.close().await;
            }
            #[cfg(feature = "postgres")]
            Self::Hub(hub) => hub.close().await,
        }
    }
}
