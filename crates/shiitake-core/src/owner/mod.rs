//! The owner: one actor per live Session that serialises every change.
//!
//! A change is applied to a copy of the Session's state, committed through the
//! store, and only then adopted, answered and published. Nothing is published
//! that was not committed. The owner also starts runs, answers its runner at
//! model-call boundaries, and settles runs with their terminals.
//!
//! The actor's state is split by who may touch it, each part a small type that
//! keeps its own rules:
//!
//! | part | holds | its rule |
//! | --- | --- | --- |
//! | [`Record`](record::Record) | the committed header and open commands | `open_from` is the lowest open id; changed only around a commit |
//! | [`Tenure`](tenure::Tenure) | the store commit and the lease | every commit carries the fencing token; once fenced, nothing more commits |
//! | [`PromptQueue`](queue::PromptQueue) | prompts waiting to run | the steer signal is up while a run can take a waiting steer |
//! | [`WaitingLines`](waiting::WaitingLines) | operator lines waiting for a boundary | its signal is up exactly while lines wait |
//! | [`Work`](work::Work) | the run in progress, the kept transcript, interrupted work, origins, the last outcome | one run at a time |
//! | [`ExtensionState`](extension_state::ExtensionState) | extensions' Session rows, attention, change signals | holds only what was committed |
//! | [`Publication`](publication::Publication) | the frame channel, activity and progress | process-local, never stored |
//!
//! The files that `impl Owner` compose those parts into behaviour: the command
//! door (`commands.rs`), runs (`runs.rs`), extension hooks (`hooks.rs`, with
//! `staging.rs`), observation (`observe.rs`, `contributions.rs`, `observed.rs`).
//! The owner knows nothing of other processes: its task (`crate::owner_task`)
//! claims the lease and serves forwarded requests through [`Owner::handle`].

mod change;
mod commands;
pub(crate) mod contributions;
mod extension_state;
mod gates;
mod hooks;
mod lines;
mod observe;
mod observed;
mod open;
mod publication;
mod queue;
mod record;
pub(crate) mod registry;
mod reload;
mod request;
mod runs;
mod staging;
mod tenure;
mod waiting;
mod work;

use std::sync::Arc;

use shiitake_capabilities::Catalog;
use shiitake_protocol::{Cursor, SessionCommand, SessionId, SessionInboxState, ShiitakeError};
use tokio::sync::mpsc;

pub(crate) use self::publication::PUBLISH_BUFFER;
use self::publication::Publication;
use self::queue::{PromptQueue, QueuedPrompt};
use self::record::Record;
pub(crate) use self::reload::Reloaded;
pub(crate) use self::request::{Published, Reply, Request, RunEvent, send};
pub(crate) use self::tenure::Tenure;
use self::waiting::{WaitingLine, WaitingLines};
use self::work::Work;
use crate::config::AgentConfig;
use crate::extension::host::Host;
use crate::inbox::{InboxFacts, inbox_state};
use crate::store::ownership::Release;
use crate::store::{
    CommandState, LoadedSession, Op, SessionHeader, Store, StoreError, StoredCommand,
};

/// What an owner uses of its Agent: the store it reads (it commits through its
/// [`Tenure`]), the tools and settings its runs get, and the extension host.
#[derive(Clone)]
pub(crate) struct OwnerDeps {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) tools: Arc<Catalog>,
    pub(crate) config: Arc<AgentConfig>,
    pub(crate) host: Arc<Host>,
}

/// One live Session.
pub(crate) struct Owner {
    deps: OwnerDeps,
    /// This owner's own mailbox, handed to its runs and tool handlers.
    mailbox: mpsc::Sender<Request>,
    record: Record,
    tenure: Tenure,
    queue: PromptQueue,
    waiting_lines: WaitingLines,
    work: Work,
    extensions: extension_state::ExtensionState,
    publication: Publication,
    /// The number of the last run started, so events of a stopped run are told apart.
    next_run: u64,
    /// Runs a cancel had been asked of when the owner paused: they end cancelled when
    /// the work goes on.
    cancelled_before_pause: Vec<shiitake_protocol::CommandId>,
    /// The run in progress when the owner paused, and the tool calls it had started.
    started_before_pause: Option<(shiitake_protocol::CommandId, Vec<String>)>,
}

