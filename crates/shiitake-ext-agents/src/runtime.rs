//! What the pieces of one Agent's conversation agents share: this Agent (once the host
//! started it), the directory, the footer's handle, the turn-end channel, the goal's
//! news and which children are followed. Everything else builds on it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use shiitake_core::extension::kit::KitError;
use shiitake_core::{Agent, LocalSession};
use shiitake_ext_subagents::SubagentsHandle;
use shiitake_protocol::{AgentApi, CommandId, ExtensionId, SessionApi, SessionId, ShiitakeError};
use tokio::sync::{mpsc, watch};

use crate::contract::{AgentName, EXTENSION_ID};
use crate::directory::AgentDirectory;

/// A sending Session's run settled; these are the children it reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TurnEnded {
    pub(crate) parent: SessionId,
    pub(crate) children: Vec<(AgentName, String)>,
}

/// What the sending Session's goal is told about a command it sent.
#[derive(Clone, Debug)]
pub(crate) enum GoalNews {
    /// Accepted by the child's Session, sent to this Agent.
    Sent(AgentName),
    /// The child's work on it settled without a reply to deliver.
    Settled,
    /// The child settled and replied.
    Replied,
}

/// What the pieces of one Agent's conversation agents share.
pub(crate) struct Shared {
    /// This Agent's name: how the Agents it sends work to call it.
    pub(crate) me: AgentName,
    pub(crate) directory: Arc<dyn AgentDirectory>,
    /// This Agent, once the host opened it and started the runtime.
    agent: watch::Sender<Option<Agent>>,
    /// Told when a Session's children change, so its footer is read again.
    pub(crate) subagents: OnceLock<SubagentsHandle>,
    pub(crate) turn_ends: mpsc::UnboundedSender<TurnEnded>,
    /// This extension: the record is read in its state.
    pub(crate) own_id: ExtensionId,
    pub(crate) question_id: ExtensionId,
    /// The goal extension: a Session's goal learns of the work it sent (`goal::roster`).
    pub(crate) goal_id: ExtensionId,
    /// (sender, child) Sessions a follower watches now.
    followers: Mutex<HashSet<(SessionId, SessionId)>>,
}

/// The id of an extension this runtime reaches, as the kit reports a bad one.
fn id_of(id: &str) -> Result<ExtensionId, KitError> {
    ExtensionId::new(id).map_err(|error| KitError::Id {
        id: id.to_owned(),
        reason: error.to_string(),
    })
}

impl Shared {
    /// The runtime of the Agent `me` in `directory`; a settled turn is handed to
    /// `turn_ends`.
    pub(crate) fn new(
        me: AgentName,
        directory: Arc<dyn AgentDirectory>,
        turn_ends: mpsc::UnboundedSender<TurnEnded>,
    ) -> Result<Self, KitError> {
        Ok(Self {
            me,
            directory,
            agent: watch::Sender::new(None),
            subagents: OnceLock::new(),
            turn_ends,
            own_id: id_of(EXTENSION_ID)?,
            question_id: id_of(shiitake_ext_question::contract::EXTENSION_ID)?,
            goal_id: id_of(shiitake_ext_goal::contract::EXTENSION_ID)?,
            followers: Mutex::new(HashSet::new()),
        })
    }

    /// The host opened this Agent: tools and the footer's source may reach it now.
    pub(crate) fn started(&self, agent: Agent) {
        self.agent.send_replace(Some(agent));
    }

    /// Claims following `key`; `false` when a follower already does.
    pub(crate) fn follow(&self, key: (SessionId, SessionId)) -> bool {
        self.followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key)
    }

    /// Releases `key` when its follower ends.
    pub(crate) fn unfollow(&self, key: &(SessionId, SessionId)) {
        self.followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// This Agent; waits for the host to start the runtime (a run resumed while the
    /// Agent opened may call a tool before that).
    pub(crate) async fn agent(&self) -> Result<Agent, ShiitakeError> {
        let mut receiver = self.agent.subscribe();
        let agent = receiver
            .wait_for(Option::is_some)
            .await
            .map_err(|_| ShiitakeError::unavailable("the Agent is closing"))?;
        agent
            .clone()
            .ok_or_else(|| ShiitakeError::unavailable("the Agent is not started"))
    }

    /// The Agent named `name`, or an error that lists whom one can reach.
    pub(crate) fn reach(&self, name: &AgentName) -> Result<Agent, ShiitakeError> {
        self.directory.agent(name).ok_or_else(|| {
            let known: Vec<String> = self
                .directory
                .names()
                .into_iter()
                .map(String::from)
                .collect();
            ShiitakeError::not_found(format!(
                "no Agent named {name}; the Agents here are: {}",
                known.join(", ")
            ))
        })
    }

    /// Tells the sending Session's goal how a command it sent stands
    /// (`shiitake_ext_goal::roster`): sent, settled, or replied. The goal then waits on
    /// live work instead of counting a stall. A failure is logged: the goal's recheck
    /// timer still looks again.
    pub(crate) async fn tell_goal(
        &self,
        parent: &LocalSession,
        command: &CommandId,
        news: GoalNews,
    ) {
        let command_id = command.as_str().to_owned();
        let outcome = parent
            .host_transaction(&self.goal_id, move |tx| match &news {
                GoalNews::Sent(to) => {
                    shiitake_ext_goal::roster::command_sent(tx, &command_id, to.as_str())
                }
                GoalNews::Settled => shiitake_ext_goal::roster::command_settled(tx, &command_id),
                GoalNews::Replied => shiitake_ext_goal::roster::command_replied(tx, &command_id),
            })
            .await;
        if let Err(error) = outcome {
            tracing::warn!(parent = %parent.session_id(), command = %command, %error, "the goal did not learn of a sent command");
        }
    }

    /// Tells the footer that `session_id`'s children changed.
    pub(crate) fn children_changed(&self, session_id: &SessionId) {
        if let Some(subagents) = self.subagents.get() {
            subagents.children_changed(session_id);
        }
    }
}

/// The Session `session_id` (as the record keeps it) of `agent`.
pub(crate) fn session_of(agent: &Agent, session_id: &str) -> Result<LocalSession, ShiitakeError> {
    let id = SessionId::new(session_id)
        .map_err(|error| ShiitakeError::invalid(format!("session id: {error}")))?;
    Ok(agent.session(id))
}
