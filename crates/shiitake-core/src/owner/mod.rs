//! The owner: one task per live Session that serialises every change.
//!
//! A change is applied to a copy of the Session's state, committed through the
//! store, and only then adopted, answered and published. Nothing is published
//! that was not committed. The owner also starts runs, answers its runner at
//! model-call boundaries, and settles runs with their terminals.

mod adopt;
mod change;
mod commands;
mod contributions;
mod extensions;
mod follower;
mod lines;
mod observe;
mod observed;
mod open;
pub(crate) mod registry;
pub(crate) mod remote;
mod request;
mod runs;
mod waiting;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use shiitake_protocol::{
    CommandId, ExtensionId, PromptDelivery, PromptText, QueueState, SessionActivity,
    SessionCommand, SessionInboxState, SessionProgress, ShiitakeError, TerminalOutcome,
};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::open::OpenChange;
use self::request::send;
pub(crate) use self::request::{Published, Reply, Request, RunEvent};
use self::waiting::{WaitingLine, WaitingLines};
use crate::agent_core::AgentCore;
use crate::clock::now_ms;
use crate::inbox::{InboxFacts, WorkPhase, inbox_state};
use crate::store::ownership::{Claim, ForwardId};
use crate::store::{
    CommandState, FencingToken, LoadedSession, Op, RowScope, SessionHeader, StoreError,
    StoredCommand,
};

/// Frames a slow subscriber may fall behind by before it is sent a reset.
const PUBLISH_BUFFER: usize = 1024;

/// A prompt waiting to enter the conversation.
#[derive(Clone, Debug)]
struct QueuedPrompt {
    command_id: CommandId,
    text: PromptText,
    delivery: PromptDelivery,
    /// The extension that admitted it and the Agent that sent it, if any.
    provenance: crate::extension::Provenance,
}

/// The run in progress.
struct ActiveRun {
    command_id: CommandId,
    /// Steers that joined this run; they settle with it.
    absorbed: Vec<CommandId>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

/// One live Session.
pub(crate) struct Owner {
    core: Arc<AgentCore>,
    header: SessionHeader,
    queue: VecDeque<QueuedPrompt>,
    waiting_lines: WaitingLines,
    run: Option<ActiveRun>,
    /// The transcript the last run ended with (empty for a Session with no lineage),
    /// handed to the next run so a turn does not read the whole lineage again;
    /// dropped with the owner when it idles.
    kept_transcript: Option<crate::runner::Transcript>,
    activity: SessionActivity,
    progress: Option<SessionProgress>,
    /// Raised while a steer waits, so the runner skips tool calls not yet started
    /// and tools that wait for a person can return early.
    steer_waiting: tokio::sync::watch::Sender<bool>,
    /// The outcome of the latest settled work, for the inbox state.
    last_outcome: Option<TerminalOutcome>,
    /// Work found running on load, resumed by [`Owner::resume`].
    interrupted: Vec<StoredCommand>,
    /// Steers found running on load: (the run that absorbed them, the steer).
    pending_absorbed: Vec<(CommandId, CommandId)>,
    /// Session-scope rows of every extension, as committed.
    extension_rows: HashMap<ExtensionId, extensions::Rows>,
    /// Bumped when an extension's Session rows change, for tool handlers that wait
    /// on their state ([`crate::extension::host::StateChanges`]); created on demand.
    extension_changes: HashMap<ExtensionId, tokio::sync::watch::Sender<u64>>,
    /// Attention raised on this Session: (extension, kind) → (inbox, text).
    attention: BTreeMap<(ExtensionId, String), (bool, String)>,
    /// Who admitted each open command, when an extension did.
    origins: HashMap<CommandId, crate::extension::Provenance>,
    /// Every command not yet settled, as committed: the header's `open_from` is its first.
    open: BTreeSet<CommandId>,
    /// Created with the first subscriber, so an owner nobody watches costs no buffer.
    publisher: Option<broadcast::Sender<Published>>,
    mailbox: mpsc::Sender<Request>,
    /// The lease this owner holds on a shared store; every commit carries its token.
    lease: Option<FencingToken>,
    /// A commit was refused because the lease moved on: this owner must stop
    /// without answering or committing anything more.
    fenced: bool,
    /// The last forwarded request served.
    forwarded_after: ForwardId,
}

impl Owner {
    fn new(
        core: Arc<AgentCore>,
        loaded: LoadedSession,
        mailbox: mpsc::Sender<Request>,
        lease: Option<FencingToken>,
    ) -> Self {
        let last_outcome = match loaded.header.inbox_state {
            SessionInboxState::Errored => Some(TerminalOutcome::Failed),
            _ => None,
        };
        // A Session with no lineage yet has nothing to read back: its first run starts
        // from what the owner commits.
        let kept_transcript = loaded
            .header
            .leaf
            .is_none()
            .then(crate::runner::Transcript::default);
        let mut owner = Self {
            core,
            header: loaded.header,
            queue: VecDeque::new(),
            waiting_lines: WaitingLines::new(),
            run: None,
            kept_transcript,
            activity: SessionActivity::default(),
            progress: None,
            steer_waiting: tokio::sync::watch::Sender::new(false),
            last_outcome,
            interrupted: Vec::new(),
            pending_absorbed: Vec::new(),
            extension_rows: HashMap::new(),
            extension_changes: HashMap::new(),
            attention: BTreeMap::new(),
            origins: HashMap::new(),
            open: BTreeSet::new(),
            publisher: None,
            mailbox,
            lease,
            fenced: false,
            forwarded_after: ForwardId(0),
        };
        for command in loaded.open_commands {
            // Even a command that does not decode stays open: the watermark must not pass it.
            owner.open.insert(command.id.clone());
            owner.restore(command);
        }
        owner
    }

