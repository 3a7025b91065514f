//! Opening one Local Agent: its store, its extensions with their grants, its tasks.

use std::path::Path;
use std::sync::Arc;

use shiitake_core::Agent;
use shiitake_ext_home::add_home;
use shiitake_protocol::AgentName;
use shiitake_roster_conversation_agents::{
    AgentDirectory, SharedSet, add_conversation_agents, add_shared_set,
};
use shiitake_store_sqlite::SqliteStore;

use crate::{LocalError, LocalOptions};

/// One open Agent and the tasks that serve it.
pub(crate) struct Opened {
    /// The Agent, as the server is handed it too: one `Arc` for as long as it is
    /// open, so the server's router of it is built once.
    pub(crate) agent: std::sync::Arc<Agent>,
    pub(crate) tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The names of the Agents stored in `agents_dir` (`<name>.db`), sorted; files that
/// are not an Agent's database are left alone.
pub(crate) fn stored_names(
    agents_dir: &Path,
    default: &AgentName,
) -> Result<Vec<AgentName>, LocalError> {
    let entries = std::fs::read_dir(agents_dir).map_err(|error| LocalError::Io {
        path: agents_dir.display().to_string(),
        reason: error.to_string(),
    })?;
    let mut names: Vec<AgentName> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file = entry.file_name();
            let stem = file.to_str()?.strip_suffix(".db")?;
            AgentName::new(stem).ok()
        })
        .filter(|name| name != default)
        .collect();
    names.sort();
    Ok(names)
}

/// Opens the Agent `name` with the whole Local composition and starts its tasks.
pub(crate) async fn open(
    options: &LocalOptions,
    name: &AgentName,
    directory: Arc<dyn AgentDirectory>,
) -> Result<Opened, LocalError> {
    let failed = |reason: String| LocalError::Agent {
        agent: name.clone(),
        reason,
    };
    let path = options.database(name);
    let store = SqliteStore::open(&path, options.durability)
        .await
        .map_err(|error| failed(format!("{}: {error}", path.display())))?;
    let mut config = (options.config)(name);
    config.offered_tools = options.offered_tools.clone();
    // The Agent segment of its Sessions' addresses and its owners' log spans.
    config.name = Some(name.clone());
    let clock = config.clock.clone();
    let builder = Agent::builder(Arc::new(store), options.tools.clone(), config);
    let set = SharedSet {
        waits_on_sender: true,
        skills: options.skills.clone(),
    };
    let builder = add_shared_set(builder, &set).map_err(|error| failed(error.to_string()))?;
    let builder =
        add_home(builder, options.computers.clone()).map_err(|error| failed(error.to_string()))?;
    // Approvals go to a person, whoever sent the work: a sending Agent never approves
    // its child's side effects (the parent's Subagents row shows them to the person).
    let approval = shiitake_ext_approval::extension(options.approval.clone())
        .map_err(|error| failed(error.to_string()))?;
    let builder = builder.kit_extension(approval);
    let builder = match &options.ui {
        Some(bridge) if name == &options.default_agent => {
            let ui = shiitake_ext_ui::extension(bridge.clone())
                .map_err(|error| failed(error.to_string()))?;
            builder.kit_extension(ui)
        }
        _ => builder,
    };
    let (builder, conversation) = add_conversation_agents(builder, name.clone(), directory, clock)
        .map_err(|error| failed(error.to_string()))?;
    let agent = builder
        .open()
        .await
        .map_err(|error| failed(error.message))?;
    let tasks = conversation.start(&agent);
    Ok(Opened {
        agent: std::sync::Arc::new(agent),
        tasks,
    })
}
