//! A finished extension transaction staged into a Session's commit: its rows
//! become ops, its admissions accepted commands, its lines lineage entries (or
//! lines waiting for the running work's boundary), and everything the owner keeps
//! in memory waits in [`Staged`] until the commit stands.

use shiitake_protocol::{ExtensionId, OperatorAuthor, PromptText, SessionCommand};

use super::extension_state::AttentionChange;
use super::lines::extension_line;
use super::queue::QueuedPrompt;
use super::record::take;
use super::waiting::WaitingLine;
use crate::extension::host::{Finished, Registered, Writes};
use crate::extension::{Origin, Provenance};
use crate::store::{CommandKind, CommandState, Op, SessionHeader, StoredCommand, StoredEntry};

/// What a committed transaction changes in the owner's memory, applied only after commit.
#[derive(Default)]
pub(super) struct Staged {
    pub(super) session_writes: Vec<(ExtensionId, Writes)>,
    pub(super) agent_writes: Vec<(ExtensionId, Writes)>,
    pub(super) attention: Vec<AttentionChange>,
    pub(super) queued: Vec<QueuedPrompt>,
    /// Extension lines appended by the commit, to publish.
    pub(super) entries: Vec<StoredEntry>,
    /// Extension lines that wait for the running work's next boundary.
    pub(super) waiting_lines: Vec<WaitingLine>,
    pub(super) stops: Vec<(ExtensionId, String)>,
    pub(super) timers_changed: bool,
}

/// The commit a hook's transaction is staged into: the next header (rows take
/// their sequences from it), its ops, and what to adopt once it is committed.
pub(super) struct StagedCommit<'a> {
    pub(super) header: &'a mut SessionHeader,
    pub(super) ops: &'a mut Vec<Op>,
    pub(super) staged: &'a mut Staged,
}

impl StagedCommit<'_> {
    /// Stages a finished transaction of `registered`: its ops and admissions into
    /// the commit, its effects into [`Staged`]; returns the hook's value. `running`
    /// says whether work runs, so its lines wait for the next boundary.
    pub(super) fn stage<T>(
        &mut self,
        registered: &Registered,
        finished: Finished<T>,
        running: bool,
    ) -> T {
        let id = registered.definition.id.clone();
        self.ops.extend(finished.ops);
        for admission in finished.admissions {
            let origin = Origin {
                extension_id: id.clone(),
                correlation: admission.correlation,
            };
            let request_id = crate::ids::request_id();
            let command = SessionCommand::Prompt {
                request_id: request_id.clone(),
                text: admission.text.clone(),
                delivery: admission.delivery,
            };
            let provenance = Provenance {
                origin: Some(origin),
                sender: None,
            };
            let stored = StoredCommand {
                id: admission.command_id,
                request_id: Some(request_id),
                origin: provenance.to_stored(),
                kind: CommandKind::Prompt,
                payload: serde_json::to_string(&command).unwrap_or_default(),
                accepted_sequence: take(self.header),
                state: CommandState::Pending,
                run_id: None,
                recoveries: 0,
            };
            self.staged.queued.push(QueuedPrompt {
                command_id: stored.id.clone(),
                text: admission.text,
                delivery: admission.delivery,
                provenance,
            });
            self.ops.push(Op::InsertCommand {
                session_id: self.header.id.clone(),
                command: stored,
            });
        }
        for text in finished.lines {
            self.stage_line(&id, text, running);
        }
        for (kind, change) in finished.attention {
            self.staged.attention.push((id.clone(), kind, change));
        }
        self.staged
            .session_writes
            .push((id.clone(), finished.session_writes));
        self.staged.agent_writes.push((id, finished.agent_writes));
        self.staged.timers_changed |= finished.timers_changed;
        finished.value
    }

    /// Stages one extension chat line: an operator-kind command carrying the
    /// extension as its origin, appended now when no work runs, else waiting for the
    /// running work's next boundary (like an operator line).
    fn stage_line(&mut self, id: &ExtensionId, text: PromptText, running: bool) {
        let request_id = crate::ids::request_id();
        let command = SessionCommand::Operator {
            request_id: request_id.clone(),
            author: OperatorAuthor::Operator,
            text: text.clone(),
        };
        let provenance = Provenance {
            origin: Some(Origin {
                extension_id: id.clone(),
                correlation: String::new(),
            }),
            sender: None,
        };
        let stored = StoredCommand {
            id: crate::ids::command_id(),
            request_id: Some(request_id),
            origin: provenance.to_stored(),
            kind: CommandKind::Operator,
            payload: serde_json::to_string(&command).unwrap_or_default(),
            accepted_sequence: take(self.header),
            state: if running {
                CommandState::Pending
            } else {
                CommandState::Settled
            },
            run_id: None,
            recoveries: 0,
        };
        let message = extension_line(id, &text);
        let command_id = stored.id.clone();
        self.ops.push(Op::InsertCommand {
            session_id: self.header.id.clone(),
            command: stored,
        });
        if running {
            self.staged.waiting_lines.push(WaitingLine {
                command_id,
                message,
            });
            return;
        }
        // A lineage entry after the current leaf, which moves to it.
        let entry = StoredEntry {
            id: crate::ids::entry_id(),
            parent: self.header.leaf.clone(),
            sequence: take(self.header),
            command_id: None,
            message,
        };
        self.header.leaf = Some(entry.id.clone());
        self.ops.push(Op::InsertEntry {
            session_id: self.header.id.clone(),
            entry: entry.clone(),
        });
        self.staged.entries.push(entry);
    }
}
