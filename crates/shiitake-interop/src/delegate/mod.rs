//! One prompt handed to an Agent by another program (an MCP client, an A2A client),
//! followed to its end from the Session's durable transcript, never from memory of
//! this process: a retried start names the same run (its idempotency key is the
//! prompt's `requestId`), and following a run after a disconnect, a restart or on
//! another Hub process reads the same messages and the same ending.
//!
//! A run that needs a person (an Ask of the Question extension, a call waiting for an
//! approval) stops the follow with [`Waited::Needs`]; the answer goes into that
//! extension ([`Delegate::answer`]) and the run goes on.

mod follow;
mod needed;
mod text;

use std::sync::Arc;

use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract};
use shiitake_ext_question::contract::QuestionContract;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::{
    AgentApi, CommandId, CommandOutcome, PromptDelivery, PromptText, RequestId, SessionApi,
    SessionCommand, SessionId, ShiitakeError, TerminalOutcome,
};

pub use needed::{Needed, Reply};
pub use text::{assistant_text, message_line};

/// Where a delegated prompt went: its Session and the command of its run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// The Session the prompt joined (a new one when none was named).
    pub session_id: SessionId,
    /// The accepted prompt's command: its run.
    pub command_id: CommandId,
}

/// How a followed run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Ended {
    /// Completed, failed, cancelled or interrupted.
    pub outcome: TerminalOutcome,
    /// What a person should know of the ending (a failure's reason).
    pub diagnostic: Option<String>,
    /// The run's last answer in words (empty when it gave none).
    pub text: String,
}

/// Where following a run stopped.
#[derive(Clone, Debug, PartialEq)]
pub enum Waited {
    /// The run ended.
    Ended(Ended),
    /// The run waits for a person.
    Needs(Needed),
}

/// Prompts, follows and answers runs of one Agent, for the protocols of this crate.
pub struct Delegate<A> {
    agent: Arc<A>,
}

impl<A> Clone for Delegate<A> {
    fn clone(&self) -> Self {
        Self {
            agent: self.agent.clone(),
        }
    }
}

impl<A: AgentApi + 'static> Delegate<A> {
    /// Delegates to `agent`.
    pub fn new(agent: Arc<A>) -> Self {
        Self { agent }
    }

    /// The Agent delegated to.
    pub fn agent(&self) -> &A {
        &self.agent
    }

    /// Queues `text` as a follow-up of `session` (a new Session when `None`). With a
    /// `key`, a retry starts nothing new: the key is the Session's creation request and
    /// the prompt's `requestId`, so the same Session and command come back.
    pub async fn start(
        &self,
        session: Option<SessionId>,
        text: PromptText,
        key: Option<RequestId>,
    ) -> Result<Started, ShiitakeError> {
        let session_id = match session {
            Some(session) => session,
            None => {
                let request = match &key {
                    Some(key) => key.clone(),
                    None => fresh_request_id()?,
                };
                self.agent.create_session(request).await?
            }
        };
        let handle = self.agent.session(session_id.clone());
        let request_id = key.unwrap_or_else(|| handle.new_request_id());
        let outcome = handle
            .command(SessionCommand::Prompt {
                request_id,
                text,
                delivery: PromptDelivery::FollowUp,
            })
            .await?;
        match outcome {
            CommandOutcome::Accepted(accepted) => Ok(Started {
                session_id,
                command_id: accepted.command_id,
            }),
            _ => Err(ShiitakeError::internal("a prompt was not accepted as work")),
        }
    }

    /// Follows `command` of `session` until it ends or needs a person; `seen` is
    /// called once for every message the run committed, in order, from the first one
    /// still in the Session's recent history.
    pub async fn follow(
        &self,
        session: &SessionId,
        command: &CommandId,
        seen: impl FnMut(&shiitake_protocol::SessionMessage),
    ) -> Result<Waited, ShiitakeError> {
        follow::follow(&self.agent.session(session.clone()), command, seen).await
    }

    /// What `command` of `session` waits on now, if it waits on a person.
    pub async fn needed(
        &self,
        session: &SessionId,
        command: &CommandId,
    ) -> Result<Option<Needed>, ShiitakeError> {
        follow::needed_now(&self.agent.session(session.clone()), command).await
    }

    /// Answers what `needed` asked with `reply`; the `request` makes a retry of the same
    /// answer a no-op. `invalid` when the reply does not answer it.
    pub async fn answer(
        &self,
        session: &SessionId,
        needed: &Needed,
        reply: &Reply,
        request: String,
    ) -> Result<(), ShiitakeError> {
        let handle = self.agent.session(session.clone());
        match needed {
            Needed::Ask(ask) => {
                let answer = needed::ask_answer(ask, reply, request)?;
                bind_session_extension::<_, QuestionContract>(&handle)
                    .call(&answer)
                    .await?;
            }
            Needed::Approval(approval) => {
                let decision = needed::decision(reply)?;
                bind_session_extension::<_, ApprovalContract>(&handle)
                    .call(&AnswerApproval {
                        approval_id: approval.approval_id.clone(),
                        request_id: request,
                        decision,
                        reason: None,
                    })
                    .await?;
            }
        }
        Ok(())
    }
}

/// A request id nobody else makes: the time and a counter of this process.
fn fresh_request_id() -> Result<RequestId, ShiitakeError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    RequestId::new(format!("delegate-{nanos:x}-{}-{n}", std::process::id()))
        .map_err(|error| ShiitakeError::internal(error.to_string()))
}
