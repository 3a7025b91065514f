//! One Session's browser host: the [`Machine`] plus the wiring around it (each
//! tab's event queue, the waiting run's reply channel).
//!
//! Locks are `std` mutexes held only for a few map operations, never across an await.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use serde_json::Value;
use shiitake_protocol::SessionId;
use tokio::sync::{mpsc, oneshot};

use super::bridge::Inner;
use super::error::{Refusal, UiError};
use super::limits::{EVENT_BUFFER, MAX_COMMANDS, MAX_DESCRIPTION_BYTES};
use super::machine::Machine;
use super::wire::{
    BrowserEvent, BrowserOutcome, BrowserRequest, BrowserRequestId, ClaimBody, ConnectionId,
    Discovered, RequestKind, ResultBody, bounded_message, valid_command_name,
};

/// The run waiting for the outstanding request.
struct Pending {
    request: BrowserRequest,
    reply: oneshot::Sender<Result<Value, UiError>>,
}

#[derive(Default)]
struct State {
    machine: Machine,
    streams: HashMap<ConnectionId, mpsc::Sender<BrowserEvent>>,
    pending: Option<Pending>,
}

impl State {
    /// Hands the waiting run its answer, if `id` is the request it waits for.
    fn settle(&mut self, id: &BrowserRequestId, result: Result<Value, UiError>) {
        if self
            .pending
            .as_ref()
            .is_some_and(|p| &p.request.request_id == id)
            && let Some(pending) = self.pending.take()
        {
            // A run that stopped waiting (cancelled, past its deadline) dropped its
            // receiver; there is no one left to tell.
            drop(pending.reply.send(result));
        }
    }

    /// A tab's stream is gone (or stuck): forget it, settling what that settles.
    fn disconnect(&mut self, connection: &ConnectionId) {
        self.streams.remove(connection);
        if let Some((id, error)) = self.machine.disconnect(connection) {
            self.settle(&id, Err(error));
        }
    }

    /// Queues `event` for every tab; a tab whose queue is full or gone is disconnected.
    fn broadcast(&mut self, event: &BrowserEvent) {
        let stuck: Vec<ConnectionId> = self
            .streams
            .iter()
            .filter(|(_, queue)| queue.try_send(event.clone()).is_err())
            .map(|(id, _)| id.clone())
            .collect();
        for connection in stuck {
            self.disconnect(&connection);
        }
    }
}

/// One Session's host. Held by each open events stream and each lent `ui`
/// module; dropped (and forgotten by the bridge) when neither holds it.
pub(crate) struct SessionHost {
    session: SessionId,
    bridge: Weak<Inner>,
    claim_timeout: Duration,
    state: Mutex<State>,
}

