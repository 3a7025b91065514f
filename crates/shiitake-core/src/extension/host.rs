//! The host side: registered extensions, their status, running hooks, turning a
//! finished transaction into store ops.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use shiitake_capabilities::ToolError;
use shiitake_protocol::footer::{FooterRowV0, MAX_FOOTER_ROWS};
use shiitake_protocol::{ExtensionId, ExtensionSlotV0, SessionId};
use tokio::sync::oneshot;

pub(crate) use super::agent_lock::{AgentGuard, AgentTransactions};
use super::definition::ExtensionDefinition;
pub(crate) use super::tx::Rows;
use super::tx::{Effect, StateView, Tx};
use super::{Extension, Grant, Grants, HookError, StateScope};
use crate::store::{ExtensionStatusRow, Op, RowScope, TimerKind, TimerRow};

/// Longest prompt section an extension may contribute to a run, in UTF-8 bytes.
///
/// A longer section is cut at the last character boundary that leaves room for
/// `…[truncated]` and ends with that marker, so the model can tell it was cut.
pub const PROMPT_SECTION_LIMIT: usize = 4096;

const TRUNCATED: &str = "…[truncated]";

/// Bounds a prompt section as [`PROMPT_SECTION_LIMIT`] documents.
pub fn bound_prompt_section(section: &str) -> String {
    if section.len() <= PROMPT_SECTION_LIMIT {
        return section.to_owned();
    }
    let mut cut = PROMPT_SECTION_LIMIT - TRUNCATED.len();
    while !section.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{TRUNCATED}", &section[..cut])
}

/// One extension as the host knows it.
pub(crate) struct Registered {
    pub(crate) extension: Arc<dyn Extension>,
    pub(crate) definition: ExtensionDefinition,
    pub(crate) grants: Grants,
    pub(crate) revision: String,
    pub(crate) files: Option<super::FilesHandle>,
}

impl Registered {
    /// Whether this extension's settled hook gets Agent state (and so a settle takes
    /// the Agent-transaction lock for it): it keeps Agent state and has not said its
    /// settled hook leaves it alone ([`Extension::settled_uses_agent_state`]).
    pub(crate) fn settled_uses_agent_state(&self) -> bool {
        self.definition.scopes.contains(&StateScope::Agent)
            && self.extension.settled_uses_agent_state()
    }
}

/// A prompt an extension admitted, to be accepted with the transaction.
#[derive(Clone, Debug)]
pub(crate) struct Admission {
    pub(crate) command_id: shiitake_protocol::CommandId,
    pub(crate) text: shiitake_protocol::PromptText,
    pub(crate) delivery: shiitake_protocol::PromptDelivery,
    pub(crate) correlation: String,
}

/// Attention raised (`Some((inbox, text))`) or cleared (`None`).
pub(crate) type Raised = Option<(bool, String)>;

/// Attention of one kind raised or cleared by a transaction.
pub(crate) type AttentionChange = (String, Raised);

/// Row writes of one scope: (collection, key) → value, `None` deletes.
pub(crate) type Writes = Vec<((String, String), Option<Value>)>;

/// A hook that finished: its value and everything to commit with it.
pub(crate) struct Finished<T> {
    pub(crate) value: T,
    pub(crate) ops: Vec<Op>,
    pub(crate) admissions: Vec<Admission>,
    /// Chat lines to append ([`Tx::append_line`]).
    pub(crate) lines: Vec<shiitake_protocol::PromptText>,
    pub(crate) attention: Vec<AttentionChange>,
    pub(crate) session_writes: Writes,
    pub(crate) agent_writes: Writes,
    pub(crate) timers_changed: bool,
    /// Sessions that must exist for the commit to stand ([`Tx::require_session`]).
    pub(crate) required_sessions: Vec<SessionId>,
}

impl<T> Finished<T> {
    /// Whether committing it would change nothing: no rows, timers, attention or admissions.
    pub(crate) fn changes_nothing(&self) -> bool {
        self.ops.is_empty()
            && self.admissions.is_empty()
            && self.lines.is_empty()
            && self.attention.is_empty()
    }
}

