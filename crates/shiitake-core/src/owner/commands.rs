//! The accepted-command door: prompt, cancel, abort, branch, fork, operator.

use shiitake_protocol::{
    Accepted, CancelResult, CommandId, CommandOutcome, EntryId, ForkedSession, OperatorAuthor,
    PromptDelivery, PromptText, RequestId, SessionCommand, SessionInboxState, ShiitakeError,
    TerminalOutcome, TooLate,
};

use super::lines::{operator_message, prompt_message};
use super::record::take;
use super::{Owner, Published, QueuedPrompt, WaitingLine};
use crate::clock::now_ms;
use crate::extension::{Origin, Provenance, Sender, Settled};
use crate::ids;
use crate::store::{CommandKind, CommandState, Op, SessionHeader, StoredCommand, StoredEntry};

/// Longest title taken from a first prompt, in characters.
const TITLE_CHARS: usize = 80;

fn title_from(text: &PromptText) -> String {
    let line = text.as_str().trim().lines().next().unwrap_or_default();
    let mut title: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    title
}

fn canonical(command: &SessionCommand) -> Result<String, ShiitakeError> {
    serde_json::to_string(command)
        .map_err(|error| ShiitakeError::internal(format!("command does not encode: {error}")))
}

impl Owner {
    pub(super) async fn command(
        &mut self,
        command: SessionCommand,
        sender: Option<Sender>,
    ) -> Result<CommandOutcome, ShiitakeError> {
        let outcome = self.command_inner(&command, sender).await;
        // Prompts are counted where they commit (a retry answers without committing).
        match &outcome {
            Ok(CommandOutcome::Accepted(_) | CommandOutcome::Cancel(CancelResult::TooLate(_))) => {}
            Ok(_) => crate::telemetry::command_accepted(&command),
            Err(_) => {}
        }
        outcome
    }

    async fn command_inner(
        &mut self,
        command: &SessionCommand,
        sender: Option<Sender>,
    ) -> Result<CommandOutcome, ShiitakeError> {
        match command {
            SessionCommand::Prompt {
                request_id,
                text,
                delivery,
            } => {
                let payload = canonical(command)?;
                let provenance = Provenance {
                    origin: None,
                    sender,
                };
                self.prompt(
                    request_id.clone(),
                    text.clone(),
                    *delivery,
                    payload,
                    provenance,
                )
                .await
                .map(CommandOutcome::Accepted)
            }
            SessionCommand::Cancel {
                command_id,
                only_if_pending,
            } => self
                .cancel(command_id, only_if_pending.unwrap_or(false))
                .await
                .map(CommandOutcome::Cancel),
            SessionCommand::Abort => {
                self.abort();
                Ok(CommandOutcome::Done)
            }
            SessionCommand::Branch { entry_id } => {
                self.branch(entry_id).await.map(|()| CommandOutcome::Done)
            }
            SessionCommand::Fork { entry_id } => {
                self.fork(entry_id).await.map(CommandOutcome::Forked)
            }
            SessionCommand::Operator {
                request_id,
                author,
                text,
            } => {
                let payload = canonical(command)?;
                self.operator(request_id.clone(), *author, text, payload)
                    .await
                    .map(|()| CommandOutcome::Done)
            }
        }
    }

    /// The command already accepted under `request_id`: the same payload is a retry, another a conflict.
    async fn replayed(
        &self,
        request_id: &RequestId,
        payload: &str,
    ) -> Result<Option<CommandId>, ShiitakeError> {
        let existing = self
            .deps
            .store
            .command_by_request(self.record.id(), request_id)
            .await?;
        match existing {
            None => Ok(None),
            Some(existing) if existing.payload == payload => Ok(Some(existing.id)),
            Some(_) => Err(ShiitakeError::conflict(format!(
                "request id {request_id} was already used for a different command"
            ))),
        }
    }

    /// A prompt an extension admitted from outside this Session: the same door, with its origin.
    pub(super) async fn admit(
        &mut self,
        request_id: RequestId,
        text: PromptText,
        delivery: PromptDelivery,
        origin: Origin,
    ) -> Result<Accepted, ShiitakeError> {
        let payload = canonical(&SessionCommand::Prompt {
            request_id: request_id.clone(),
            text: text.clone(),
            delivery,
        })?;
        let provenance = Provenance {
            origin: Some(origin),
            sender: None,
        };
        self.prompt(request_id, text, delivery, payload, provenance)
            .await
    }