impl SessionHost {
    pub(crate) fn new(session: SessionId, bridge: Weak<Inner>, claim_timeout: Duration) -> Self {
        Self {
            session,
            bridge,
            claim_timeout,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if something did, the state is
        // still a consistent set of maps.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn connections(&self) -> usize {
        self.state().machine.connections()
    }

    /// Opens a tab's events stream: `hello` first, then the unclaimed outstanding
    /// request if there is one, then every request to come.
    pub(crate) fn connect(self: &Arc<Self>) -> Result<BrowserStream, UiError> {
        let connection = ConnectionId::generate();
        let (queue, events) = mpsc::channel(EVENT_BUFFER);
        let mut state = self.state();
        if let Some(id) = state.machine.connect(connection.clone())?
            && let Some(pending) = state
                .pending
                .as_ref()
                .filter(|p| p.request.request_id == id)
        {
            // The queue is new and empty: this cannot be full.
            drop(queue.try_send(BrowserEvent::Request(pending.request.clone())));
        }
        state.streams.insert(connection.clone(), queue);
        drop(state);
        Ok(BrowserStream {
            hello: Some(BrowserEvent::Hello {
                connection_id: connection.clone(),
            }),
            events,
            guard: ConnectionGuard {
                host: self.clone(),
                connection,
            },
        })
    }

    /// Sends `kind` to the tabs and waits for the claimer's result.
    ///
    /// Dropping the future (the run was cancelled or passed its deadline) gives
    /// the request up: a later claim or result for it is refused.
    pub(crate) async fn request(self: &Arc<Self>, kind: RequestKind) -> Result<Value, UiError> {
        let request = BrowserRequest {
            request_id: BrowserRequestId::generate(),
            kind,
        };
        let id = request.request_id.clone();
        let (reply, mut answer) = oneshot::channel();
        {
            let mut state = self.state();
            state.machine.begin(id.clone())?;
            state.pending = Some(Pending {
                request: request.clone(),
                reply,
            });
            state.broadcast(&BrowserEvent::Request(request));
        }
        let _give_up = GiveUpOnDrop {
            host: self.clone(),
            id: id.clone(),
        };
        let expiry = tokio::time::sleep(self.claim_timeout);
        tokio::pin!(expiry);
        let mut awaiting_claim = true;
        loop {
            tokio::select! {
                biased;
                answered = &mut answer => return answered.unwrap_or(Err(UiError::Closed)),
                () = &mut expiry, if awaiting_claim => {
                    let mut state = self.state();
                    if state.machine.expire_unclaimed(&id) {
                        state.pending = None;
                        let millis = u64::try_from(self.claim_timeout.as_millis()).unwrap_or(u64::MAX);
                        return Err(UiError::Unclaimed { millis });
                    }
                    drop(state);
                    // Claimed in time: wait for the claimer's result or its disconnect.
                    awaiting_claim = false;
                }
            }
        }
    }

    pub(crate) fn claim(&self, body: &ClaimBody) -> Result<(), Refusal> {
        self.state()
            .machine
            .claim(&body.request_id, &body.connection_id)
    }

    /// Accepts the claimer's result and hands it to the waiting run.
    pub(crate) fn answer(&self, body: ResultBody) -> Result<(), Refusal> {
        let mut state = self.state();
        state
            .machine
            .finish(&body.request_id, &body.connection_id)?;
        let Some(pending) = state.pending.take() else {
            return Ok(());
        };
        let result = shape_result(&pending.request.kind, body.outcome);
        let refusal = match &result {
            Err(UiError::InvalidResult(_)) => Err(Refusal::InvalidResult),
            _ => Ok(()),
        };
        drop(pending.reply.send(result));
        refusal
    }

    /// Ends every stream (each gets `end`), fails the outstanding request with
    /// `browser_closed` and refuses everything after.
    pub(crate) fn close(&self) {
        let mut state = self.state();
        if let Some(id) = state.machine.close() {
            state.settle(&id, Err(UiError::Closed));
        }
        for (_, queue) in state.streams.drain() {
            // A full queue belongs to a tab that stopped reading; dropping the
            // sender ends its stream all the same.
            drop(queue.try_send(BrowserEvent::End));
        }
    }

    fn give_up(&self, id: &BrowserRequestId) {
        let mut state = self.state();
        if state.machine.abandon(id) {
            state.pending = None;
        }
    }

    fn disconnect(&self, connection: &ConnectionId) {
        self.state().disconnect(connection);
    }
}

impl Drop for SessionHost {
    fn drop(&mut self) {
        if let Some(bridge) = self.bridge.upgrade() {
            bridge.forget(&self.session, self);
        }
    }
}

/// What a tab's result becomes for the run: the value (a `discover` list checked
/// against its bounds), or the command's failure.
fn shape_result(kind: &RequestKind, outcome: BrowserOutcome) -> Result<Value, UiError> {
    match (kind, outcome) {
        (RequestKind::Discover, BrowserOutcome::Ok(value)) => check_discovered(value),
        (RequestKind::Execute { .. }, BrowserOutcome::Ok(value)) => Ok(value),
        (kind, BrowserOutcome::Error { message }) => Err(UiError::CommandFailed {
            command: match kind {
                RequestKind::Discover => "discover".to_owned(),
                RequestKind::Execute { command, .. } => command.clone(),
            },
            message: bounded_message(&message),
        }),
    }
}

fn check_discovered(value: Value) -> Result<Value, UiError> {
    let invalid = UiError::InvalidResult;
    let discovered: Discovered = serde_json::from_value(value).map_err(|error| {
        invalid(format!(
            "discover must answer {{\"commands\": [...]}}: {error}"
        ))
    })?;
    if discovered.commands.len() > MAX_COMMANDS {
        return Err(invalid(format!(
            "{} commands, more than {MAX_COMMANDS}",
            discovered.commands.len()
        )));
    }
    for command in &discovered.commands {
        if !valid_command_name(&command.name) {
            return Err(invalid(format!(
                "a command name is {} bytes; names are 1 to 128 bytes",
                command.name.len()
            )));
        }
        if command.description.len() > MAX_DESCRIPTION_BYTES {
            return Err(invalid(format!(
                "the description of `{}` is longer than {MAX_DESCRIPTION_BYTES} bytes",
                command.name
            )));
        }
    }
    serde_json::to_value(discovered).map_err(|error| invalid(error.to_string()))
}

/// Gives the request up when the waiting run goes away first.
struct GiveUpOnDrop {
    host: Arc<SessionHost>,
    id: BrowserRequestId,
}

impl Drop for GiveUpOnDrop {
    fn drop(&mut self) {
        self.host.give_up(&self.id);
    }
}

/// Disconnects its tab when the events stream is dropped (the tab went away).
struct ConnectionGuard {
    host: Arc<SessionHost>,
    connection: ConnectionId,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.host.disconnect(&self.connection);
    }
}

/// One tab's events: `hello`, requests, and `end` when the bridge closes.
///
/// It holds the Session's host open; dropping it (the HTTP response body went
/// away with the tab) disconnects the tab.
pub struct BrowserStream {
    hello: Option<BrowserEvent>,
    events: mpsc::Receiver<BrowserEvent>,
    guard: ConnectionGuard,
}

impl std::fmt::Debug for BrowserStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserStream")
            .field("connection", &self.guard.connection)
            .finish_non_exhaustive()
    }
}

impl BrowserStream {
    /// This tab's connection id (also the data of its `hello` event).
    pub fn connection_id(&self) -> &ConnectionId {
        &self.guard.connection
    }
}

impl Stream for BrowserStream {
    type Item = BrowserEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(hello) = this.hello.take() {
            return Poll::Ready(Some(hello));
        }
        this.events.poll_recv(cx)
    }
}
