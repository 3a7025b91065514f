//! The owner's side of runs: starting them, boundaries, commits, settling, recovery.

use std::sync::Arc;

use shiitake_protocol::message::Message;
use shiitake_protocol::{
    CommandId, EntryId, ProgressFrame, PromptDelivery, SessionProgress, ShiitakeError,
    TerminalOutcome,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::change::Change;
use super::extensions::Staged;
use super::lines::prompt_message;
use super::observe::Changes;
use super::{ActiveRun, Owner, Published, RunEvent, take};
use crate::clock::now_ms;
use crate::extension::Settled;
use crate::runner::{self, RunStart};
use crate::store::{CommandState, Op, StoredCommand, StoredCompaction, StoredSandboxFailure};

impl Owner {
    /// Starts the next run when none is active and a prompt waits.
    pub(super) async fn start_next_run(&mut self) {
        while self.run.is_none() {
            let Some(next) = self.queue.front().cloned() else {
                return;
            };
            let mut change = self.change();
            change.command_state(&next.command_id, CommandState::Running, None);
            change.entry(Some(next.command_id.clone()), prompt_message(&next.text));
            change.header.inbox_state = shiitake_protocol::SessionInboxState::Running;
            let committed = match self.commit_change(change).await {
                Ok(committed) => committed,
                Err(error) => {
                    tracing::error!(%error, session = %self.header.id, "could not start a run; it stays queued");
                    return;
                }
            };
            self.queue.pop_front();
            if !next.provenance.is_empty() {
                self.origins
                    .insert(next.command_id.clone(), next.provenance.clone());
            }
            self.spawn_runner(next.command_id, false);
            self.publish_committed(committed);
        }
    }

    fn spawn_runner(&mut self, command_id: CommandId, recovering: bool) {
        let cancel = CancellationToken::new();
        let provenance = self.provenance_of(&command_id);
        self.prepare_change_signals();
        let (prompt_sections, modules) = self.contributions(&command_id, &provenance);
        self.steer_waiting.send_replace(
            self.queue
                .iter()
                .any(|queued| queued.delivery == PromptDelivery::Steer),
        );
        let start = RunStart {
            agent: runner::RunDeps {
                store: self.core.store.clone(),
                tools: self.core.tools.clone(),
                config: self.core.config.clone(),
            },
            session_id: self.header.id.clone(),
            command_id: command_id.clone(),
            leaf: self.header.leaf.clone(),
            preference: self.header.model_preference.clone(),
            owner: Arc::new(self.mailbox.clone()),
            cancel: cancel.clone(),
            steer_waiting: self.steer_waiting.subscribe(),
            lines_waiting: self.waiting_lines.signal(),
            recovering,
            prompt_sections,
            modules,
            transcript: self.kept_transcript.take(),
        };
        // A child of the owner's span: a run's lines carry its Session and command.
        let span = tracing::info_span!("run", command = %command_id, recovering);
        let task = tokio::spawn(runner::run(start).instrument(span));
        self.activity.last_model_choice_sequence = None;
        self.run = Some(ActiveRun {
            command_id,
            absorbed: Vec::new(),
            cancel,
            task,
        });
    }

    /// Stops the runner without settling it: recovery resumes the work on the next open.
    pub(super) fn stop_run_without_terminal(&mut self) {
        if let Some(run) = self.run.take() {
            run.task.abort();
        }
    }

    /// On load: a command that was running when the process stopped.
    pub(super) fn note_interrupted_command(&mut self, command: StoredCommand) {
        match command.run_id {
            Some(run_id) => self.pending_absorbed.push((run_id, command.id)),
            None => self.interrupted.push(command),
        }
    }

    /// Resumes (or settles as interrupted) the work that was running before a restart.
    pub(super) async fn resume(&mut self) {
        let interrupted = std::mem::take(&mut self.interrupted);
        let absorbed = std::mem::take(&mut self.pending_absorbed);
        for command in interrupted {
            let joined: Vec<CommandId> = absorbed
                .iter()
                .filter(|(run_id, _)| run_id == &command.id)
                .map(|(_, id)| id.clone())
                .collect();
            if command.recoveries >= self.core.config.max_recoveries || self.run.is_some() {
                let diagnostic = format!(
                    "the Agent stopped during this work {} times; it was not resumed again",
                    command.recoveries + 1
                );
                self.settle(
                    &command.id,
                    &joined,
                    (TerminalOutcome::Interrupted, Some(diagnostic)),
                    0,
                )
                .await;
                continue;
            }
            let count = Op::CountRecovery {
                session_id: self.header.id.clone(),
                command_id: command.id.clone(),
            };
            if let Err(error) = self.commit_ops(vec![count]).await {
                tracing::error!(%error, "could not count a recovery; the work waits for the next open");
                return;
            }
            tracing::info!(session = %self.header.id, command = %command.id, "resuming interrupted work");
            self.spawn_runner(command.id, true);
            if let Some(run) = &mut self.run {
                run.absorbed = joined;
            }
        }
        self.refresh_activity();
        self.start_next_run().await;
    }

    pub(super) async fn run_event(&mut self, event: RunEvent) {
        match event {
            RunEvent::Boundary(reply) => {
                let result = self.boundary().await;
                if reply.send(result).is_err() {
                    tracing::trace!("runner left before its boundary answer");
                }
            }
            RunEvent::Commit {
                entry_id,
                message,
                tool,
                reply,
            } => {
                let result = self.commit_message(entry_id, message, tool).await;
                if reply.send(result).is_err() {
                    tracing::trace!("runner left before its commit answer");
                }
            }
            RunEvent::Progress(progress) => {
                self.progress = Some(progress.clone());
                self.publish(Published::Progress(Arc::new(ProgressFrame {
                    progress,
                    activity: self.activity.clone(),
                })));
            }
            RunEvent::Retry(retry) => {
                self.activity.retry = retry;
                self.publish_changes(Vec::new(), Vec::new());
            }
            RunEvent::ActiveTool(tool) => {
                self.activity.active_tool = Some(tool);
                self.publish_changes(Vec::new(), Vec::new());
            }
            RunEvent::Compacted {
                first_kept,
                summary,
                reply,
            } => {
                let result = self.record_compaction(first_kept, summary).await;
                if reply.send(result).is_err() {
                    tracing::trace!("runner left before its compaction answer");
                }
            }
            RunEvent::SandboxFailure {
                capability,
                message,
            } => {
                self.record_sandbox_failure(capability, message).await;
            }
            RunEvent::Finished {
                outcome,
                diagnostic,
                tool_calls,
                transcript,
            } => {
                let Some(run) = self.run.take() else { return };
                self.kept_transcript = transcript;
                self.settle(
                    &run.command_id,
                    &run.absorbed,
                    (outcome, diagnostic),
                    tool_calls,
                )
                .await;
                self.append_waiting_lines().await;
                self.start_next_run().await;
            }
        }
    }

    /// Takes waiting steers and operator lines into the lineage for the running work.
    async fn boundary(&mut self) -> Result<Vec<(EntryId, Message)>, ShiitakeError> {
        let Some(run_id) = self.run.as_ref().map(|run| run.command_id.clone()) else {
            return Ok(Vec::new());
        };
        let steers: Vec<_> = self
            .queue
            .iter()
            .filter(|queued| queued.delivery == PromptDelivery::Steer)
            .cloned()
            .collect();
        if steers.is_empty() && self.waiting_lines.is_empty() {
            return Ok(Vec::new());
        }
        let mut change = self.change();
        self.waiting_line_rows(&mut change);
        for steer in &steers {
            change.command_state(
                &steer.command_id,
                CommandState::Running,
                Some(run_id.clone()),
            );
            change.entry(Some(steer.command_id.clone()), prompt_message(&steer.text));
        }
        let committed = self.commit_change(change).await?;
        self.waiting_lines.clear();
        self.queue
            .retain(|queued| queued.delivery != PromptDelivery::Steer);
        self.steer_waiting.send_replace(false);
        if let Some(run) = &mut self.run {
            run.absorbed
                .extend(steers.into_iter().map(|steer| steer.command_id));
        }
        let messages = committed
            .entries
            .iter()
            .map(|entry| (entry.id.clone(), entry.message.clone()))
            .collect();
        self.publish_committed(committed);
        Ok(messages)
    }

    async fn commit_message(
        &mut self,
        entry_id: EntryId,
        message: Message,
        tool: Option<crate::extension::ToolOutcome>,
    ) -> Result<(), ShiitakeError> {
        let Some(run_id) = self.run.as_ref().map(|run| run.command_id.clone()) else {
            return Err(ShiitakeError::stopped("the run is no longer active"));
        };
        let core = self.core.clone();
        // Only a commit that runs a hook serialises with other Agent transactions.
        let _serialised = match &tool {
            Some(_) => Some(core.host.agent_transactions.lock().await),
            None => None,
        };
        let is_assistant = matches!(message, Message::Assistant(_));
        // The tool whose result this is has finished; the commit's frame says so.
        self.activity.active_tool = None;
        let mut change = self.change();
        let sequence = change
            .entry_with_id(entry_id, Some(run_id), message)
            .sequence;
        let mut staged = Staged::default();
        if let Some(outcome) = &tool {
            self.tool_result_hook(
                outcome,
                super::extensions::StagedCommit {
                    header: &mut change.header,
                    ops: &mut change.ops,
                    staged: &mut staged,
                },
            );
            change.header.inbox_state = self.inbox_state_with(&staged);
        }
        let committed = self.commit_change(change).await?;
        if is_assistant {
            self.activity.last_model_choice_sequence = Some(sequence);
            self.progress = None;
        }
        self.publish_committed(committed);
        if tool.is_some() {
            self.adopt(staged).await;
        }
        Ok(())
    }

    /// Commits the terminals of a run and of the steers it absorbed, with every
    /// extension's settled hook in the same transaction. `tool_calls` is what the
    /// run's model asked for (0 for work settled without a runner).
    async fn settle(
        &mut self,
        command_id: &CommandId,
        absorbed: &[CommandId],
        (outcome, diagnostic): (TerminalOutcome, Option<String>),
        tool_calls: u32,
    ) {
        let core = self.core.clone();
        // Settles of different Sessions queue on the Agent lock only when some
        // extension's settled hook could read or write Agent state.
        let _serialised = core.host.lock_if_agent_state().await;
        let mut change = self.change();
        for id in std::iter::once(command_id).chain(absorbed) {
            change.terminal(id, outcome, diagnostic.clone());
        }
        let provenance = self.provenance_of(command_id);
        let settled = Settled {
            command_id: command_id.clone(),
            outcome,
            origin: provenance.origin,
            sender: provenance.sender,
            tool_calls,
        };
        let staged = self.settled_hooks(&settled, &mut change.header, &mut change.ops);
        let previous = self.last_outcome.replace(outcome);
        self.activity.active_tool = None;
        change.header.settled_at = Some(now_ms());
        change.header.inbox_state = self.inbox_state_with(&staged);
        let committed = match self.commit_change(change).await {
            Ok(committed) => committed,
            Err(error) => {
                // The work stays running in the store; recovery settles it on the next open.
                self.last_outcome = previous;
                tracing::error!(%error, session = %self.header.id, "could not commit a terminal");
                return;
            }
        };
        for id in std::iter::once(command_id).chain(absorbed) {
            self.origins.remove(id);
        }
        self.progress = None;
        self.publish_committed(committed);
        self.adopt(staged).await;
    }

    /// The rows that append every waiting operator line to the lineage.
    fn waiting_line_rows(&self, change: &mut Change) {
        for line in self.waiting_lines.iter() {
            change.command_state(&line.command_id, CommandState::Settled, None);
            change.entry(None, line.message.clone());
        }
    }

    /// Appends operator lines that waited for the run to end.
    async fn append_waiting_lines(&mut self) {
        if self.waiting_lines.is_empty() {
            return;
        }
        let mut change = self.change();
        self.waiting_line_rows(&mut change);
        let committed = match self.commit_change(change).await {
            Ok(committed) => committed,
            Err(error) => {
                tracing::error!(%error, "could not append operator lines; they wait for the next open");
                return;
            }
        };
        self.waiting_lines.clear();
        self.publish_committed(committed);
    }

    async fn record_compaction(
        &mut self,
        first_kept: EntryId,
        summary: String,
    ) -> Result<(), ShiitakeError> {
        let entry = self
            .core
            .store
            .entry(&self.header.id, &first_kept)
            .await?
            .ok_or_else(|| {
                ShiitakeError::internal(format!(
                    "compaction names entry {first_kept}, which is not stored"
                ))
            })?;
        let mut header = self.next_header();
        let compaction = StoredCompaction {
            id: crate::ids::event_id(),
            commit_sequence: take(&mut header),
            first_kept,
            precedes_sequence: entry.sequence,
            at: now_ms(),
            summary,
        };
        let session_id = self.header.id.clone();
        self.commit(
            vec![Op::InsertCompaction {
                session_id,
                compaction: compaction.clone(),
            }],
            header,
        )
        .await?;
        self.publish_update(Changes {
            compactions: vec![compaction],
            ..Changes::default()
        });
        Ok(())
    }

    async fn record_sandbox_failure(&mut self, capability: String, message: String) {
        let mut header = self.next_header();
        let failure = StoredSandboxFailure {
            id: crate::ids::event_id(),
            sequence: take(&mut header),
            at: now_ms(),
            capability,
            message,
        };
        let session_id = self.header.id.clone();
        let op = Op::InsertSandboxFailure {
            session_id,
            failure: failure.clone(),
        };
        if let Err(error) = self.commit(vec![op], header).await {
            tracing::error!(%error, "could not record a sandbox failure");
            return;
        }
        self.publish_update(Changes {
            sandbox_failures: vec![failure],
            ..Changes::default()
        });
    }

    /// The current progress, for snapshots.
    pub(super) fn current_progress(&self) -> Option<SessionProgress> {
        self.progress.clone()
    }
}
