//! The live owners of an Agent: at most one per Session, started on demand.
//!
//! The registry only maps Sessions to mailboxes. What runs behind a mailbox is
//! started by the [`StartOwner`] the Agent gives it when it opens, so the registry
//! knows nothing of the owner's task, its store or other processes.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use shiitake_protocol::{SessionId, ShiitakeError};
use tokio::sync::{mpsc, oneshot};

use super::request::{Reply, Request};

/// Requests an owner holds before callers wait for room.
const MAILBOX: usize = 256;

/// Times a call is retried when the owner it reached retired under it.
const OWNER_RETRIES: usize = 3;

/// A newly registered owner: its Session, its generation, and both ends of its mailbox.
pub(crate) struct OwnerSlot {
    pub(crate) session_id: SessionId,
    /// Grows with every owner registered; a retiring owner names its own.
    pub(crate) generation: u64,
    /// The owner's own mailbox, for its runs and tool handlers to write to.
    pub(crate) mailbox: mpsc::Sender<Request>,
    pub(crate) requests: mpsc::Receiver<Request>,
}

/// Starts the task behind a newly registered mailbox.
pub(crate) type StartOwner = Box<dyn Fn(OwnerSlot) + Send + Sync>;

struct Live {
    generation: u64,
    mailbox: mpsc::Sender<Request>,
}

/// Maps each live Session to its owner's mailbox.
pub(crate) struct Registry {
    live: Mutex<(u64, HashMap<SessionId, Live>)>,
    start: StartOwner,
    /// This registry's part of the open-Sessions gauge: its live owners. Locked only
    /// while `live` is, after it.
    open: Mutex<crate::telemetry::GaugeShare>,
}

impl Registry {
    /// A registry whose owners `start` runs.
    pub(crate) fn new(start: StartOwner) -> Self {
        Self {
            live: Mutex::new((0, HashMap::new())),
            start,
            open: Mutex::new(crate::telemetry::GaugeShare::new(
                crate::telemetry::OPEN_SESSIONS,
            )),
        }
    }

    /// Reports `live` owners to the open-Sessions gauge.
    fn report(&self, live: usize) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set(live);
    }

    /// The mailbox of the Session's owner, starting the owner if none is live.
    pub(crate) fn mailbox(&self, session_id: &SessionId) -> mpsc::Sender<Request> {
        let mut guard = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let (next_generation, live) = &mut *guard;
        if let Some(existing) = live.get(session_id)
            && !existing.mailbox.is_closed()
        {
            return existing.mailbox.clone();
        }
        *next_generation += 1;
        let generation = *next_generation;
        let (mailbox, requests) = mpsc::channel(MAILBOX);
        live.insert(
            session_id.clone(),
            Live {
                generation,
                mailbox: mailbox.clone(),
            },
        );
        self.report(live.len());
        (self.start)(OwnerSlot {
            session_id: session_id.clone(),
            generation,
            mailbox: mailbox.clone(),
            requests,
        });
        mailbox
    }

    /// Sends one request to the Session's owner and waits for its answer, retrying
    /// when the owner retired before answering.
    pub(crate) async fn ask<T>(
        &self,
        session_id: &SessionId,
        request: impl Fn(Reply<T>) -> Request,
    ) -> Result<T, ShiitakeError> {
        for _ in 0..OWNER_RETRIES {
            let mailbox = self.mailbox(session_id);
            let (reply, answer) = oneshot::channel();
            if mailbox.send(request(reply)).await.is_err() {
                continue;
            }
            match answer.await {
                Ok(result) => return result,
                Err(_) => continue,
            }
        }
        Err(ShiitakeError::unavailable(format!(
            "Session {session_id} could not be reached; try again"
        )))
    }

    /// Removes the owner of `generation`; `false` if another owner holds the Session now.
    pub(crate) fn retire(&self, session_id: &SessionId, generation: u64) -> bool {
        let mut guard = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let live = &mut guard.1;
        match live.get(session_id) {
            Some(existing) if existing.generation == generation => {
                live.remove(session_id);
                self.report(live.len());
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

    /// The mailbox of a live owner, without starting one.
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

/// Asks the owner behind `mailbox` to stop (runs stop without a terminal, the lease
/// goes back) and waits until it has; an owner already gone counts as stopped.
pub(crate) async fn stop(mailbox: &mpsc::Sender<Request>) {
    let (done, stopped) = oneshot::channel();
    if mailbox.send(Request::Stop(done)).await.is_ok() {
        // Either answer means the owner no longer runs anything.
        if stopped.await.is_err() {
            tracing::trace!("an owner ended before answering its stop");
        }
    }
}
