//! The `agents.*` extension declared to core's kit (the record in Session state, the
//! tools, the prompt section naming the Agents one can reach, the settled hook that
//! ends a sender's turn), and the runtime a host starts once the Agent is open.

use std::sync::{Arc, Mutex, PoisonError};

use shiitake_core::Agent;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_ext_subagents::SubagentsHandle;
use shiitake_protocol::SessionId;
use tokio::sync::mpsc;

use crate::contract::{AgentName, AgentsContract, NAMESPACE};
use crate::directory::AgentDirectory;
use crate::runtime::{Shared, TurnEnded};
use crate::source::RecordSource;
use crate::{tools, turns};

/// The `agents.*` extension of the Agent `me` in `directory`, and the runtime that
/// serves it.
///
/// Register the extension with `AgentBuilder::kit_extension` (its grants are its
/// record's `state`, the `tools` and the `prompt`); hand
/// [`ConversationAgents::source`] to the Subagents footer and
/// [`ConversationAgents::notify`] its handle; open the Agent, then
/// [`ConversationAgents::start`] the runtime. Each tool knows its run's sending Session.
pub fn extension(
    me: AgentName,
    directory: Arc<dyn AgentDirectory>,
) -> Result<(KitExtension<AgentsContract, SessionId>, ConversationAgents), KitError> {
    let (turn_ends, receiver) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared::new(me, directory, turn_ends)?);
    let kit = ExtensionKit::<AgentsContract, SessionId>::with_run_facts(NAMESPACE, |run| {
        run.session_id.clone()
    })?
    .session_state()
    .tools_description("Other Agents: give them work, answer their questions.")
    .prompt({
        let shared = shared.clone();
        move |_run| Some(tools::prompt_section(&shared))
    })
    .on_settled({
        let shared = shared.clone();
        move |tx, _settled| turns::hand_over(&shared, tx)
    });
    let extension = tools::tools(&shared)?
        .into_iter()
        .fold(kit, |kit, tool| kit.tool(tool))
        .build()?;
    let runtime = ConversationAgents {
        shared,
        turn_ends: Mutex::new(Some(receiver)),
    };
    Ok((extension, runtime))
}

/// One Agent's conversation-agents runtime: the footer's source, the footer's handle,
/// and the task that passes Asks to a person when a sender's turn ends.
pub struct ConversationAgents {
    shared: Arc<Shared>,
    turn_ends: Mutex<Option<mpsc::UnboundedReceiver<TurnEnded>>>,
}

impl std::fmt::Debug for ConversationAgents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationAgents")
            .field("me", &self.shared.me)
            .finish_non_exhaustive()
    }
}

impl ConversationAgents {
    /// The Subagents footer's source: the record of this Agent's Sessions and the
    /// directory's access to each child.
    pub fn source(&self) -> RecordSource {
        RecordSource::new(self.shared.clone())
    }

    /// Tells `subagents` when a Session records a new child, so its rows show at once.
    pub fn notify(&self, subagents: SubagentsHandle) {
        if self.shared.subagents.set(subagents).is_err() {
            tracing::debug!("the conversation agents already notify a footer");
        }
    }

    /// Starts the runtime on the opened Agent: tools may now reach it, and the task
    /// that passes Asks to a person when a sender's turn ends runs (abort the handle
    /// when the Agent closes). Call it once; a second call starts nothing.
    pub fn start(&self, agent: Agent) -> Option<tokio::task::JoinHandle<()>> {
        self.shared.started(agent);
        let receiver = self
            .turn_ends
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        Some(tokio::spawn(turns::run(self.shared.clone(), receiver)))
    }
}
