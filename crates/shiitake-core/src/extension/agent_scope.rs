//! The Agent-scope hook routine, written once: an Agent command, a timer of no
//! Session and an admission's answer all run their hook the same way.
//!
//! The routine takes the Agent-transaction lock, hands the hook the extension's
//! committed Agent rows, commits the caller's rows with the hook's in one
//! transaction, and only then adopts the hook's Agent writes; a failing extension
//! is stopped in the transaction that would have carried its writes.

use super::host::{AgentGuard, Failure, Finished, Place, Registered, run_hook};
use super::tx::Rows;
use super::{Extension, HookError, Tx};
use crate::clock::Clock;
use crate::extension::host::Host;
use crate::store::{Op, Store, StoreError};
use shiitake_protocol::SessionId;

/// What Agent-scope routines use of their Agent: the store they commit to, the
/// extension host, and the clock their hooks read.
#[derive(Clone, Copy)]
pub(crate) struct AgentScopeDeps<'a> {
    pub(crate) store: &'a dyn Store,
    pub(crate) host: &'a Host,
    pub(crate) clock: &'a dyn Clock,
}

/// One Agent-scope transaction of one extension, holding the Agent-transaction lock
/// until it is committed or dropped.
pub(crate) struct AgentScope<'a> {
    deps: AgentScopeDeps<'a>,
    registered: &'a Registered,
    rows: Rows,
    _serialised: AgentGuard<'a>,
}

impl<'a> AgentScope<'a> {
    /// Waits for the Agent-transaction lock and reads the extension's Agent rows.
    pub(crate) async fn lock(deps: AgentScopeDeps<'a>, registered: &'a Registered) -> Self {
        let serialised = deps.host.agent_transactions.lock().await;
        let rows = deps.host.agent_rows_of(&registered.definition.id);
        Self {
            deps,
            registered,
            rows,
            _serialised: serialised,
        }
    }

    /// Runs a timer or admission hook over the rows read at [`lock`](Self::lock);
    /// nothing is committed yet.
    pub(crate) fn run<T>(
        &self,
        hook: impl FnOnce(&dyn Extension, &mut Tx<'_>) -> Result<T, HookError>,
    ) -> Result<Finished<T>, Failure> {
        self.run_at(false, hook)
    }

    /// Runs a command's hook like [`run`](Self::run); it may require Sessions
    /// ([`Tx::require_session`]), which the caller checks before committing.
    pub(crate) fn run_command<T>(
        &self,
        hook: impl FnOnce(&dyn Extension, &mut Tx<'_>) -> Result<T, HookError>,
    ) -> Result<Finished<T>, Failure> {
        self.run_at(true, hook)
    }

    fn run_at<T>(
        &self,
        agent_command: bool,
        hook: impl FnOnce(&dyn Extension, &mut Tx<'_>) -> Result<T, HookError>,
    ) -> Result<Finished<T>, Failure> {
        let empty = Rows::default();
        let place = Place {
            session_id: None,
            session_rows: &empty,
            agent_rows: &self.rows,
            now: self.deps.clock.now_ms(),
            agent_state: true,
            agent_command,
        };
        run_hook(self.registered, &place, hook)
    }

    /// Commits `ops` followed by the hook's rows, then adopts its Agent writes and
    /// wakes the timer scheduler when it changed timers; returns the hook's value.
    pub(crate) async fn commit<T>(
        self,
        mut ops: Vec<Op>,
        finished: Finished<T>,
    ) -> Result<T, StoreError> {
        ops.extend(finished.ops);
        self.deps.store.commit(ops).await?;
        let host = self.deps.host;
        host.apply_agent_writes(&self.registered.definition.id, finished.agent_writes);
        if finished.timers_changed {
            host.timers_changed.notify_one();
        }
        Ok(finished.value)
    }

    /// Commits `ops` with the extension's stop (for `reason`), and marks it stopped.
    pub(crate) async fn stop(self, mut ops: Vec<Op>, reason: String) -> Result<(), StoreError> {
        ops.push(Host::status_op(self.registered, Some(reason.clone())));
        self.deps.store.commit(ops).await?;
        self.deps
            .host
            .mark_stopped(&self.registered.definition.id, Some(reason));
        Ok(())
    }
}

/// The first of the Sessions a command's hook required ([`Tx::require_session`]) that
/// does not exist in `store`.
pub(crate) async fn missing_session<T>(
    store: &dyn Store,
    finished: &Finished<T>,
) -> Result<Option<SessionId>, StoreError> {
    for session_id in &finished.required_sessions {
        if store.load_session(session_id).await?.is_none() {
            return Ok(Some(session_id.clone()));
        }
    }
    Ok(None)
}
