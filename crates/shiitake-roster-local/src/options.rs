//! What a Local host chooses: where, which model, which tools, skills and Computers.

use std::path::PathBuf;
use std::sync::Arc;

use knapsack::ui::UiBridge;
use shiitake_capabilities::Catalog;
use shiitake_core::{AgentConfig, ModelResolver, OfferedTools};
use shiitake_ext_approval::policy::Policy;
use shiitake_ext_home::{ComputerList, Computers};
use shiitake_ext_skills::SkillLibrary;
use shiitake_protocol::AgentName;
use shiitake_store_sqlite::Durability;

/// Whether `agents.create` may add Agents to the directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreatePolicy {
    /// Any Agent may create one (the Local default).
    Allow,
    /// Creation is refused, with this reason for the model.
    Refuse(String),
}

/// The Agent configuration of each Agent, by name.
pub type ConfigFor = Arc<dyn Fn(&AgentName) -> AgentConfig + Send + Sync>;

/// How [`LocalDirectory::open`](crate::LocalDirectory::open) builds the directory.
#[derive(Clone)]
pub struct LocalOptions {
    /// The data directory: `shiitake.db` (the default Agent) and `agents/<name>.db`.
    pub data_dir: PathBuf,
    /// The default Agent's database, when not `<data_dir>/shiitake.db`
    /// (`shiitake serve --database sqlite:PATH`).
    pub default_database: Option<PathBuf>,
    /// SQLite durability (full: every commit survives a power cut).
    pub durability: Durability,
    /// The tools every Agent's runs get besides the extensions' (MCP servers, ...).
    pub tools: Arc<Catalog>,
    /// Each Agent's configuration: model, retries, clock (the roster times Subagents
    /// and the conversation-agents tools by the same clock).
    pub config: ConfigFor,
    /// The host's skills, if any.
    pub skills: Option<Arc<SkillLibrary>>,
    /// The Computers Home chooses from (each Agent records its own choice).
    pub computers: Arc<dyn Computers>,
    /// `agents.create`'s admission.
    pub create: CreatePolicy,
    /// The Agent the routes without an Agent segment serve.
    pub default_agent: AgentName,
    /// The browser App bridge (`Knapsack.ui`): the default Agent's runs borrow the App
    /// open in the person's browser through it; the server mounts its routes.
    pub ui: Option<UiBridge>,
    /// Which tools each Agent's runs offer, by the profile of their model (it replaces
    /// the one `config` gives): everything to full models, the file tools and question
    /// to small ones, so a small model creates no Agent, loop or schedule unless the
    /// host names those tools.
    pub offered_tools: OfferedTools,
    /// Which tool calls wait for a person's approval (`shiitake-ext-approval`), in
    /// every Agent: by default, the file tools that edit.
    pub approval: Policy,
}

impl std::fmt::Debug for LocalOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalOptions")
            .field("data_dir", &self.data_dir)
            .field("durability", &self.durability)
            .field("create", &self.create)
            .field("default_agent", &self.default_agent)
            .field("ui", &self.ui.is_some())
            .field("offered_tools", &self.offered_tools)
            .field("approval", &self.approval)
            .finish_non_exhaustive()
    }
}

impl LocalOptions {
    /// Defaults in `data_dir` with `models` for every Agent: full durability, no extra
    /// tools, no skills, no Computers, no browser bridge, creation allowed, default Agent
    /// `main`, each profile's default tool set, approvals asked before edits.
    pub fn new(data_dir: impl Into<PathBuf>, models: Arc<dyn ModelResolver>) -> Self {
        Self {
            data_dir: data_dir.into(),
            default_database: None,
            durability: Durability::Full,
            tools: Arc::new(Catalog::new()),
            config: Arc::new(move |_| AgentConfig::new(models.clone())),
            skills: None,
            computers: Arc::new(ComputerList::default()),
            create: CreatePolicy::Allow,
            default_agent: AgentName::default(),
            ui: None,
            offered_tools: OfferedTools::default(),
            approval: Policy::asks_before_edits(),
        }
    }

    /// Where the other Agents' databases are.
    pub fn agents_dir(&self) -> PathBuf {
        self.data_dir.join("agents")
    }

    /// The database of the Agent `name`.
    pub fn database(&self, name: &AgentName) -> PathBuf {
        if name == &self.default_agent {
            self.default_database
                .clone()
                .unwrap_or_else(|| self.data_dir.join("shiitake.db"))
        } else {
            self.agents_dir().join(format!("{name}.db"))
        }
    }
}