/// Whether the owner goes on after a request.
pub(crate) enum Flow {
    Continue,
    Exit,
    /// A commit failed for a reason that passes: the owner waits for its store, then
    /// reads its Session back ([`Owner::reload`]) and goes on.
    Pause,
}

/// Why interrupted work is being resumed, which decides whether it counts as a recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resumption {
    /// The Session was loaded by a fresh owner: after a restart, a takeover or a handover.
    Opened,
    /// This owner paused because its store failed a commit, and read its Session back.
    StoreReturned,
}

/// How a run goes on from work committed before.
pub(super) struct Recovering {
    /// The steers that work had absorbed; they settle with it.
    pub(super) absorbed: Vec<shiitake_protocol::CommandId>,
    /// A cancel was asked of it before the owner paused.
    pub(super) cancelled: bool,
    /// After a pause for the store: the tool calls the stopped run had started (the
    /// others never ran); `None` after a restart or a takeover, when nobody knows.
    pub(super) started: Option<Vec<String>>,
}

impl Owner {
    /// The owner of a loaded Session: its open commands back where they were, its
    /// extension state read. Interrupted work waits for [`resume`](Self::resume).
    pub(crate) async fn load(
        deps: OwnerDeps,
        tenure: Tenure,
        loaded: LoadedSession,
        mailbox: mpsc::Sender<Request>,
    ) -> Result<Self, StoreError> {
        let extensions =
            extension_state::ExtensionState::load(&*deps.store, &loaded.header.id).await?;
        let mut owner = Self {
            work: Work::new(&loaded.header),
            record: Record::new(loaded.header.clone(), []),
            deps,
            mailbox,
            tenure,
            queue: PromptQueue::new(),
            waiting_lines: WaitingLines::new(),
            extensions,
            publication: Publication::new(),
            next_run: 0,
            cancelled_before_pause: Vec::new(),
            started_before_pause: None,
        };
        owner.take_loaded(loaded);
        Ok(owner)
    }

    /// Sets the committed record, the queue, the waiting lines and the interrupted
    /// work from what the store holds (the run, its transcript and the activity are
    /// the caller's to have stopped or kept).
    fn take_loaded(&mut self, loaded: LoadedSession) {
        let open = loaded
            .open_commands
            .iter()
            .map(|command| command.id.clone());
        self.record = Record::new(loaded.header.clone(), open);
        self.work = Work::new(&loaded.header);
        self.queue = PromptQueue::new();
        self.waiting_lines = WaitingLines::new();
        for command in loaded.open_commands {
            self.restore(command);
        }
    }