    async fn prompt(
        &mut self,
        request_id: RequestId,
        text: PromptText,
        delivery: PromptDelivery,
        payload: String,
        provenance: Provenance,
    ) -> Result<Accepted, ShiitakeError> {
        let bound = self.deps.config.max_queued_prompts;
        if self.queue.len() >= bound {
            // A retry of an accepted prompt is its original answer, full queue or not.
            if let Some(command_id) = self.replayed(&request_id, &payload).await? {
                return Ok(Accepted { command_id });
            }
            return Err(ShiitakeError::too_large(format!(
                "this Session already has {bound} queued prompts, its bound; wait for some to \
                 run or cancel some, then send again"
            )));
        }
        // A prompt that finds nothing running and nothing queued starts its run in its
        // own commit: accepted running, with its prompt on the lineage. One commit and one
        // frame instead of two (acceptance, then the run's start), and the same rows.
        let starts_now = !self.work.running() && self.queue.is_empty();
        let mut change = self.change();
        if change.header.title.is_empty() {
            change.header.title = title_from(&text);
        }
        change.header.inbox_state = SessionInboxState::Running;
        let (request_id_for_retry, payload_for_retry) = (request_id.clone(), payload.clone());
        let command = StoredCommand {
            id: ids::command_id(),
            request_id: Some(request_id),
            origin: provenance.to_stored(),
            kind: CommandKind::Prompt,
            payload,
            accepted_sequence: change.sequence(),
            state: if starts_now {
                CommandState::Running
            } else {
                CommandState::Pending
            },
            run_id: None,
            recoveries: 0,
        };
        let command_id = command.id.clone();
        change.command(command);
        if starts_now {
            change.entry(Some(command_id.clone()), prompt_message(&text));
        }
        let committed = match self.commit_change_raw(change).await {
            Ok(committed) => committed,
            Err(error) => {
                // The unique request index refused it: this request id was used before.
                if error.is_unique_violation()
                    && let Some(command_id) = self
                        .replayed(&request_id_for_retry, &payload_for_retry)
                        .await?
                {
                    return Ok(Accepted { command_id });
                }
                return Err(error.into());
            }
        };
        crate::telemetry::prompt_accepted();
        if starts_now {
            self.work.note_origin(&command_id, &provenance);
            self.spawn_runner(command_id.clone(), None);
            self.publish_committed(committed);
            return Ok(Accepted { command_id });
        }
        let queued = QueuedPrompt {
            command_id: command_id.clone(),
            text,
            delivery,
            provenance,
        };
        self.queue.push(queued, self.work.running());
        self.refresh_activity();
        self.publish_changes(Vec::new(), Vec::new());
        self.start_next_run().await;
        Ok(Accepted { command_id })
    }

    async fn cancel(
        &mut self,
        command_id: &CommandId,
        only_if_pending: bool,
    ) -> Result<CancelResult, ShiitakeError> {
        let too_late = || {
            CancelResult::TooLate(TooLate {
                command_id: command_id.clone(),
            })
        };
        if let Some((index, removed)) = self.queue.remove(command_id) {
            let host = self.deps.host.clone();
            // Settled hooks may read or write Agent state: then the Agent lock holds.
            let _serialised = host.lock_for_settled_hooks().await;
            let mut change = self.change();
            change.terminal(command_id, TerminalOutcome::Cancelled, None);
            // A prompt cancelled before it ran settles too: settled hooks see it
            // (cancelled, no tool calls) in the commit of its terminal.
            let provenance = removed.provenance.clone();
            let settled = Settled {
                command_id: command_id.clone(),
                outcome: TerminalOutcome::Cancelled,
                origin: provenance.origin,
                sender: provenance.sender,
                tool_calls: 0,
                tokens: 0,
            };
            let staged = self.settled_hooks(&settled, &mut change.header, &mut change.ops);
            change.header.inbox_state = self.inbox_state_with(&staged);
            let committed = match self.commit_change(change).await {
                Ok(committed) => committed,
                Err(error) => {
                    // Not committed: the prompt is still waiting where it was.
                    self.queue.restore(index, removed);
                    return Err(error);
                }
            };
            self.work.forget_origins([command_id]);
            crate::telemetry::run_settled(TerminalOutcome::Cancelled);
            self.publish_committed(committed);
            self.adopt(staged).await;
            return Ok(CancelResult::Accepted(Accepted {
                command_id: command_id.clone(),
            }));
        }
        if self.work.in_run(command_id) && !only_if_pending {
            self.abort();
            return Ok(CancelResult::Accepted(Accepted {
                command_id: command_id.clone(),
            }));
        }
        Ok(too_late())
    }