    /// Puts a command loaded from the store back where it was.
    fn restore(&mut self, command: StoredCommand) {
        let provenance = crate::extension::Provenance::from_stored(command.origin.as_ref());
        if !provenance.is_empty() {
            self.origins.insert(command.id.clone(), provenance.clone());
        }
        let Ok(parsed) = serde_json::from_str::<SessionCommand>(&command.payload) else {
            tracing::warn!(command = %command.id, "an open command does not decode; it is left alone");
            return;
        };
        match (command.state, parsed) {
            (CommandState::Pending, SessionCommand::Prompt { text, delivery, .. }) => {
                self.queue.push_back(QueuedPrompt {
                    command_id: command.id,
                    text,
                    delivery,
                    provenance,
                });
            }
            (CommandState::Pending, SessionCommand::Operator { author, text, .. }) => {
                let message = match &provenance.origin {
                    // A line an extension added: stored as an operator command with its origin.
                    Some(origin) => lines::extension_line(&origin.extension_id, &text),
                    None => lines::operator_message(author, &text),
                };
                self.waiting_lines.push(WaitingLine {
                    command_id: command.id,
                    message,
                });
            }
            (CommandState::Running, _) => self.note_interrupted_command(command),
            _ => {}
        }
    }

    /// Loads this Session's extension rows and attention.
    async fn load_extension_state(&mut self) -> Result<(), crate::store::StoreError> {
        let scope = RowScope::Session(self.header.id.clone());
        for stored in self.core.store.extension_rows(None, Some(&scope)).await? {
            let row = stored.row;
            self.extension_rows
                .entry(stored.extension_id)
                .or_default()
                .insert((row.collection, row.key), row.value);
        }
        for attention in self.core.store.attention(&self.header.id).await? {
            self.attention.insert(
                (attention.extension_id, attention.kind),
                (attention.inbox, attention.text),
            );
        }
        Ok(())
    }

