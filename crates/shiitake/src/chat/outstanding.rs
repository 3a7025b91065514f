//! The prompts `chat` sent that no frame has shown yet.
//!
//! A frame published before an acceptance can arrive after `send` returned (an
//! extension update from a slash flow, say). It shows the Session idle with nothing
//! waiting, yet the prompt is on its way, and piped `chat` would leave before its run.
//! So a sent prompt stays outstanding until a frame names its command: waiting, at the
//! head of the queue, running, or settled. Frames after that one are in order, and the
//! Session's own queue says when it is done.

use shiitake_protocol::{
    CommandId, QueueState, SessionActivity, SessionFrame, SessionPendingPrompts, SessionTerminal,
};

/// Commands this chat sent that no frame has named yet.
#[derive(Debug, Default)]
pub struct Outstanding {
    ids: Vec<CommandId>,
}

impl Outstanding {
    /// Counts `id` as sent and not yet seen.
    pub fn sent(&mut self, id: CommandId) {
        self.ids.push(id);
    }

    /// Whether every sent command has shown up in a frame.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Forgets the commands `frame` names.
    pub fn observe(&mut self, frame: &SessionFrame) {
        if self.ids.is_empty() {
            return;
        }
        match frame {
            SessionFrame::Update(update) => {
                self.seen(&update.pending, &update.activity, &update.terminals);
            }
            SessionFrame::Progress(progress) => {
                self.seen(&SessionPendingPrompts::default(), &progress.activity, &[]);
            }
            // A fresh baseline is the Session as it is now, and its page may no
            // longer list a command that settled: its queue speaks for everything sent,
            // so a piped chat never waits on a command no frame will name again.
            SessionFrame::Reset(_) => self.ids.clear(),
        }
    }

    fn seen(
        &mut self,
        pending: &SessionPendingPrompts,
        activity: &SessionActivity,
        terminals: &[SessionTerminal],
    ) {
        let head = match &activity.queue {
            QueueState::Idle => None,
            QueueState::Queued { command_id } | QueueState::Running { command_id } => {
                Some(command_id)
            }
        };
        self.ids.retain(|id| {
            head != Some(id)
                && !pending
                    .prompts
                    .iter()
                    .any(|prompt| &prompt.command_id == id)
                && !terminals.iter().any(|terminal| &terminal.command_id == id)
        });
    }
}

#[cfg(test)]
mod tests {
    use shiitake_protocol::{
        FrameDelivery, PromptDelivery, PromptText, ResetFrame, ResetReason, SessionId,
        SessionPendingPrompt, SessionSnapshot, TerminalOutcome, UpdateFrame,
    };

    use super::*;

    fn id(text: &str) -> CommandId {
        CommandId::new(text).expect("a valid command id")
    }

    fn update(pending: &[&str], queue: QueueState, terminals: &[&str]) -> SessionFrame {
        SessionFrame::Update(UpdateFrame {
            delivery: FrameDelivery::Live,
            cursor: None,
            pending: SessionPendingPrompts {
                prompts: pending
                    .iter()
                    .map(|command| SessionPendingPrompt {
                        command_id: id(command),
                        text: PromptText::new("hello").expect("a valid prompt"),
                        delivery: PromptDelivery::FollowUp,
                    })
                    .collect(),
                has_more: false,
            },
            messages: Vec::new(),
            terminals: terminals
                .iter()
                .enumerate()
                .map(|(sequence, command)| SessionTerminal {
                    command_id: id(command),
                    outcome: TerminalOutcome::Completed,
                    sequence: sequence as u64,
                    diagnostic: None,
                })
                .collect(),
            compactions: None,
            sandbox_failures: None,
            activity: SessionActivity {
                queue,
                ..SessionActivity::default()
            },
            extensions: Default::default(),
            footer: Vec::new(),
        })
    }

    #[test]
    fn a_stale_idle_frame_does_not_settle_a_sent_prompt() {
        let mut outstanding = Outstanding::default();
        outstanding.sent(id("cmd_a"));
        // Published before the acceptance: idle, nothing waiting, another command settled.
        outstanding.observe(&update(&[], QueueState::Idle, &["cmd_old"]));
        assert!(!outstanding.is_empty());
        outstanding.observe(&update(&["cmd_other"], QueueState::Idle, &[]));
        assert!(!outstanding.is_empty());
        outstanding.observe(&update(&["cmd_a"], QueueState::Idle, &[]));
        assert!(outstanding.is_empty());
    }

    #[test]
    fn a_running_head_or_a_terminal_names_a_command_too() {
        let mut outstanding = Outstanding::default();
        outstanding.sent(id("cmd_a"));
        outstanding.sent(id("cmd_b"));
        outstanding.observe(&update(
            &[],
            QueueState::Running {
                command_id: id("cmd_a"),
            },
            &[],
        ));
        assert!(!outstanding.is_empty(), "cmd_b is still unseen");
        outstanding.observe(&update(&[], QueueState::Idle, &["cmd_b"]));
        assert!(outstanding.is_empty());
    }

    #[test]
    fn a_reset_baseline_speaks_for_every_sent_command() {
        let mut outstanding = Outstanding::default();
        outstanding.sent(id("cmd_a"));
        outstanding.sent(id("cmd_b"));
        let baseline = SessionSnapshot {
            session_id: SessionId::new("ses_reset").expect("a valid Session id"),
            cursor: None,
            has_more: false,
            oldest_cursor: None,
            messages: Vec::new(),
            terminals: Vec::new(),
            compactions: None,
            sandbox_failures: None,
            pending: SessionPendingPrompts::default(),
            activity: SessionActivity::default(),
            progress: None,
            extensions: Default::default(),
            footer: Vec::new(),
        };
        // An empty page that names neither command still ends the wait.
        outstanding.observe(&SessionFrame::Reset(Box::new(ResetFrame {
            reason: ResetReason::HistoryUnavailable,
            cursor: None,
            baseline,
        })));
        assert!(outstanding.is_empty());
    }
}
