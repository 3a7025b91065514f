//! The owner's side of the extension host: command calls, tool transactions,
//! settled and timer hooks, staged attention and admissions.

use std::collections::BTreeMap;

use serde_json::Value;
use shiitake_protocol::{ExtensionId, PromptDelivery, SessionCommand, ShiitakeError};

use super::{Owner, QueuedPrompt, WaitingLine, take};
use crate::extension::host::{
    Failure, Finished, Host, Place, Raised, Registered, ToolTransaction, Writes, apply_writes,
    run_hook,
};
use crate::extension::{FiredTimer, Grant, HookError, Origin, Provenance, Settled, ToolOutcome};
use crate::store::{
    CommandKind, CommandState, Op, RowScope, SessionHeader, StoredCommand, TimerRow,
};

/// Rows of one extension in one scope.
pub(crate) type Rows = BTreeMap<(String, String), Value>;

/// What a committed transaction changes in the owner's memory, applied only after commit.
#[derive(Default)]
pub(super) struct Staged {
    pub(super) session_writes: Vec<(ExtensionId, Writes)>,
    pub(super) agent_writes: Vec<(ExtensionId, Writes)>,
    pub(super) attention: Vec<(ExtensionId, String, Raised)>,
    pub(super) queued: Vec<QueuedPrompt>,
    /// Extension lines appended by the commit, to publish.
    pub(super) entries: Vec<crate::store::StoredEntry>,
    /// Extension lines that wait for the running work's next boundary.
    pub(super) waiting_lines: Vec<WaitingLine>,
    pub(super) stops: Vec<(ExtensionId, String)>,
    pub(super) timers_changed: bool,
}

/// The commit a hook's transaction is staged into: the next header, its ops, and
/// what to adopt once it is committed.
pub(super) struct StagedCommit<'a> {
    pub(super) header: &'a mut SessionHeader,
    pub(super) ops: &'a mut Vec<Op>,
    pub(super) staged: &'a mut Staged,
}

/// How a failed hook answers its caller.
fn caller_error(error: HookError) -> ShiitakeError {
    match error {
        HookError::Invalid(message) => ShiitakeError::invalid(message),
        HookError::UnknownCommand(command) => {
            ShiitakeError::not_found(format!("no command `{command}`"))
        }
        HookError::NotGranted(grant) => {
            ShiitakeError::not_granted(format!("the extension was not granted {grant}"))
        }
        HookError::Failed(reason) => ShiitakeError::stopped(reason),
    }
}

impl Owner {
    pub(super) fn rows_of(&self, id: &ExtensionId) -> &Rows {
        static EMPTY: Rows = BTreeMap::new();
        self.extension_rows.get(id).unwrap_or(&EMPTY)
    }