/// A hook that did not finish.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The caller was wrong (bad input, unknown command, not granted): tell the caller.
    Caller(HookError),
    /// The extension failed or panicked: stop it with this reason.
    Stop(String),
}

/// The registered extensions of an Agent and their state outside any Session.
#[derive(Default)]
pub(crate) struct Host {
    pub(crate) extensions: Vec<Registered>,
    stopped: Mutex<HashMap<ExtensionId, String>>,
    /// This Agent's part of the stopped-extensions gauge, made at the first stop.
    stopped_share: Mutex<Option<crate::telemetry::GaugeShare>>,
    /// Stopped because this build cannot read the stored state: resuming cannot help.
    unreadable: Mutex<std::collections::HashSet<ExtensionId>>,
    /// Committed Agent-scope rows of every extension; readers never wait on a commit.
    agent_rows: Arc<std::sync::RwLock<HashMap<ExtensionId, Rows>>>,
    /// Held for the whole of a transaction that may write Agent-scope rows, so they
    /// serialise while readers keep reading the committed rows.
    pub(crate) agent_transactions: AgentTransactions,
    /// Woken when a timer is set or cleared, so the scheduler recomputes its sleep.
    pub(crate) timers_changed: tokio::sync::Notify,
}

impl Host {
    pub(crate) fn new(extensions: Vec<Registered>) -> Self {
        Self {
            extensions,
            ..Self::default()
        }
    }

    /// On a store several processes share, Agent-scope transactions also serialise
    /// across processes and read the Agent's rows from the store, not from this
    /// process's copy (only when some extension keeps Agent-scope state).
    pub(crate) fn share_agent_state(
        &self,
        store: Arc<dyn crate::store::Store>,
        ownership: Arc<dyn crate::store::Ownership>,
    ) {
        if self.keeps_agent_state() {
            self.agent_transactions
                .share(store, ownership, self.agent_rows.clone());
        }
    }

    /// Whether some extension may read or write Agent-scope state: only then must a
    /// Session's hooks take the Agent-transaction lock.
    pub(crate) fn keeps_agent_state(&self) -> bool {
        self.extensions
            .iter()
            .any(|registered| registered.definition.scopes.contains(&StateScope::Agent))
    }

    /// The Agent-transaction lock for the settled hooks every extension runs in a
    /// Session's commit: taken only when some extension's settled hook uses Agent
    /// state, so settles of different Sessions (and, on a shared store, of different
    /// processes) do not queue on it for nothing.
    pub(crate) async fn lock_for_settled_hooks(&self) -> Option<AgentGuard<'_>> {
        if self
            .extensions
            .iter()
            .any(Registered::settled_uses_agent_state)
        {
            Some(self.agent_transactions.lock().await)
        } else {
            None
        }
    }

    pub(crate) fn find(&self, id: &ExtensionId) -> Option<&Registered> {
        self.extensions
            .iter()
            .find(|registered| &registered.definition.id == id)
    }

    /// Why the extension is stopped, if it is.
    pub(crate) fn stopped(&self, id: &ExtensionId) -> Option<String> {
        self.stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    pub(crate) fn mark_stopped(&self, id: &ExtensionId, reason: Option<String>) {
        let mut stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        match reason {
            Some(reason) => stopped.insert(id.clone(), reason),
            None => stopped.remove(id),
        };
        self.stopped_share
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| {
                crate::telemetry::GaugeShare::new(crate::telemetry::EXTENSIONS_STOPPED)
            })
            .set(stopped.len());
    }

    /// Stops an extension whose stored state this build cannot read (until another build opens it).
    pub(crate) fn mark_unreadable(&self, id: &ExtensionId, reason: String) {
        self.unreadable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone());
        self.mark_stopped(id, Some(reason));
    }

    /// Whether the extension's stored state is unreadable by this build.
    pub(crate) fn unreadable(&self, id: &ExtensionId) -> bool {
        self.unreadable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id)
    }

    /// A copy of one extension's committed Agent-scope rows.
    pub(crate) fn agent_rows_of(&self, id: &ExtensionId) -> Rows {
        let rows = self
            .agent_rows
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        rows.get(id).cloned().unwrap_or_default()
    }

    /// Every extension's committed Agent-scope rows, for synchronous readers (never
    /// hold it across an await).
    pub(crate) fn agent_read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<ExtensionId, Rows>> {
        self.agent_rows
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies committed Agent-scope writes (the caller holds `agent_transactions`).
    pub(crate) fn apply_agent_writes(&self, id: &ExtensionId, writes: Writes) {
        let mut rows = self
            .agent_rows
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        apply_writes(rows.entry(id.clone()).or_default(), writes);
    }

    /// The op that records the extension stopped (or running again).
    pub(crate) fn status_op(registered: &Registered, reason: Option<String>) -> Op {
        Op::PutExtensionStatus(ExtensionStatusRow {
            extension_id: registered.definition.id.clone(),
            revision: registered.revision.clone(),
            schema_version: registered.definition.schema_version,
            stopped_reason: reason,
        })
    }

    /// The extension's slot in an observation: absent without the projection grant.
    pub(crate) fn slot(
        &self,
        registered: &Registered,
        view: StateView<'_>,
    ) -> Option<ExtensionSlotV0> {
        if !registered.grants.has(Grant::Projection) {
            return None;
        }
        if let Some(reason) = self.stopped(&registered.definition.id) {
            return Some(ExtensionSlotV0::Stopped { reason });
        }
        let extension = registered.extension.clone();
        match std::panic::catch_unwind(AssertUnwindSafe(|| extension.projection(&view))) {
            Ok(value) => Some(ExtensionSlotV0::Running {
                value: value.unwrap_or(Value::Null),
            }),
            Err(panic) => Some(ExtensionSlotV0::Stopped {
                reason: panic_reason(&panic),
            }),
        }
    }
}