    /// Puts a command loaded from the store back where it was.
    fn restore(&mut self, command: StoredCommand) {
        let provenance = crate::extension::Provenance::from_stored(command.origin.as_ref());
        self.work.note_origin(&command.id, &provenance);
        let Ok(parsed) = serde_json::from_str::<SessionCommand>(&command.payload) else {
            tracing::warn!(command = %command.id, "an open command does not decode; it is left alone");
            return;
        };
        match (command.state, parsed) {
            (CommandState::Pending, SessionCommand::Prompt { text, delivery, .. }) => {
                let prompt = QueuedPrompt {
                    command_id: command.id,
                    text,
                    delivery,
                    provenance,
                };
                self.queue.push(prompt, false);
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
            (CommandState::Running, _) => self.work.note_interrupted(command),
            _ => {}
        }
    }

    /// The Session this owner serves.
    pub(crate) fn session_id(&self) -> &SessionId {
        self.record.id()
    }

    /// The cursor of the Session's head; `None` before its first commit.
    pub(crate) fn cursor(&self) -> Option<Cursor> {
        self.record.cursor()
    }

    /// Whether a commit was fenced: the owner must stop without answering.
    pub(crate) fn fenced(&self) -> bool {
        self.tenure.fenced()
    }

    /// Whether the owner goes on, stops (fenced) or waits for its store (a commit failed
    /// for a reason that passes).
    pub(crate) fn flow(&self) -> Flow {
        if self.tenure.fenced() {
            Flow::Exit
        } else if self.tenure.unsure().is_some() {
            Flow::Pause
        } else {
            Flow::Continue
        }
    }

    /// Whether the owner may leave: no work, no line waiting, nobody watching.
    pub(crate) fn idle(&self) -> bool {
        !self.work.running()
            && self.queue.is_empty()
            && self.waiting_lines.is_empty()
            && !self.publication.watched()
    }

    /// Gives the lease back as the owner leaves with nothing to do.
    pub(crate) async fn release(&mut self) {
        // Taken over by another process: its watchers follow the Session there.
        if self.tenure.fenced() {
            self.publication.publish(Published::Moved);
        }
        self.tenure.release(Release::Idle).await;
    }

    /// Refreshes the queue state of the activity from the run and the queue.
    fn refresh_activity(&mut self) {
        let running = self.work.run().map(|run| &run.command_id);
        let next = self.queue.front().map(|queued| &queued.command_id);
        self.publication.refresh(running, next);
    }

    /// The inbox state, given whether attention waits on a person and whether work is about to queue.
    fn inbox_state_given(&self, waits_on_person: bool, queuing: bool) -> SessionInboxState {
        let queued = !self.queue.is_empty() || queuing;
        inbox_state(InboxFacts {
            waits_on_person,
            phase: self.publication.phase(self.work.running(), queued),
            last_outcome: self.work.last_outcome(),
        })
    }

    /// A copy of the header with its activity stamped; rows then take sequences with [`take`](record::take).
    fn next_header(&self) -> SessionHeader {
        self.record.next_header()
    }

    /// Commits `ops` plus `header`, then adopts `header`.
    async fn commit(&mut self, ops: Vec<Op>, header: SessionHeader) -> Result<(), ShiitakeError> {
        Ok(self.commit_raw(ops, header).await?)
    }

    /// [`commit`](Self::commit), keeping the store's error for callers that inspect it.
    async fn commit_raw(
        &mut self,
        mut ops: Vec<Op>,
        header: SessionHeader,
    ) -> Result<(), StoreError> {
        let sealed = self.record.seal(&mut ops, header);
        self.tenure.commit(ops).await?;
        self.record.adopt(sealed);
        Ok(())
    }

    /// Serves one request; [`Flow::Exit`] when the owner must stop.
    pub(crate) async fn handle(&mut self, request: Request) -> Flow {
        match request {
            Request::Command(command, sender, reply) => {
                let result = self.command(command, sender).await;
                self.answer(reply, result);
            }
            Request::Replay(options, reply) => {
                let result = self.subscribe(&options).await.map(|(frames, _)| frames);
                self.answer(reply, result);
            }
            // The owner's task serves forwarded requests itself (they come back through here).
            Request::Drain => {}
            Request::LeaseLost(token) => {
                if self.tenure.lost(token) {
                    tracing::warn!(session = %self.session_id(), "lease taken over by another process; this owner stops");
                    self.work.stop_without_terminal();
                    return Flow::Exit;
                }
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
                    .map(|snapshot| (snapshot, self.publication.receiver()));
                self.answer(reply, result);
            }
            Request::Subscribe(options, reply) => {
                self.observed();
                let result = self.subscribe(&options).await;
                self.answer(reply, result);
            }
            Request::Preference(reply) => {
                let preference = self.record.header().model_preference.clone();
                self.answer(reply, Ok(preference));
            }
            Request::Republish(reply) => self.answer(reply, Ok(self.republish())),
            Request::SetPreference(preference, reply) => {
                let result = match self.deps.config.models.permits(&preference) {
                    Err(reason) => Err(ShiitakeError::not_granted(reason)),
                    Ok(()) => {
                        let mut header = self.record.header().clone();
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
                let result = self.fire_timer(*timer).await;
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
                // Stopped on purpose (the Agent closes, the Session is deleted): the
                // run is not settled, and the next owner resumes it as a handover.
                self.work.stop_without_terminal();
                self.tenure.release(Release::Handover).await;
                if done.send(()).is_err() {
                    tracing::trace!("stop requester left");
                }
                return Flow::Exit;
            }
            // A stopped run's event: its answer channel drops, and it is told to stop.
            Request::Run(tag, _) if !self.work.is_current(tag) => {}
            Request::Run(_, event) => self.run_event(event).await,
        }
        self.publication.release_unwatched();
        if self.tenure.fenced() {
            self.work.stop_without_terminal();
            return Flow::Exit;
        }
        self.flow()
    }

    /// Answers a caller, unless a commit was fenced: then the reply is dropped, so
    /// the caller asks again and reaches the Session's new owner.
    fn answer<T>(&self, reply: Reply<T>, result: Result<T, ShiitakeError>) {
        if !self.tenure.fenced() {
            send(reply, result);
        }
    }
}
