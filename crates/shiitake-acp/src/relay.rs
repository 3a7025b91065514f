//! One run of a Session, relayed to the editor as it goes: its frames as updates
//! (`updates.rs`), its waiting approvals as permission requests (`permissions.rs`), a
//! new question as the end of the turn (`questions.rs`), and its terminal as the stop
//! reason. A prompt follows the run it started (or the one its answer lets go on);
//! `session/load` follows the run it found going on, until a prompt takes over.

use std::collections::HashSet;

use agent_client_protocol::{
    self as acp, Client as _, ContentBlock, SessionNotification, SessionUpdate, StopReason,
};
use futures::StreamExt;
use shiitake_protocol::message::{Message, StopReason as ModelStop};
use shiitake_protocol::{
    AgentApi, CommandId, FrameStream, QueueState, SessionApi, SessionExtensionSlots, SessionFrame,
    TerminalOutcome,
};

use crate::editor::{Editor, to_acp};
use crate::permissions::{Asked, OpenCalls};
use crate::questions;
use crate::updates::LiveRun;

/// Where a run's updates go, and what it needs to ask the editor.
pub(crate) struct Relay<A: AgentApi> {
    pub(crate) agent: A,
    pub(crate) editor: Editor,
    pub(crate) asked: Asked,
    pub(crate) acp_session: acp::SessionId,
    pub(crate) session: A::Session,
}

/// What a followed run's Session showed so far.
pub(crate) struct Seen {
    /// The run's messages as updates.
    pub(crate) run: LiveRun,
    /// Its tool calls without results (a waiting approval holds one).
    pub(crate) calls: OpenCalls,
    /// The questions already shown (or answered) in this turn.
    pub(crate) asks: HashSet<String>,
}

impl Seen {
    /// Nothing yet, for an editor working in `folder`.
    pub(crate) fn in_folder(folder: Option<std::path::PathBuf>) -> Self {
        Self {
            run: LiveRun::in_folder(folder),
            calls: OpenCalls::default(),
            asks: HashSet::new(),
        }
    }
}

impl<A> Relay<A>
where
    A: AgentApi + 'static,
    A::Session: 'static,
{
    /// Sends one update to the editor.
    pub(crate) async fn notify(&self, update: SessionUpdate) -> Result<(), acp::Error> {
        let editor = self.editor.get().ok_or_else(|| {
            acp::Error::internal_error().data("the editor's connection is not up")
        })?;
        editor
            .session_notification(SessionNotification::new(self.acp_session.clone(), update))
            .await
    }

    /// Sends `text` as the agent's message.
    pub(crate) async fn say(&self, text: String) -> Result<(), acp::Error> {
        let chunk = acp::ContentChunk::new(ContentBlock::from(text));
        self.notify(SessionUpdate::AgentMessageChunk(chunk)).await
    }

    /// Asks the editor about the approvals of `slots` it was not asked about yet.
    pub(crate) fn ask_permissions(&self, slots: &SessionExtensionSlots, calls: &OpenCalls) {
        let id = self.session.session_id().clone();
        self.asked.ask_new(
            &self.editor,
            || self.agent.session(id.clone()),
            &self.acp_session,
            slots,
            calls,
        );
    }

    /// Relays `command`'s run from `changes` until its terminal (its stop reason) or a
    /// new question (`end_turn`: the next prompt answers it).
    pub(crate) async fn follow(
        &self,
        command: &CommandId,
        changes: &mut FrameStream,
        seen: &mut Seen,
    ) -> Result<StopReason, acp::Error> {
        let mut last_stop = None;
        loop {
            let Some(frame) = changes.next().await else {
                return Err(acp::Error::internal_error().data("the Session's frames ended"));
            };
            match frame.map_err(to_acp)? {
                SessionFrame::Progress(progress) => {
                    let ours = matches!(&progress.activity.queue,
                        QueueState::Running { command_id, .. } if command_id == command);
                    if ours {
                        for update in seen.run.progress(&progress.progress) {
                            self.notify(update).await?;
                        }
                    }
                }
                SessionFrame::Update(update) => {
                    for message in update
                        .messages
                        .iter()
                        .filter(|message| message.command_id.as_ref() == Some(command))
                    {
                        if let Message::Assistant(assistant) = &message.value {
                            last_stop = Some(assistant.stop_reason);
                        }
                        seen.calls.see(&message.value);
                        for update in seen.run.committed(&message.id, &message.value) {
                            self.notify(update).await?;
                        }
                    }
                    self.ask_permissions(&update.extensions, &seen.calls);
                    if let Some(ask) = questions::waiting(&update.extensions)
                        .into_iter()
                        .find(|ask| seen.asks.insert(ask.ask_id.as_str().to_owned()))
                    {
                        self.say(questions::message(&ask)).await?;
                        return Ok(StopReason::EndTurn);
                    }
                    if let Some(terminal) = update
                        .terminals
                        .iter()
                        .find(|terminal| terminal.command_id == *command)
                    {
                        return stop_reason(
                            terminal.outcome,
                            terminal.diagnostic.clone(),
                            last_stop,
                        );
                    }
                }
                SessionFrame::Reset(_) => {
                    return Err(acp::Error::internal_error()
                        .data("the Session's history moved on; load the Session again"));
                }
            }
        }
    }
}

/// How a run ended, as an ACP stop reason; a failed run is an error with the
/// Session's diagnostic.
pub(crate) fn stop_reason(
    outcome: TerminalOutcome,
    diagnostic: Option<String>,
    last_stop: Option<ModelStop>,
) -> Result<StopReason, acp::Error> {
    match outcome {
        TerminalOutcome::Completed if last_stop == Some(ModelStop::Length) => {
            Ok(StopReason::MaxTokens)
        }
        TerminalOutcome::Completed => Ok(StopReason::EndTurn),
        TerminalOutcome::Cancelled | TerminalOutcome::Interrupted => Ok(StopReason::Cancelled),
        TerminalOutcome::Failed => Err(acp::Error::internal_error()
            .data(diagnostic.unwrap_or_else(|| "the run failed".to_owned()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminals_map_to_stop_reasons() {
        assert_eq!(
            stop_reason(TerminalOutcome::Completed, None, Some(ModelStop::Stop)).unwrap(),
            StopReason::EndTurn
        );
        assert_eq!(
            stop_reason(TerminalOutcome::Completed, None, Some(ModelStop::Length)).unwrap(),
            StopReason::MaxTokens
        );
        assert_eq!(
            stop_reason(TerminalOutcome::Cancelled, None, None).unwrap(),
            StopReason::Cancelled
        );
        let failed =
            stop_reason(TerminalOutcome::Failed, Some("model down".into()), None).unwrap_err();
        assert_eq!(failed.data, Some(serde_json::json!("model down")));
    }
}
