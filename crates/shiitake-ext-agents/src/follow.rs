//! Following a child's work: waiting in-turn for its reply (or a question it asks the
//! sender), and, once the tool returned, delivering what comes later to the sender's
//! Session as messages.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use shiitake_core::LocalSession;
use shiitake_ext_question::contract::{AskView, QuestionContract};
use shiitake_protocol::extension::{ExtensionViewV0, view};
use shiitake_protocol::message::{AssistantContent, Message};
use shiitake_protocol::{
    CommandId, PageLimit, PromptText, QueueState, ReadOptions, RequestId, SendOptions, SessionApi,
    SessionExtensionSlots, SessionFrame, SessionSnapshot, ShiitakeError, WatchOptions,
};

use crate::contract::{AgentName, MAX_REPLY_CHARS, SendResult, SendStatus};
use crate::runtime::{GoalNews, Shared};

/// Which work of the child counts as the reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Awaited {
    /// This command's terminal.
    Command(CommandId),
    /// Any terminal other than this one (the latest before an answer), or any at all.
    After(Option<CommandId>),
}

/// What has been seen of the child so far.
#[derive(Clone, Debug, Default)]
struct Seen {
    settled: bool,
    idle: bool,
    last_terminal: Option<CommandId>,
    waiting: Vec<AskView>,
}

impl Seen {
    fn terminal(&mut self, awaited: &Awaited, command_id: &CommandId) {
        self.last_terminal = Some(command_id.clone());
        self.settled |= match awaited {
            Awaited::Command(awaited) => awaited == command_id,
            Awaited::After(before) => before.as_ref() != Some(command_id),
        };
    }

    fn slots(&mut self, slots: &SessionExtensionSlots, parent: &str) {
        if let Ok(ExtensionViewV0::Running { value }) = view::<QuestionContract>(slots) {
            self.waiting = value
                .unwrap_or_default()
                .asks
                .into_iter()
                .filter(|ask| {
                    ask.waiting_on
                        .as_ref()
                        .is_some_and(|w| w.session_id == parent && !w.escalated)
                })
                .collect();
        }
    }

    fn snapshot(&mut self, snapshot: &SessionSnapshot, awaited: &Awaited, parent: &str) {
        match awaited {
            Awaited::Command(_) => {
                for terminal in &snapshot.terminals {
                    self.terminal(awaited, &terminal.command_id);
                }
            }
            // Only the latest terminal tells whether work ran since the answer.
            Awaited::After(_) => {
                if let Some(latest) = snapshot.terminals.last() {
                    self.terminal(awaited, &latest.command_id);
                }
            }
        }
        self.idle = snapshot.activity.queue == QueueState::Idle;
        self.slots(&snapshot.extensions, parent);
    }

    fn frame(&mut self, frame: &SessionFrame, awaited: &Awaited, parent: &str) {
        match frame {
            SessionFrame::Update(update) => {
                for terminal in &update.terminals {
                    self.terminal(awaited, &terminal.command_id);
                }
                self.idle = update.activity.queue == QueueState::Idle;
                self.slots(&update.extensions, parent);
            }
            SessionFrame::Reset(reset) => self.snapshot(&reset.baseline, awaited, parent),
            SessionFrame::Progress(_) => {}
        }
    }

    /// The awaited work settled, nothing runs or waits in the child, and no question of
    /// it waits on the sender: what it says now is its reply. (A child that stopped to
    /// ask the sender is not done: its work goes on once the sender answers, and it is
    /// done once a person was asked instead.)
    fn done(&self) -> bool {
        self.settled && self.idle && self.waiting.is_empty()
    }
}

/// What following found.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Found {
    /// The awaited work settled, the child is idle and nothing of it waits on the sender.
    Replied,
    /// Asks wait on the sender that it has not been told about.
    Asks(Vec<AskView>),
}

/// Watches `child` until it is done (see `Seen::done`), or (with `asks_known`) until
/// an Ask waits on `parent` that is not among them.
pub(crate) async fn next(
    child: &LocalSession,
    awaited: &Awaited,
    parent: &str,
    asks_known: Option<&BTreeSet<String>>,
) -> Result<Found, ShiitakeError> {
    let watch = child.watch(WatchOptions::default()).await?;
    let mut seen = Seen::default();
    seen.snapshot(&watch.snapshot, awaited, parent);
    let mut changes = watch.changes;
    loop {
        if seen.done() {
            return Ok(Found::Replied);
        }
        if let Some(known) = asks_known {
            let new: Vec<AskView> = seen
                .waiting
                .iter()
                .filter(|ask| !known.contains(ask.ask_id.as_str()))
                .cloned()
                .collect();
            if !new.is_empty() {
                return Ok(Found::Asks(new));
            }
        }
        match changes.next().await {
            Some(frame) => seen.frame(&frame?, awaited, parent),
            None => {
                return Err(ShiitakeError::unavailable(format!(
                    "the child Session {} stopped being observable",
                    child.session_id()
                )));
            }
        }
    }
}

