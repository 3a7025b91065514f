//! One Agent's conversation-agents runtime: what its extension, tools, turn-end task
//! and footer source share, and how a host puts them together.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use shiitake_core::{Agent, LocalSession};
use shiitake_ext_subagents::SubagentsHandle;
use shiitake_protocol::{BoundError, CommandId, ExtensionId, SessionApi, SessionId, ShiitakeError};
use tokio::sync::{mpsc, watch};

use crate::contract::AgentName;
use crate::directory::AgentDirectory;
use crate::extension::ConversationAgentsExtension;
use crate::source::RecordSource;
use crate::turns::{self, TurnEnded};

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
    pub(crate) question_id: ExtensionId,
    /// The goal extension: a Session's goal learns of the work it sent (`goal::roster`).
    pub(crate) goal_id: ExtensionId,
    /// (sender, child) Sessions a follower watches now.
    followers: Mutex<std::collections::HashSet<(SessionId, SessionId)>>,
}

impl Shared {
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

/// One Agent's conversation agents: build it, hand [`Self::source`] to the
/// Subagents extension, add [`Self::extension`] with
/// [`agents_grants`](crate::agents_grants), open the Agent, then [`Self::start`] it.
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
    /// The conversation agents of the Agent `me` in `directory`.
    pub fn new(me: AgentName, directory: Arc<dyn AgentDirectory>) -> Result<Self, BoundError> {
        let (sender, receiver) = mpsc::unbounded_channel();
        Ok(Self {
            shared: Arc::new(Shared {
                me,
                directory,
                agent: watch::Sender::new(None),
                subagents: OnceLock::new(),
                turn_ends: sender,
                question_id: shiitake_ext_question::extension_id()?,
                goal_id: shiitake_ext_goal::extension_id()?,
                followers: Mutex::new(std::collections::HashSet::new()),
            }),
            turn_ends: Mutex::new(Some(receiver)),
        })
    }

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

    /// The extension to add to the Agent.
    pub fn extension(&self) -> Result<ConversationAgentsExtension, BoundError> {
        ConversationAgentsExtension::new(self.shared.clone())
    }

    /// Starts the runtime on the opened Agent: tools may now reach it, and the task
    /// that passes Asks to a person when a sender's turn ends runs (abort the handle
    /// when the Agent closes). Call it once; a second call starts nothing.
    pub fn start(&self, agent: Agent) -> Option<tokio::task::JoinHandle<()>> {
        self.shared.agent.send_replace(Some(agent));
        let receiver = self
            .turn_ends
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        Some(tokio::spawn(turns::run(self.shared.clone(), receiver)))
    }
}