impl Host {
    /// The extension's footer rows in an observation: none without the projection
    /// grant or while stopped; held to the protocol's bounds, and always under the
    /// extension's own id.
    pub(crate) fn footer(&self, registered: &Registered, view: &StateView<'_>) -> Vec<FooterRowV0> {
        let id = &registered.definition.id;
        if !registered.grants.has(Grant::Projection) || self.stopped(id).is_some() {
            return Vec::new();
        }
        let extension = registered.extension.clone();
        match std::panic::catch_unwind(AssertUnwindSafe(|| extension.footer(view))) {
            Ok(rows) => rows
                .into_iter()
                .take(MAX_FOOTER_ROWS)
                .map(|row| {
                    FooterRowV0 {
                        extension_id: id.clone(),
                        ..row
                    }
                    .bounded()
                })
                .collect(),
            Err(panic) => {
                tracing::warn!(extension = %id, reason = %panic_reason(&panic), "footer panicked");
                Vec::new()
            }
        }
    }
}

fn panic_reason(panic: &Box<dyn std::any::Any + Send>) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned());
    format!("hook panicked: {message}")
}

/// Where a transaction runs.
pub(crate) struct Place<'a> {
    pub(crate) session_id: Option<&'a SessionId>,
    pub(crate) session_rows: &'a Rows,
    pub(crate) agent_rows: &'a Rows,
    pub(crate) now: u64,
    /// Whether the hook may read and write Agent state: not a settled hook whose
    /// extension said it does not ([`Registered::settled_uses_agent_state`]).
    pub(crate) agent_state: bool,
    /// An Agent-scope command: only its hook may require Sessions
    /// ([`Tx::require_session`]), which its caller checks before committing.
    pub(crate) agent_command: bool,
}

/// Runs one hook of `registered` over a transaction and collects what it changed.
pub(crate) fn run_hook<T>(
    registered: &Registered,
    place: &Place<'_>,
    hook: impl FnOnce(&dyn Extension, &mut Tx<'_>) -> Result<T, HookError>,
) -> Result<Finished<T>, Failure> {
    let definition = &registered.definition;
    let mut tx = Tx {
        extension_id: &definition.id,
        grants: &registered.grants,
        scopes: &definition.scopes,
        session_id: place.session_id,
        session_rows: place.session_rows,
        agent_rows: place.agent_rows,
        agent_state: place.agent_state,
        writes: BTreeMap::new(),
        effects: Vec::new(),
        now: place.now,
        required_sessions: place.agent_command.then(Vec::new),
    };
    let extension = registered.extension.clone();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| hook(&*extension, &mut tx)));
    let value = match outcome {
        Ok(Ok(value)) => value,
        Ok(Err(HookError::Failed(reason))) => return Err(Failure::Stop(reason)),
        Ok(Err(error)) => return Err(Failure::Caller(error)),
        Err(panic) => return Err(Failure::Stop(panic_reason(&panic))),
    };
    Ok(finish(definition, place, tx, value))
}