    pub(super) fn abort(&mut self) {
        if self.work.cancel() {
            self.publication.cancellation_requested();
            self.publish_changes(Vec::new(), Vec::new());
        }
    }

    async fn branch(&mut self, entry_id: &EntryId) -> Result<(), ShiitakeError> {
        if self.work.running() {
            return Err(ShiitakeError::conflict(
                "cannot branch while work is running; abort it first",
            ));
        }
        let entry = self.deps.store.entry(self.record.id(), entry_id).await?;
        if entry.is_none() {
            return Err(ShiitakeError::not_found(format!(
                "no entry {entry_id} in this Session"
            )));
        }
        let mut header = self.next_header();
        take(&mut header);
        header.leaf = Some(entry_id.clone());
        header.epoch += 1;
        self.commit(Vec::new(), header).await?;
        if self.publication.watched() {
            let baseline = self.snapshot(&Default::default()).await?;
            let reset = Published::Reset(std::sync::Arc::new(baseline));
            self.publication.publish(reset);
        }
        Ok(())
    }

    async fn fork(&mut self, entry_id: &EntryId) -> Result<ForkedSession, ShiitakeError> {
        let store = &self.deps.store;
        let source = self.record.header();
        if store.entry(&source.id, entry_id).await?.is_none() {
            return Err(ShiitakeError::not_found(format!(
                "no entry {entry_id} in this Session"
            )));
        }
        let mut path = store.lineage(&source.id, entry_id, usize::MAX).await?;
        path.reverse();
        let now = now_ms();
        let session_id = ids::session_id();
        let header = SessionHeader {
            id: session_id.clone(),
            created_at: now,
            last_activity_at: now,
            settled_at: None,
            title: source.title.clone(),
            head_sequence: path.len() as u64,
            leaf: Some(entry_id.clone()),
            epoch: 0,
            model_preference: source.model_preference.clone(),
            inbox_state: SessionInboxState::Done,
            open_from: None,
        };
        let mut ops = vec![Op::CreateSession {
            header,
            request_id: None,
        }];
        for (index, entry) in path.into_iter().enumerate() {
            ops.push(Op::InsertEntry {
                session_id: session_id.clone(),
                entry: StoredEntry {
                    sequence: index as u64 + 1,
                    command_id: None,
                    ..entry
                },
            });
        }
        store.commit(ops).await?;
        Ok(ForkedSession { session_id })
    }

    async fn operator(
        &mut self,
        request_id: RequestId,
        author: OperatorAuthor,
        text: &PromptText,
        payload: String,
    ) -> Result<(), ShiitakeError> {
        if self.replayed(&request_id, &payload).await?.is_some() {
            return Ok(());
        }
        let message = operator_message(author, text);
        let mut change = self.change();
        let command_id = ids::command_id();
        let waits = self.work.running();
        let accepted_sequence = change.sequence();
        change.command(StoredCommand {
            id: command_id.clone(),
            request_id: Some(request_id),
            origin: None,
            kind: CommandKind::Operator,
            payload,
            accepted_sequence,
            state: if waits {
                CommandState::Pending
            } else {
                CommandState::Settled
            },
            run_id: None,
            recoveries: 0,
        });
        if waits {
            self.commit_change(change).await?;
            self.waiting_lines.push(WaitingLine {
                command_id,
                message,
            });
            return Ok(());
        }
        change.entry(None, message);
        let committed = self.commit_change(change).await?;
        self.publish_committed(committed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn title(text: &str) -> String {
        title_from(&PromptText::new(text).unwrap())
    }

    #[test]
    fn a_title_is_the_first_line_cut_at_eighty_characters() {
        let eighty = "é".repeat(TITLE_CHARS);
        assert_eq!(title(&eighty), eighty, "exactly 80 characters stay whole");
        assert_eq!(
            title(&format!("{eighty}x")),
            format!("{eighty}…"),
            "81 are cut to 80 and marked"
        );
        assert_eq!(title("  first line\nsecond line"), "first line");
    }
}