    /// The snapshot-and-frame view of what the Session is doing.
    fn refresh_activity(&mut self) {
        self.activity.queue = match (&self.run, self.queue.front()) {
            (Some(run), _) => QueueState::Running {
                command_id: run.command_id.clone(),
            },
            (None, Some(next)) => QueueState::Queued {
                command_id: next.command_id.clone(),
            },
            (None, None) => QueueState::Idle,
        };
        if self.run.is_none() {
            self.activity.cancellation_requested = false;
            self.activity.retry = None;
            self.activity.active_tool = None;
        }
    }

    /// The inbox state, given whether attention waits on a person and whether work is about to queue.
    fn inbox_state_given(&self, waits_on_person: bool, queuing: bool) -> SessionInboxState {
        let phase = match (&self.run, self.queue.is_empty() && !queuing) {
            (Some(_), _) if self.activity.cancellation_requested => WorkPhase::Cancelling,
            (Some(_), _) if self.activity.retry.is_some() => WorkPhase::Retrying,
            (Some(_), _) if self.progress.is_some() => WorkPhase::Streaming,
            (Some(_), _) => WorkPhase::Thinking,
            (None, false) => WorkPhase::Queued,
            (None, true) => WorkPhase::Idle,
        };
        inbox_state(InboxFacts {
            waits_on_person,
            phase,
            last_outcome: self.last_outcome,
        })
    }

    /// A copy of the header with its activity stamped; rows then take sequences with [`take`].
    fn next_header(&self) -> SessionHeader {
        let mut header = self.header.clone();
        header.last_activity_at = now_ms();
        header
    }

    /// Commits `ops` plus `header`, then adopts `header`.
    async fn commit(&mut self, ops: Vec<Op>, header: SessionHeader) -> Result<(), ShiitakeError> {
        Ok(self.commit_raw(ops, header).await?)
    }

    /// [`commit`](Self::commit), keeping the store's error for callers that inspect it.
    async fn commit_raw(
        &mut self,
        mut ops: Vec<Op>,
        mut header: SessionHeader,
    ) -> Result<(), StoreError> {
        let change = OpenChange::of(&ops);
        header.open_from = change.first_open(&self.open);
        ops.push(Op::PutHeader(header.clone()));
        self.commit_ops(ops).await?;
        self.header = header;
        change.apply(&mut self.open);
        Ok(())
    }

    /// Commits `ops` as they are, under this owner's lease when it holds one: a
    /// commit the lease no longer covers fails whole and marks the owner fenced.
    async fn commit_ops(&mut self, mut ops: Vec<Op>) -> Result<(), StoreError> {
        if let Some(token) = self.lease {
            ops.insert(
                0,
                Op::Fence {
                    session_id: self.header.id.clone(),
                    token,
                },
            );
        }
        let result = self.core.store.commit(ops).await;
        if let Err(StoreError::Fenced(reason)) = &result {
            tracing::warn!(session = %self.header.id, %reason, "fencing token rejected: another process owns this Session now; this owner stops");
            self.fenced = true;
        }
        result
    }

    /// Gives the lease back, so another process may take the Session at once (a
    /// lease that moved on to another tenure is left alone by the store).
    async fn release_lease(&mut self) {
        let (Some(token), Some(ownership)) = (self.lease.take(), self.core.ownership.clone())
        else {
            return;
        };
        if let Err(error) = ownership.release(&self.header.id, token).await {
            tracing::warn!(%error, session = %self.header.id, "could not give a lease back; it lapses");
        }
    }

    fn idle(&self) -> bool {
        self.run.is_none()
            && self.queue.is_empty()
            && self.waiting_lines.is_empty()
            && !self.watched()
    }