    /// Stages a finished transaction: its ops into `ops`, its effects into `staged`.
    fn stage<T>(
        &self,
        registered: &Registered,
        finished: Finished<T>,
        header: &mut SessionHeader,
        ops: &mut Vec<Op>,
        staged: &mut Staged,
    ) -> T {
        let id = registered.definition.id.clone();
        ops.extend(finished.ops);
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
                accepted_sequence: take(header),
                state: CommandState::Pending,
                run_id: None,
                recoveries: 0,
            };
            staged.queued.push(QueuedPrompt {
                command_id: stored.id.clone(),
                text: admission.text,
                delivery: admission.delivery,
                provenance,
            });
            ops.push(Op::InsertCommand {
                session_id: self.header.id.clone(),
                command: stored,
            });
        }
        for text in finished.lines {
            self.stage_line(&id, text, header, ops, staged);
        }
        for (kind, change) in finished.attention {
            staged.attention.push((id.clone(), kind, change));
        }
        staged
            .session_writes
            .push((id.clone(), finished.session_writes));
        staged.agent_writes.push((id, finished.agent_writes));
        staged.timers_changed |= finished.timers_changed;
        finished.value
    }

    /// Stages one extension chat line: an operator-kind command carrying the
    /// extension as its origin, appended now when no work runs, else waiting for the
    /// running work's next boundary (like an operator line).
    fn stage_line(
        &self,
        id: &ExtensionId,
        text: shiitake_protocol::PromptText,
        header: &mut SessionHeader,
        ops: &mut Vec<Op>,
        staged: &mut Staged,
    ) {
        let request_id = crate::ids::request_id();
        let command = SessionCommand::Operator {
            request_id: request_id.clone(),
            author: shiitake_protocol::OperatorAuthor::Operator,
            text: text.clone(),
        };
        let provenance = Provenance {
            origin: Some(Origin {
                extension_id: id.clone(),
                correlation: String::new(),
            }),
            sender: None,
        };
        let waits = self.run.is_some();
        let stored = StoredCommand {
            id: crate::ids::command_id(),
            request_id: Some(request_id),
            origin: provenance.to_stored(),
            kind: CommandKind::Operator,
            payload: serde_json::to_string(&command).unwrap_or_default(),
            accepted_sequence: take(header),
            state: if waits {
                CommandState::Pending
            } else {
                CommandState::Settled
            },
            run_id: None,
            recoveries: 0,
        };
        let message = super::lines::extension_line(id, &text);
        let command_id = stored.id.clone();
        ops.push(Op::InsertCommand {
            session_id: self.header.id.clone(),
            command: stored,
        });
        if waits {
            staged.waiting_lines.push(WaitingLine {
                command_id,
                message,
            });
            return;
        }
        // A lineage entry after the current leaf, which moves to it.
        let entry = crate::store::StoredEntry {
            id: crate::ids::entry_id(),
            parent: header.leaf.clone(),
            sequence: super::take(header),
            command_id: None,
            message,
        };
        header.leaf = Some(entry.id.clone());
        ops.push(Op::InsertEntry {
            session_id: self.header.id.clone(),
            entry: entry.clone(),
        });
        staged.entries.push(entry);
    }

    /// Adopts what a committed transaction staged.
    /// The caller holds `agent_transactions` since before the transaction ran.
    pub(super) async fn adopt(&mut self, staged: Staged) {
        for (id, writes) in staged.session_writes {
            if writes.is_empty() {
                continue;
            }
            if let Some(changes) = self.extension_changes.get(&id) {
                changes.send_modify(|version| *version = version.wrapping_add(1));
            }
            apply_writes(self.extension_rows.entry(id).or_default(), writes);
        }
        for (id, writes) in staged.agent_writes {
            self.core.host.apply_agent_writes(&id, writes);
        }
        for (id, kind, change) in staged.attention {
            match change {
                Some(raised) => {
                    self.attention.insert((id, kind), raised);
                }
                None => {
                    self.attention.remove(&(id, kind));
                }
            }
        }
        for (id, reason) in staged.stops {
            tracing::warn!(extension = %id, %reason, "extension stopped");
            self.core.host.mark_stopped(&id, Some(reason));
        }
        if staged.timers_changed {
            self.core.host.timers_changed.notify_one();
        }
        let started = !staged.queued.is_empty();
        if self.run.is_some()
            && staged
                .queued
                .iter()
                .any(|q| q.delivery == PromptDelivery::Steer)
        {
            self.steer_waiting.send_replace(true);
        }
        self.queue.extend(staged.queued);
        self.waiting_lines.extend(staged.waiting_lines);
        self.refresh_activity();
        self.publish_changes(staged.entries, Vec::new());
        if started {
            self.start_next_run().await;
        }
    }

    /// Runs one transaction of an extension in this Session and commits it.
    async fn transact(
        &mut self,
        id: &ExtensionId,
        request: Option<(String, String)>,
        hook: impl FnOnce(
            &dyn crate::extension::Extension,
            &mut crate::extension::Tx<'_>,
        ) -> Result<Value, HookError>,
    ) -> Result<Value, ShiitakeError> {
        let core = self.core.clone();
        let registered = core
            .host
            .find(id)
            .ok_or_else(|| ShiitakeError::not_found(format!("no extension {id} in this Agent")))?;
        if let Some(reason) = core.host.stopped(id) {
            return Err(ShiitakeError::stopped(format!(
                "extension {id} is stopped: {reason}"
            )));
        }
        let _serialised = core.host.agent_transactions.lock().await;
        let agent = core.host.agent_rows_of(id);
        let place = Place {
            session_id: Some(&self.header.id),
            session_rows: self.rows_of(id),
            agent_rows: &agent,
            now: self.core.config.clock.now_ms(),
        };
        let mut header = self.next_header();
        let finished = match run_hook(registered, &place, hook) {
            Ok(finished) => finished,
            Err(Failure::Caller(error)) => return Err(caller_error(error)),
            Err(Failure::Stop(reason)) => {
                let ops = vec![Host::status_op(registered, Some(reason.clone()))];
                self.commit(ops, header).await?;
                core.host.mark_stopped(id, Some(reason.clone()));
                self.publish_changes(Vec::new(), Vec::new());
                return Err(ShiitakeError::stopped(format!(
                    "extension {id} stopped: {reason}"
                )));
            }
        };
        if request.is_none() && finished.changes_nothing() {
            // A read, such as a tool handler checking its state: nothing to commit or publish.
            return Ok(finished.value);
        }
        let mut ops = Vec::new();
        let mut staged = Staged::default();
        let value = self.stage(registered, finished, &mut header, &mut ops, &mut staged);
        if let Some((request_id, payload)) = request {
            ops.push(Op::PutExtensionRequest {
                extension_id: id.clone(),
                scope: RowScope::Session(self.header.id.clone()),
                request_id,
                payload,
                response: value.clone(),
            });
        }
        take(&mut header);
        header.inbox_state = self.inbox_state_with(&staged);
        self.commit(ops, header).await?;
        self.adopt(staged).await;
        Ok(value)
    }

    /// `SessionExtensionControls::call`: a human or program command, idempotent by `requestId`.
    pub(super) async fn extension_call(
        &mut self,
        id: &ExtensionId,
        command: &str,
        input: Value,
    ) -> Result<Value, ShiitakeError> {
        if let Some(registered) = self.core.host.find(id)
            && !registered.grants.has(Grant::Commands)
        {
            return Err(ShiitakeError::not_granted(format!(
                "extension {id} was not granted commands"
            )));
        }
        let request = match input.get("requestId").and_then(Value::as_str) {
            Some(request_id) => {
                let payload = serde_json::json!([command, input]).to_string();
                let stored = self
                    .core
                    .store
                    .extension_request(id, &RowScope::Session(self.header.id.clone()), request_id)
                    .await?;
                match stored {
                    Some(receipt) if receipt.payload == payload => {
                        return Ok(receipt.response);
                    }
                    Some(_) => {
                        return Err(ShiitakeError::conflict(format!(
                            "request id {request_id} was already used for a different command"
                        )));
                    }
                    None => Some((request_id.to_owned(), payload)),
                }
            }
            None => None,
        };
        let command = command.to_owned();
        self.transact(id, request, move |extension, tx| {
            extension.command(tx, &command, input)
        })
        .await
    }

    /// A transaction sent by an extension's tool handler during a run.
    pub(super) async fn extension_tx(
        &mut self,
        id: &ExtensionId,
        transaction: ToolTransaction,
    ) -> Result<Value, ShiitakeError> {
        self.transact(id, None, move |_extension, tx| transaction(tx))
            .await
    }

    /// Runs one hook of one extension into a commit that carries another change:
    /// its writes and effects are staged with `ops`; if it fails, only that
    /// extension stops (`what` names the hook in the reason).
    fn hook_into_commit(
        &self,
        registered: &Registered,
        agent_rows: &Rows,
        what: &str,
        hook: impl FnOnce(
            &dyn crate::extension::Extension,
            &mut crate::extension::Tx<'_>,
        ) -> Result<(), HookError>,
        into: StagedCommit<'_>,
    ) {
        let StagedCommit {
            header,
            ops,
            staged,
        } = into;
        let id = &registered.definition.id;
        let place = Place {
            session_id: Some(&self.header.id),
            session_rows: self.rows_of(id),
            agent_rows,
            now: self.core.config.clock.now_ms(),
        };
        match run_hook(registered, &place, hook) {
            Ok(finished) => self.stage(registered, finished, header, ops, staged),
            Err(failure) => {
                let reason = match failure {
                    Failure::Caller(error) => format!("{what} hook failed: {error}"),
                    Failure::Stop(reason) => reason,
                };
                ops.push(Host::status_op(registered, Some(reason.clone())));
                staged.stops.push((id.clone(), reason));
            }
        }
    }

    /// Runs every extension's settled hook into the terminal's commit; failures stop
    /// only the extension that failed.
    pub(super) fn settled_hooks(
        &self,
        settled: &Settled,
        header: &mut SessionHeader,
        ops: &mut Vec<Op>,
    ) -> Staged {
        let host = &self.core.host;
        let agent = host.agent_read();
        let empty = Rows::new();
        let mut staged = Staged::default();
        for registered in &host.extensions {
            let id = &registered.definition.id;
            if host.stopped(id).is_some() {
                continue;
            }
            self.hook_into_commit(
                registered,
                agent.get(id).unwrap_or(&empty),
                "settled",
                |extension, tx| extension.on_settled(tx, settled),
                StagedCommit {
                    header: &mut *header,
                    ops: &mut *ops,
                    staged: &mut staged,
                },
            );
        }
        staged
    }

    /// Runs the tool-result hook of the extension whose tool was called into the
    /// commit of its result. The caller holds `agent_transactions`.
    pub(super) fn tool_result_hook(&self, outcome: &ToolOutcome, into: StagedCommit<'_>) {
        let host = &self.core.host;
        let Some(registered) = host.find(&outcome.extension_id) else {
            return;
        };
        if host.stopped(&outcome.extension_id).is_some() {
            return;
        }
        let agent_rows = host.agent_rows_of(&outcome.extension_id);
        self.hook_into_commit(
            registered,
            &agent_rows,
            "tool-result",
            |extension, tx| extension.on_tool_result(tx, outcome),
            into,
        );
    }

    /// Fires a due Session timer in the transaction that claims it.
    pub(super) async fn fire_timer(&mut self, timer: TimerRow) -> Result<(), ShiitakeError> {
        let next = match &timer.cadence {
            Some(cadence) => Some(
                crate::extension::tx_next_cron(
                    cadence,
                    timer.due_at.max(self.core.config.clock.now_ms()),
                )
                .map_err(|error| ShiitakeError::internal(error.to_string()))?,
            ),
            None => None,
        };
        let claim = Op::ClaimTimer {
            id: timer.id.clone(),
            due_at: timer.due_at,
            next,
        };
        let fired = FiredTimer {
            id: crate::extension::TimerId(timer.id.clone()),
            session_id: timer.session_id.clone(),
            payload: timer.payload.clone(),
            due_at: timer.due_at,
        };
        let core = self.core.clone();
        let Some(registered) = core.host.find(&timer.extension_id) else {
            // The extension is gone: drop the timer so it does not fire forever.
            return Ok(self.commit_ops(vec![claim]).await?);
        };
        if core.host.stopped(&timer.extension_id).is_some() || !registered.grants.has(Grant::Timers)
        {
            return Err(ShiitakeError::stopped(format!(
                "extension {} is stopped or not granted; its timer waits",
                timer.extension_id
            )));
        }
        let _serialised = core.host.agent_transactions.lock().await;
        let agent = core.host.agent_rows_of(&timer.extension_id);
        let mut header = self.next_header();
        let mut ops = vec![claim];
        let mut staged = Staged::default();
        self.hook_into_commit(
            registered,
            &agent,
            "timer",
            |extension, tx| extension.on_timer(tx, &fired),
            StagedCommit {
                header: &mut header,
                ops: &mut ops,
                staged: &mut staged,
            },
        );
        take(&mut header);
        header.inbox_state = self.inbox_state_with(&staged);
        self.commit(ops, header).await?;
        self.adopt(staged).await;
        Ok(())
    }

    /// The inbox state once `staged` is adopted.
    pub(super) fn inbox_state_with(&self, staged: &Staged) -> shiitake_protocol::SessionInboxState {
        let mut attention = self.attention.clone();
        for (id, kind, change) in &staged.attention {
            match change {
                Some(raised) => attention.insert((id.clone(), kind.clone()), raised.clone()),
                None => attention.remove(&(id.clone(), kind.clone())),
            };
        }
        let waits = attention.values().any(|(inbox, _)| *inbox);
        self.inbox_state_given(waits, !staged.queued.is_empty())
    }
}
