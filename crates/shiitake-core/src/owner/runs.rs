//! The owner's side of runs: starting them, boundaries, commits, settling, recovery.

use std::sync::Arc;

use shiitake_protocol::message::Message;
use shiitake_protocol::{CommandId, EntryId, ProgressFrame, ShiitakeError, TerminalOutcome};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::change::Change;
use super::lines::prompt_message;
use super::observe::Changes;
use super::record::take;
use super::request::{RunMailbox, RunTag};
use super::staging::{Staged, StagedCommit};
use super::work::ActiveRun;
use super::{Owner, Published, Recovering, Resumption, RunEvent};
use crate::clock::now_ms;
use crate::extension::Settled;
use crate::runner::{self, RunStart, RunTally};
use crate::store::{CommandState, Op, StoredCompaction, StoredSandboxFailure};

impl Owner {
    /// Starts the next run when none is active and a prompt waits.
    pub(super) async fn start_next_run(&mut self) {
        while !self.work.running() {
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
                    if self.tenure.unsure().is_some() {
                        // The owner pauses; the process says so once (`store_waits`).
                        tracing::debug!(%error, session = %self.record.id(), "could not start a run; it starts when the store is back");
                    } else {
                        tracing::error!(%error, session = %self.record.id(), "could not start a run; it stays queued");
                    }
                    return;
                }
            };
            self.queue.pop_front();
            self.work.note_origin(&next.command_id, &next.provenance);
            self.spawn_runner(next.command_id, None);
            self.publish_committed(committed);
        }
    }

    /// Starts a run of `command_id`: a fresh one, or (`recovering` set) one that goes on
    /// from what the work committed before, with the steers it had absorbed.
    pub(super) fn spawn_runner(&mut self, command_id: CommandId, recovering: Option<Recovering>) {
        let cancel = CancellationToken::new();
        if recovering
            .as_ref()
            .is_some_and(|recovering| recovering.cancelled)
        {
            // A cancel was asked of this work before the owner paused: it ends cancelled.
            cancel.cancel();
        }
        self.next_run += 1;
        let tag = RunTag(self.next_run);
        let provenance = self.work.provenance_of(&command_id);
        self.extensions.prepare_change_signals(&self.deps.host);
        let (prompt_sections, modules) = self.contributions(&command_id, &provenance);
        let header = self.record.header();
        let start = RunStart {
            agent: runner::RunDeps {
                store: self.deps.store.clone(),
                tools: self.deps.tools.clone(),
                config: self.deps.config.clone(),
            },
            session_id: header.id.clone(),
            command_id: command_id.clone(),
            leaf: header.leaf.clone(),
            preference: header.model_preference.clone(),
            owner: Arc::new(RunMailbox {
                mailbox: self.mailbox.clone(),
                tag,
            }),
            cancel: cancel.clone(),
            steer_waiting: self.queue.steer_signal(),
            lines_waiting: self.waiting_lines.signal(),
            recovering: recovering
                .as_ref()
                .map(|recovering| recovering.absorbed.clone()),
            started_calls: recovering
                .as_ref()
                .and_then(|recovering| recovering.started.clone()),
            prompt_sections,
            modules,
            gates: self.gates(),
            transcript: self.work.take_transcript(),
        };
        // A child of the owner's span: a run's lines carry its Session and command. In a
        // trace it is a root (the owner's span is not exported): `spans`.
        let agent = self.deps.config.name.as_ref().map(|name| name.as_str());
        let span = crate::spans::run(agent, &header.id, &command_id, recovering.is_some());
        let task = tokio::spawn(runner::run(start).instrument(span));
        crate::telemetry::run_started();
        self.publication.run_started();
        self.work.start(ActiveRun {
            tag,
            command_id,
            absorbed: recovering
                .map(|recovering| recovering.absorbed)
                .unwrap_or_default(),
            cancel,
            task,
            started_calls: Vec::new(),
        });
    }

    /// Resumes (or settles as interrupted) the work that was running when the Session
    /// was loaded: after a restart or a takeover (`Resumption::Opened`), or after this
    /// owner paused for its store and read the Session back (`Resumption::StoreReturned`).
    pub(crate) async fn resume(&mut self, after: Resumption) {
        let interrupted = self.work.take_interrupted();
        // Work the previous owner stopped on purpose (it drained) was not interrupted
        // by a crash, nor was work this owner paused while its store could not take a
        // commit: either resumes without counting toward `max_recoveries`.
        let counted = after == Resumption::Opened && !self.tenure.handed_over();
        let cancelled = std::mem::take(&mut self.cancelled_before_pause);
        // Only after a pause does this owner know which tool calls its run started.
        let started_before = match after {
            Resumption::StoreReturned => self.started_before_pause.take(),
            Resumption::Opened => {
                self.started_before_pause = None;
                None
            }
        };
        for command in &interrupted.runs {
            let joined = interrupted.absorbed_by(&command.id);
            let exhausted = counted && command.recoveries >= self.deps.config.max_recoveries;
            if exhausted || self.work.running() {
                let diagnostic = format!(
                    "the Agent stopped during this work {} times; it was not resumed again",
                    command.recoveries + 1
                );
                self.settle(
                    &command.id,
                    &joined,
                    (TerminalOutcome::Interrupted, Some(diagnostic)),
                    RunTally::default(),
                )
                .await;
                continue;
            }
            if counted {
                let count = Op::CountRecovery {
                    session_id: self.record.id().clone(),
                    command_id: command.id.clone(),
                };
                if let Err(error) = self.tenure.commit(vec![count]).await {
                    tracing::warn!(%error, session = %self.record.id(), "could not count a recovery; the work waits for the store");
                    return;
                }
                tracing::info!(session = %self.record.id(), command = %command.id, "resuming interrupted work");
            } else if after == Resumption::StoreReturned {
                tracing::info!(session = %self.record.id(), command = %command.id, "resuming work that waited for the store");
            } else {
                tracing::info!(session = %self.record.id(), command = %command.id, "resuming work handed over by a draining process");
            }
            let recovering = Recovering {
                absorbed: joined,
                cancelled: cancelled.contains(&command.id),
                started: started_before
                    .as_ref()
                    .filter(|(run, _)| *run == command.id)
                    .map(|(_, started)| started.clone()),
            };
            self.spawn_runner(command.id.clone(), Some(recovering));
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
                let result = self
                    .commit_message(entry_id, *message, tool.map(|tool| *tool))
                    .await;
                if reply.send(result).is_err() {
                    tracing::trace!("runner left before its commit answer");
                }
            }
            RunEvent::Progress(progress) => {
                self.publication.set_progress(Some(progress.clone()));
                let frame = ProgressFrame {
                    progress,
                    activity: self.publication.activity().clone(),
                };
                self.publication
                    .publish(Published::Progress(Arc::new(frame)));
            }
            RunEvent::Retry(retry) => {
                self.publication.set_retry(retry);
                self.publish_changes(Vec::new(), Vec::new());
            }
            RunEvent::ActiveTool(tool) => {
                self.publication.set_active_tool(Some(tool));
                self.publish_changes(Vec::new(), Vec::new());
            }
            RunEvent::ToolStarting { call_id, reply } => {
                self.work.note_started(call_id);
                if reply.send(Ok(())).is_err() {
                    tracing::trace!("runner left before its start was noted");
                }
            }
            RunEvent::ToolOutput(output) => {
                self.publication.set_tool_output(Some(*output));
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
            RunEvent::StoreFailed(error) => {
                tracing::debug!(session = %self.record.id(), %error, "a run could not read its Session; the owner pauses");
                self.tenure.read_failed(&error);
            }
            RunEvent::Finished {
                outcome,
                diagnostic,
                tally,
                transcript,
            } => {
                let Some(run) = self.work.finish() else {
                    return;
                };
                self.work
                    .keep_transcript(transcript.map(|transcript| *transcript));
                self.settle(&run.command_id, &run.absorbed, (outcome, diagnostic), tally)
                    .await;
                self.append_waiting_lines().await;
                self.start_next_run().await;
            }
        }
    }

    /// Takes waiting steers and operator lines into the lineage for the running work.
    async fn boundary(&mut self) -> Result<Vec<(EntryId, Message)>, ShiitakeError> {
        let Some(run_id) = self.work.run_id() else {
            return Ok(Vec::new());
        };
        let steers = self.queue.steers();
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
        self.queue.drop_steers();
        self.work
            .absorb(steers.into_iter().map(|steer| steer.command_id));
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
        let Some(run_id) = self.work.run_id() else {
            return Err(ShiitakeError::stopped("the run is no longer active"));
        };
        let host = self.deps.host.clone();
        // Only a commit that runs a hook serialises with other Agent transactions.
        let _serialised = match &tool {
            Some(_) => Some(host.agent_transactions.lock().await),
            None => None,
        };
        let is_assistant = matches!(message, Message::Assistant(_));
        // The tool whose result this is has finished; the commit's frame says so.
        self.publication.set_active_tool(None);
        let mut change = self.change();
        let sequence = change.entry_with_id(entry_id, Some(run_id), message);
        let mut staged = Staged::default();
        if let Some(outcome) = &tool {
            self.tool_result_hook(
                outcome,
                StagedCommit {
                    header: &mut change.header,
                    ops: &mut change.ops,
                    staged: &mut staged,
                },
            );
            change.header.inbox_state = self.inbox_state_with(&staged);
        }
        let committed = self.commit_change(change).await?;
        if is_assistant {
            self.publication.model_chose(sequence);
        }
        self.publish_committed(committed);
        if tool.is_some() {
            self.adopt(staged).await;
        }
        Ok(())
    }

    /// Commits the terminals of a run and of the steers it absorbed, with every
    /// extension's settled hook in the same transaction. `tally` is what the run's
    /// model did (nothing for work settled without a runner).
    async fn settle(
        &mut self,
        command_id: &CommandId,
        absorbed: &[CommandId],
        (outcome, diagnostic): (TerminalOutcome, Option<String>),
        tally: RunTally,
    ) {
        let host = self.deps.host.clone();
        // Settles of different Sessions queue on the Agent lock only when some
        // extension's settled hook could read or write Agent state.
        let _serialised = host.lock_for_settled_hooks().await;
        let mut change = self.change();
        for id in std::iter::once(command_id).chain(absorbed) {
            change.terminal(id, outcome, diagnostic.clone());
        }
        let provenance = self.work.provenance_of(command_id);
        let settled = Settled {
            command_id: command_id.clone(),
            outcome,
            origin: provenance.origin,
            sender: provenance.sender,
            tool_calls: tally.tool_calls,
            tokens: tally.tokens,
        };
        let staged = self.settled_hooks(&settled, &mut change.header, &mut change.ops);
        let previous = self.work.set_last_outcome(Some(outcome));
        self.publication.set_active_tool(None);
        change.header.settled_at = Some(now_ms());
        change.header.inbox_state = self.inbox_state_with(&staged);
        let committed = match self.commit_change(change).await {
            Ok(committed) => committed,
            Err(error) => {
                // The work stays running in the store: the owner pauses and settles it
                // when the store is back (or recovery does, on the next open).
                self.work.set_last_outcome(previous);
                if self.tenure.unsure().is_some() {
                    tracing::debug!(%error, session = %self.record.id(), "could not commit a terminal; the owner waits for the store");
                } else {
                    tracing::error!(%error, session = %self.record.id(), "could not commit a terminal");
                }
                return;
            }
        };
        self.work
            .forget_origins(std::iter::once(command_id).chain(absorbed));
        for _ in std::iter::once(command_id).chain(absorbed) {
            crate::telemetry::run_settled(outcome);
        }
        self.publication.set_progress(None);
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
            .deps
            .store
            .entry(self.record.id(), &first_kept)
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
        let session_id = self.record.id().clone();
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
        let session_id = self.record.id().clone();
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
}