    async fn handle(&mut self, request: Request) -> Flow {
        match request {
            Request::Command(command, sender, reply) => {
                let result = self.command(command, sender).await;
                self.answer(reply, result);
            }
            Request::Replay(options, reply) => {
                let result = self.subscribe(&options).await.map(|(frames, _)| frames);
                self.answer(reply, result);
            }
            // `run_owner` serves forwarded requests itself (they come back through here).
            Request::Drain => {}
            // A later tenure of this process is not the one that was lost.
            Request::LeaseLost(token) if self.lease != Some(token) => {}
            Request::LeaseLost(_) => {
                tracing::warn!(session = %self.header.id, "lease taken over by another process; this owner stops");
                self.fenced = true;
                self.stop_run_without_terminal();
                return Flow::Exit;
            }
            Request::Read(options, reply) => {
                self.observed();
                self.answer(reply, self.snapshot(&options).await);
            }
            Request::Watch(options, reply) => {
                self.observed();
                let result = self
                    .snapshot(&options)
                    .await
                    .map(|snapshot| (snapshot, self.receiver()));
                self.answer(reply, result);
            }
            Request::Subscribe(options, reply) => {
                self.observed();
                let result = self.subscribe(&options).await;
                self.answer(reply, result);
            }
            Request::Preference(reply) => {
                self.answer(reply, Ok(self.header.model_preference.clone()))
            }
            Request::Republish(reply) => self.answer(reply, Ok(self.republish())),
            Request::SetPreference(preference, reply) => {
                let result = match self.core.config.models.permits(&preference) {
                    Err(reason) => Err(ShiitakeError::not_granted(reason)),
                    Ok(()) => {
                        let mut header = self.header.clone();
                        header.model_preference = Some(preference);
                        self.commit(Vec::new(), header).await
                    }
                };
                self.answer(reply, result);
            }
            Request::ExtensionCall(id, command, input, reply) => {
                let result = self.extension_call(&id, &command, input).await;
                self.answer(reply, result);
            }
            Request::ExtensionTx {
                extension_id,
                transaction,
                reply,
            } => {
                let result = self.extension_tx(&extension_id, transaction).await;
                self.answer(reply, result);
            }
            Request::FireTimer(timer, reply) => {
                let result = self.fire_timer(timer).await;
                self.answer(reply, result);
            }
            Request::Admit {
                request_id,
                text,
                delivery,
                origin,
                reply,
            } => {
                let result = self.admit(request_id, text, delivery, origin).await;
                self.answer(reply, result);
            }
            Request::Stop(done) => {
                self.stop_run_without_terminal();
                self.release_lease().await;
                if done.send(()).is_err() {
                    tracing::trace!("stop requester left");
                }
                return Flow::Exit;
            }
            Request::Run(event) => self.run_event(event).await,
        }
        if self.fenced {
            self.stop_run_without_terminal();
            return Flow::Exit;
        }
        Flow::Continue
    }

    /// Answers a caller, unless a commit was fenced: then the reply is dropped, so
    /// the caller asks again and reaches the Session's new owner.
    fn answer<T>(&self, reply: Reply<T>, result: Result<T, ShiitakeError>) {
        if !self.fenced {
            send(reply, result);
        }
    }

    /// Whether anyone receives published frames.
    fn watched(&self) -> bool {
        self.publisher
            .as_ref()
            .is_some_and(|publisher| publisher.receiver_count() > 0)
    }

    /// A receiver of every frame published from now on.
    fn receiver(&mut self) -> broadcast::Receiver<Published> {
        match &self.publisher {
            Some(publisher) => publisher.subscribe(),
            None => {
                let (publisher, receiver) = broadcast::channel(PUBLISH_BUFFER);
                self.publisher = Some(publisher);
                receiver
            }
        }
    }