fn finish<T>(
    definition: &ExtensionDefinition,
    place: &Place<'_>,
    tx: Tx<'_>,
    value: T,
) -> Finished<T> {
    let session_id = place.session_id;
    let mut finished = Finished {
        value,
        ops: Vec::new(),
        admissions: Vec::new(),
        lines: Vec::new(),
        attention: Vec::new(),
        session_writes: Vec::new(),
        agent_writes: Vec::new(),
        timers_changed: false,
        required_sessions: Vec::new(),
    };
    finished.required_sessions = tx.required_sessions.unwrap_or_default();
    for ((scope, collection, key), value) in tx.writes {
        let row_scope = match (scope, session_id) {
            (StateScope::Session, Some(session_id)) => RowScope::Session(session_id.clone()),
            (StateScope::Agent, _) => RowScope::Agent,
            // The transaction refuses Session-scope writes outside a Session.
            (StateScope::Session, None) => continue,
        };
        let op = match &value {
            Some(value) => Op::PutExtensionRow {
                extension_id: definition.id.clone(),
                scope: row_scope,
                collection: collection.clone(),
                key: key.clone(),
                value: value.clone(),
            },
            None => Op::DeleteExtensionRow {
                extension_id: definition.id.clone(),
                scope: row_scope,
                collection: collection.clone(),
                key: key.clone(),
            },
        };
        finished.ops.push(op);
        match scope {
            StateScope::Session => finished.session_writes.push(((collection, key), value)),
            StateScope::Agent => finished.agent_writes.push(((collection, key), value)),
        }
    }
    for effect in tx.effects {
        match effect {
            Effect::Admit {
                command_id,
                text,
                delivery,
                correlation,
            } => {
                finished.admissions.push(Admission {
                    command_id,
                    text,
                    delivery,
                    correlation,
                });
            }
            Effect::AppendLine { text } => finished.lines.push(text),
            Effect::SetTimer {
                id,
                due_at,
                cadence,
                payload,
            } => {
                finished.timers_changed = true;
                finished.ops.push(Op::PutTimer(TimerRow {
                    id: id.0,
                    extension_id: definition.id.clone(),
                    session_id: session_id.cloned(),
                    due_at,
                    cadence,
                    payload,
                    kind: TimerKind::Hook,
                }));
            }
            Effect::AdmitInto(payload) => {
                // A delivery row, due now: the scheduler takes it through the door.
                finished.timers_changed = true;
                finished.ops.push(Op::PutTimer(TimerRow {
                    id: ulid::Ulid::generate().to_string(),
                    extension_id: definition.id.clone(),
                    session_id: None,
                    due_at: place.now,
                    cadence: None,
                    payload,
                    kind: TimerKind::Admission,
                }));
            }
            Effect::ClearTimer(id) => {
                finished.timers_changed = true;
                finished.ops.push(Op::DeleteTimer {
                    extension_id: definition.id.clone(),
                    id: id.0,
                });
            }
            Effect::RaiseAttention { kind, inbox, text } => {
                if let Some(session_id) = session_id {
                    finished.ops.push(Op::PutAttention {
                        session_id: session_id.clone(),
                        extension_id: definition.id.clone(),
                        kind: kind.clone(),
                        inbox,
                        text: text.clone(),
                    });
                    finished.attention.push((kind, Some((inbox, text))));
                }
            }
            Effect::ClearAttention { kind } => {
                if let Some(session_id) = session_id {
                    finished.ops.push(Op::DeleteAttention {
                        session_id: session_id.clone(),
                        extension_id: definition.id.clone(),
                        kind: kind.clone(),
                    });
                    finished.attention.push((kind, None));
                }
            }
        }
    }
    finished
}

