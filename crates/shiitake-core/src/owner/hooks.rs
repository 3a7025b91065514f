//! The owner's side of the extension host: command calls, tool transactions,
//! settled, tool-result and timer hooks, and adopting what they staged once their
//! commit stands.

use serde_json::Value;
use shiitake_protocol::{ExtensionId, ShiitakeError};

use super::Owner;
use super::record::take;
use super::staging::{Staged, StagedCommit};
use crate::extension::host::Place;
use crate::extension::host::{Failure, Host, Registered, Rows, ToolTransaction, run_hook};
use crate::extension::lifecycle::check_scope;
use crate::extension::{CommandScope, FiredTimer, Grant, HookError, Settled, ToolOutcome};
use crate::store::{Op, RowScope, SessionHeader, TimerRow};

impl Owner {
    /// Adopts what a committed transaction staged.
    /// The caller holds `agent_transactions` since before the transaction ran.
    pub(super) async fn adopt(&mut self, staged: Staged) {
        for (id, writes) in staged.session_writes {
            self.extensions.apply_writes(id, writes);
        }
        let host = &self.deps.host;
        for (id, writes) in staged.agent_writes {
            host.apply_agent_writes(&id, writes);
        }
        for change in staged.attention {
            self.extensions.apply_attention(change);
        }
        for (id, reason) in staged.stops {
            tracing::warn!(extension = %id, %reason, "extension stopped");
            host.mark_stopped(&id, Some(reason));
        }
        if staged.timers_changed {
            host.timers_changed.notify_one();
        }
        let started = !staged.queued.is_empty();
        self.queue.extend(staged.queued, self.work.running());
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
        let host = self.deps.host.clone();
        let registered = host
            .find(id)
            .ok_or_else(|| ShiitakeError::not_found(format!("no extension {id} in this Agent")))?;
        if let Some(reason) = host.stopped(id) {
            return Err(ShiitakeError::stopped(format!(
                "extension {id} is stopped: {reason}"
            )));
        }
        let _serialised = host.agent_transactions.lock().await;
        let agent = host.agent_rows_of(id);
        let place = Place {
            session_id: Some(self.record.id()),
            session_rows: self.extensions.rows_of(id),
            agent_rows: &agent,
            now: self.deps.config.clock.now_ms(),
            agent_state: true,
            agent_command: false,
        };
        let mut header = self.next_header();
        let finished = match run_hook(registered, &place, hook) {
            Ok(finished) => finished,
            Err(Failure::Caller(error)) => return Err(error.into()),
            Err(Failure::Stop(reason)) => {
                let ops = vec![Host::status_op(registered, Some(reason.clone()))];
                self.commit(ops, header).await?;
                host.mark_stopped(id, Some(reason.clone()));
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
        let running = self.work.running();
        let value = StagedCommit {
            header: &mut header,
            ops: &mut ops,
            staged: &mut staged,
        }
        .stage(registered, finished, running);
        if let Some((request_id, payload)) = request {
            ops.push(Op::PutExtensionRequest {
                extension_id: id.clone(),
                scope: RowScope::Session(self.record.id().clone()),
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
        if let Some(registered) = self.deps.host.find(id) {
            if !registered.grants.has(Grant::Commands) {
                return Err(ShiitakeError::not_granted(format!(
                    "extension {id} was not granted commands"
                )));
            }
            check_scope(registered, command, CommandScope::Session)?;
        }
        let request = match input.get("requestId").and_then(Value::as_str) {
            Some(request_id) => {
                let payload = serde_json::json!([command, input]).to_string();
                let scope = RowScope::Session(self.record.id().clone());
                let stored = self
                    .deps
                    .store
                    .extension_request(id, &scope, request_id)
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
        agent_rows: Option<&Rows>,
        what: &str,
        hook: impl FnOnce(
            &dyn crate::extension::Extension,
            &mut crate::extension::Tx<'_>,
        ) -> Result<(), HookError>,
        mut into: StagedCommit<'_>,
    ) {
        let id = &registered.definition.id;
        let empty = Rows::new();
        let place = Place {
            session_id: Some(self.record.id()),
            session_rows: self.extensions.rows_of(id),
            agent_rows: agent_rows.unwrap_or(&empty),
            now: self.deps.config.clock.now_ms(),
            agent_state: agent_rows.is_some(),
            agent_command: false,
        };
        match run_hook(registered, &place, hook) {
            Ok(finished) => into.stage(registered, finished, self.work.running()),
            Err(failure) => {
                let reason = match failure {
                    Failure::Caller(error) => format!("{what} hook failed: {error}"),
                    Failure::Stop(reason) => reason,
                };
                into.ops
                    .push(Host::status_op(registered, Some(reason.clone())));
                into.staged.stops.push((id.clone(), reason));
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
        let host = &self.deps.host;
        let agent = host.agent_read();
        let empty = Rows::new();
        let mut staged = Staged::default();
        for registered in &host.extensions {
            let id = &registered.definition.id;
            if host.stopped(id).is_some() {
                continue;
            }
            // An extension whose settled hook leaves Agent state alone gets none (the
            // settle may not hold the Agent lock for it).
            let agent_rows = registered
                .settled_uses_agent_state()
                .then(|| agent.get(id).unwrap_or(&empty));
            self.hook_into_commit(
                registered,
                agent_rows,
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
        let host = &self.deps.host;
        let Some(registered) = host.find(&outcome.extension_id) else {
            return;
        };
        if host.stopped(&outcome.extension_id).is_some() {
            return;
        }
        let agent_rows = host.agent_rows_of(&outcome.extension_id);
        self.hook_into_commit(
            registered,
            Some(&agent_rows),
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
                    timer.due_at.max(self.deps.config.clock.now_ms()),
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
        let host = self.deps.host.clone();
        let Some(registered) = host.find(&timer.extension_id) else {
            // The extension is gone: drop the timer so it does not fire forever.
            return Ok(self.tenure.commit(vec![claim]).await?);
        };
        if host.stopped(&timer.extension_id).is_some() || !registered.grants.has(Grant::Timers) {
            return Err(ShiitakeError::stopped(format!(
                "extension {} is stopped or not granted; its timer waits",
                timer.extension_id
            )));
        }
        let _serialised = host.agent_transactions.lock().await;
        let agent = host.agent_rows_of(&timer.extension_id);
        let mut header = self.next_header();
        let mut ops = vec![claim];
        let mut staged = Staged::default();
        self.hook_into_commit(
            registered,
            Some(&agent),
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
        let waits = self.extensions.waits_on_person_with(&staged.attention);
        self.inbox_state_given(waits, !staged.queued.is_empty())
    }
}
