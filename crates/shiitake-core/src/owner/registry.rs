//! The live owners of an Agent: at most one per Session, spawned on demand.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use shiitake_protocol::SessionId;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::{Request, run_owner};
use crate::agent_core::AgentCore;

/// Requests an owner holds before callers wait for room.
const MAILBOX: usize = 256;

struct Live {
    generation: u64,
    mailbox: mpsc::Sender<Request>,
}

/// Asks the owner behind `mailbox` to stop (runs stop without a terminal, the lease
/// goes back) and waits until it has; an owner already gone counts as stopped.
pub(crate) async fn stop(mailbox: &mpsc::Sender<Request>) {
    let (done, stopped) = tokio::sync::oneshot::channel();
    if mailbox.send(Request::Stop(done)).await.is_ok() {
        // Either answer means the owner no longer runs anything.
        if stopped.await.is_err() {
            tracing::trace!("an owner ended before answering its stop");
        }
    }
}

/// Maps each live Session to its owner's mailbox.
#[derive(Default)]
pub(crate) struct Registry {
    live: Mutex<(u64, HashMap<SessionId, Live>)>,
}

impl Registry {
    /// The mailbox of the Session's owner, spawning the owner if none is live.
    pub(crate) fn mailbox(
        &self,
        core: &Arc<AgentCore>,
        session_id: &SessionId,
    ) -> mpsc::Sender<Request> {
        let mut guard = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let (next_generation, live) = &mut *guard;
        if let Some(existing) = live.get(session_id)
            && !existing.mailbox.is_closed()
        {
            return existing.mailbox.clone();
        }
        *next_generation += 1;
        let generation = *next_generation;
        let (sender, receiver) = mpsc::channel(MAILBOX);
        live.insert(
            session_id.clone(),
            Live {
                generation,
                mailbox: sender.clone(),
            },
        );
        let span = tracing::info_span!("owner", session = %session_id, generation);
        tokio::spawn(
            run_owner(
                core.clone(),
                session_id.clone(),
                generation,
                sender.clone(),
                receiver,
            )
            .instrument(span),
        );
        sender
    }

    /// Removes the owner of `generation`; `false` if another owner holds the Session now.
    pub(crate) fn retire(&self, session_id: &SessionId, generation: u64) -> bool {
        let mut guard = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let live = &mut guard.1;
        match live.get(session_id) {
            Some(existing) if existing.generation == generation => {
                live.remove(session_id);
                true
            }
            _ => false,
        }
    }

    /// The mailboxes of every live owner, for closing the Agent.
    pub(crate) fn all(&self) -> Vec<mpsc::Sender<Request>> {
        let guard = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        guard.1.values().map(|live| live.mailbox.clone()).collect()
    }

    /// The mailbox of a live owner, without spawning one.
    pub(crate) fn live_mailbox(&self, session_id: &SessionId) -> Option<mpsc::Sender<Request>> {
        let guard = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        guard.1.get(session_id).map(|live| live.mailbox.clone())
    }

    /// How many owners are live.
    pub(crate) fn len(&self) -> usize {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .len()
    }
}