/// Applies committed writes to an in-memory copy of the rows.
pub(crate) fn apply_writes(rows: &mut Rows, writes: Writes) {
    for (key, value) in writes {
        match value {
            Some(value) => {
                rows.insert(key, value);
            }
            None => {
                rows.remove(&key);
            }
        }
    }
}

/// A boxed transaction a tool handler sends to the Session's owner.
pub(crate) type ToolTransaction = Box<dyn FnOnce(&mut Tx<'_>) -> Result<Value, HookError> + Send>;

/// Where a tool handler's transaction goes: the mailbox of the run's Session owner.
#[async_trait::async_trait]
pub(crate) trait TxMailbox: Send + Sync {
    /// Sends one transaction to run and commit; `false` once the owner has stopped.
    async fn send_transaction(
        &self,
        extension_id: ExtensionId,
        transaction: ToolTransaction,
        reply: oneshot::Sender<Result<Value, shiitake_protocol::ShiitakeError>>,
    ) -> bool;
}

/// Lets an extension's tool handlers change state: each call is an owner
/// transaction of the run's Session, committed before the tool answers.
#[derive(Clone)]
pub struct ToolTx {
    pub(crate) mailbox: Arc<dyn TxMailbox>,
    pub(crate) extension_id: ExtensionId,
    pub(crate) changes: tokio::sync::watch::Receiver<u64>,
}

/// Tells a tool handler that its extension's state in this Session changed, so a
/// handler that waits for something (a person's answer) can look again instead of
/// polling. Made by [`ToolTx::state_changes`].
#[derive(Debug)]
pub struct StateChanges(tokio::sync::watch::Receiver<u64>);

impl StateChanges {
    /// Resolves at the next committed change of the extension's Session rows after
    /// this value was made (or after the previous `changed`). Fails when the
    /// Session's owner stopped.
    pub async fn changed(&mut self) -> Result<(), ToolError> {
        self.0
            .changed()
            .await
            .map_err(|_| ToolError::fatal("the Session's owner stopped"))
    }
}

impl std::fmt::Debug for ToolTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolTx")
            .field("extension_id", &self.extension_id)
            .finish_non_exhaustive()
    }
}

impl ToolTx {
    /// A signal of later changes to this extension's Session rows. Take it before
    /// reading the state you wait on, then wait on it between reads: no change
    /// committed after this call is missed.
    pub fn state_changes(&self) -> StateChanges {
        let mut receiver = self.changes.clone();
        receiver.mark_unchanged();
        StateChanges(receiver)
    }

    /// Runs `transaction` in the owner and commits it; its error is told to the model.
    /// A transaction that changes nothing (a read) commits nothing.
    pub async fn run(
        &self,
        transaction: impl FnOnce(&mut Tx<'_>) -> Result<Value, HookError> + Send + 'static,
    ) -> Result<Value, ToolError> {
        let (reply, answer) = oneshot::channel();
        let sent = self
            .mailbox
            .send_transaction(self.extension_id.clone(), Box::new(transaction), reply)
            .await;
        if !sent {
            return Err(ToolError::fatal("the Session's owner stopped"));
        }
        match answer.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(ToolError::for_model(error.message)),
            Err(_) => Err(ToolError::fatal("the Session's owner stopped")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_sections_are_bounded_at_a_character_boundary() {
        let exact = "a".repeat(PROMPT_SECTION_LIMIT);
        assert_eq!(bound_prompt_section(&exact), exact);
        let over = "é".repeat(PROMPT_SECTION_LIMIT);
        let bounded = bound_prompt_section(&over);
        assert!(bounded.len() <= PROMPT_SECTION_LIMIT, "{}", bounded.len());
        assert!(bounded.ends_with(TRUNCATED));
        let one_over = "a".repeat(PROMPT_SECTION_LIMIT + 1);
        let bounded = bound_prompt_section(&one_over);
        assert_eq!(bounded.len(), PROMPT_SECTION_LIMIT);
        assert!(bounded.ends_with(TRUNCATED));
    }
}