    /// Publishes committed changes to every subscriber.
    fn publish(&self, published: Published) {
        if let Some(publisher) = &self.publisher
            && publisher.send(published).is_err()
        {
            tracing::trace!(session = %self.header.id, "published with no subscriber");
        }
    }
}

enum Flow {
    Continue,
    Exit,
}

/// Takes the next sequence of the Session for one committed change.
fn take(header: &mut SessionHeader) -> u64 {
    header.head_sequence += 1;
    header.head_sequence
}

/// Runs one owner until it is stopped, its Session disappears, or it idles out.
pub(crate) async fn run_owner(
    core: Arc<AgentCore>,
    session_id: shiitake_protocol::SessionId,
    generation: u64,
    mailbox: mpsc::Sender<Request>,
    mut requests: mpsc::Receiver<Request>,
) {
    // On a shared store the owner needs the lease first; while another process
    // holds it, this process stands in and forwards.
    let (lease, pending) = match core.ownership.clone() {
        None => (None, None),
        Some(ownership) => {
            let claimed = match ownership.claim(&session_id).await {
                Ok(Claim::Held(token)) => Ok((token, None)),
                Ok(Claim::Missing) => {
                    Err(ShiitakeError::not_found(format!("no Session {session_id}")))
                }
                Ok(Claim::Elsewhere) => {
                    match remote::stand_in(
                        &core,
                        &ownership,
                        &session_id,
                        generation,
                        &mut requests,
                    )
                    .await
                    {
                        remote::StandIn::Owner { token, pending } => {
                            Ok((token, pending.map(|request| *request)))
                        }
                        remote::StandIn::Gone => {
                            core.owners.retire(&session_id, generation);
                            return;
                        }
                    }
                }
                Err(error) => Err(ShiitakeError::from(error)),
            };
            match claimed {
                Ok((token, pending)) => (Some(token), pending),
                Err(error) => {
                    refuse_all(&core, &session_id, generation, &mut requests, |_| {
                        error.clone()
                    });
                    return;
                }
            }
        }
    };
    let loaded = match core.store.load_session(&session_id).await {
        Ok(Some(loaded)) => loaded,
        Ok(None) => {
            refuse_all(&core, &session_id, generation, &mut requests, |id| {
                ShiitakeError::not_found(format!("no Session {id}"))
            });
            if let Some(pending) = pending {
                let error = ShiitakeError::not_found(format!("no Session {session_id}"));
                pending.fail(error);
            }
            return;
        }
        Err(error) => {
            let error = ShiitakeError::from(error);
            refuse_all(&core, &session_id, generation, &mut requests, |_| {
                error.clone()
            });
            if let Some(pending) = pending {
                pending.fail(error);
            }
            return;
        }
    };
    let mut owner = Owner::new(core.clone(), loaded, mailbox, lease);
    if let Err(error) = owner.load_extension_state().await {
        tracing::error!(%error, session = %session_id, "could not load extension state");
    }
    owner.resume().await;
    // Requests other processes forwarded while the Session had no owner.
    owner.serve_forwarded().await;
    let mut exit = owner.fenced;
    if let Some(pending) = pending
        && !exit
    {
        exit = matches!(owner.handle(pending).await, Flow::Exit);
    }
    let idle_for = core.config.owner_idle;
    while !exit {
        // The quiet period restarts with every request; when it passes, an owner
        // with no work and no subscriber leaves, any other checks again later.
        let request = tokio::select! {
            request = requests.recv() => request,
            () = tokio::time::sleep(idle_for) => {
                if owner.idle() && core.owners.retire(&session_id, generation) {
                    // No new request can reach this mailbox; drop what is queued so
                    // its senders retry against a fresh owner.
                    requests.close();
                    while requests.try_recv().is_ok() {}
                    owner.release_lease().await;
                    return;
                }
                continue;
            }
        };
        let Some(request) = request else { break };
        if let Request::Drain = request {
            owner.serve_forwarded().await;
            exit = owner.fenced;
            continue;
        }
        exit = matches!(owner.handle(request).await, Flow::Exit);
    }
    core.owners.retire(&session_id, generation);
    owner.release_lease().await;
}

/// Answers every queued request with `error`, then retires the owner.
fn refuse_all(
    core: &AgentCore,
    session_id: &shiitake_protocol::SessionId,
    generation: u64,
    requests: &mut mpsc::Receiver<Request>,
    error: impl Fn(&shiitake_protocol::SessionId) -> ShiitakeError,
) {
    core.owners.retire(session_id, generation);
    requests.close();
    while let Ok(request) = requests.try_recv() {
        request.fail(error(session_id));
    }
}