/// The child's last words: the text of its latest assistant message, bounded.
pub(crate) async fn last_words(child: &LocalSession) -> Result<String, ShiitakeError> {
    let snapshot = child
        .read(ReadOptions {
            limit: PageLimit::new(20).ok(),
            ..ReadOptions::default()
        })
        .await?;
    let text = snapshot
        .messages
        .iter()
        .rev()
        .find_map(|message| match &message.value {
            Message::Assistant(assistant) => {
                let text: Vec<&str> = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        AssistantContent::Text(text) => Some(text.text.as_str()),
                        _ => None,
                    })
                    .collect();
                (!text.is_empty()).then(|| text.join("\n"))
            }
            _ => None,
        })
        .unwrap_or_default();
    Ok(cut(&text, MAX_REPLY_CHARS))
}

/// `text` at most `limit` characters, ending with `…` when cut.
pub(crate) fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The message that tells the sender what came of its work.
pub(crate) fn message(result: &SendResult) -> String {
    let json = serde_json::to_string(result).unwrap_or_default();
    match result.status {
        SendStatus::Replied => format!(
            "Agent {} replied (Session {}):\n{}\n\n{json}",
            result.agent,
            result.session_id,
            result.reply.as_deref().unwrap_or_default()
        ),
        SendStatus::WaitingOnYou | SendStatus::Working => format!(
            "Agent {} asks you (Session {}). Answer with agents.answer, or pass the question \
             to a person with agents.escalate; until then it waits.\n\n{json}",
            result.agent, result.session_id
        ),
    }
}

/// What one follower watches and whom it tells.
pub(crate) struct Follower {
    pub(crate) parent: LocalSession,
    pub(crate) child: LocalSession,
    pub(crate) agent: AgentName,
    pub(crate) command_id: CommandId,
    pub(crate) awaited: Awaited,
    /// Asks the sender was already told about.
    pub(crate) told: BTreeSet<String>,
}

impl Follower {
    /// Runs until the child is done: each new Ask that waits on the sender becomes one
    /// message to the sender's Session, and so does the reply. Request ids make a message sent twice count once.
    ///
    /// The sender's goal learns that the command was replied to, or settled when the
    /// child can no longer be followed.
    pub(crate) async fn run(mut self, shared: &Shared) {
        let parent_id = self.parent.session_id().as_str().to_owned();
        loop {
            let found = match next(&self.child, &self.awaited, &parent_id, Some(&self.told)).await {
                Ok(found) => found,
                Err(error) => {
                    tracing::warn!(child = %self.child.session_id(), %error, "stopped following a child");
                    shared
                        .tell_goal(&self.parent, &self.command_id, GoalNews::Settled)
                        .await;
                    return;
                }
            };
            let (result, request, last) = match found {
                Found::Asks(asks) => {
                    let first = asks
                        .first()
                        .map(|ask| ask.ask_id.as_str().to_owned())
                        .unwrap_or_default();
                    self.told
                        .extend(asks.iter().map(|ask| ask.ask_id.as_str().to_owned()));
                    (
                        self.result(SendStatus::WaitingOnYou, None, asks),
                        format!("agents-asks:{first}"),
                        false,
                    )
                }
                Found::Replied => {
                    let words = match last_words(&self.child).await {
                        Ok(words) => words,
                        Err(error) => {
                            tracing::warn!(%error, "the child's reply could not be read");
                            String::new()
                        }
                    };
                    let asks = Vec::new();
                    let tag = match &self.awaited {
                        Awaited::Command(id) => id.as_str().to_owned(),
                        Awaited::After(_) => ulid_like(&self.child),
                    };
                    (
                        self.result(SendStatus::Replied, Some(words), asks),
                        format!("agents-reply:{tag}"),
                        true,
                    )
                }
            };
            self.tell(&result, &request).await;
            if last {
                // After the reply is delivered, so a goal continuation comes after it.
                shared
                    .tell_goal(&self.parent, &self.command_id, GoalNews::Replied)
                    .await;
                return;
            }
        }
    }

    fn result(&self, status: SendStatus, reply: Option<String>, asks: Vec<AskView>) -> SendResult {
        SendResult {
            agent: self.agent.clone(),
            session_id: self.child.session_id().as_str().to_owned(),
            command_id: self.command_id.as_str().to_owned(),
            status,
            reply,
            waiting_on_you: asks,
        }
    }

    async fn tell(&self, result: &SendResult, request: &str) {
        let text = match PromptText::new(message(result)) {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(%error, "a reply message did not fit a prompt");
                return;
            }
        };
        let options = SendOptions {
            request_id: RequestId::new(request).ok(),
            delivery: None,
        };
        if let Err(error) = self.parent.send(text, options).await {
            tracing::warn!(parent = %self.parent.session_id(), %error, "a reply could not be delivered");
        }
    }
}

/// Runs `follower` on its own task, unless one already follows the same child for the
/// same sender (its reply would come twice).
pub(crate) fn spawn(shared: &Arc<Shared>, follower: Follower) {
    let key = (
        follower.parent.session_id().clone(),
        follower.child.session_id().clone(),
    );
    if !shared.follow(key.clone()) {
        return;
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        follower.run(&shared).await;
        shared.unfollow(&key);
    });
}

/// A tag for a reply that follows no one command (after an answer): the child's
/// Session plus a fresh id, so it is delivered once per follower.
fn ulid_like(child: &LocalSession) -> String {
    format!(
        "{}:{}",
        child.session_id(),
        shiitake_core::ids::request_id().as_str()
    )
}
