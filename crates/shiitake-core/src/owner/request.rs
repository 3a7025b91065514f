//! What an owner can be asked, through its one mailbox: callers' requests, its
//! runner's events and tool handlers' transactions, each answered on its own channel.

use std::sync::Arc;

use shiitake_protocol::{
    ExtensionId, ModelPreference, ProgressFrame, PromptDelivery, PromptText, ReadOptions,
    SessionCommand, SessionFrame, SessionSnapshot, ShiitakeError, SubscribeOptions, UpdateFrame,
};
use tokio::sync::{broadcast, mpsc, oneshot};

pub(crate) use crate::runner::RunEvent;
use crate::store::FencingToken;

/// The answer channel of one request.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, ShiitakeError>>;

/// What an owner can be asked.
///
/// Kept small: a mailbox is allocated in blocks of 32 requests of the largest
/// variant's size, so large and rare payloads (a timer row, a run's message) are boxed.
pub(crate) enum Request {
    /// Execute one command; a prompt may carry the Agent that sent it (host only).
    Command(
        SessionCommand,
        Option<crate::extension::Sender>,
        Reply<shiitake_protocol::CommandOutcome>,
    ),
    /// A bounded snapshot.
    Read(ReadOptions, Reply<SessionSnapshot>),
    /// A snapshot and a live receiver taken at the same point.
    Watch(
        ReadOptions,
        Reply<(SessionSnapshot, broadcast::Receiver<Published>)>,
    ),
    /// Replay frames after a cursor and a live receiver taken at the same point.
    Subscribe(
        SubscribeOptions,
        Reply<(Vec<SessionFrame>, broadcast::Receiver<Published>)>,
    ),
    /// The model preference.
    Preference(Reply<Option<ModelPreference>>),
    /// Persist a model preference.
    SetPreference(ModelPreference, Reply<()>),
    /// Call a Session-scope extension command.
    ExtensionCall(
        ExtensionId,
        String,
        serde_json::Value,
        Reply<serde_json::Value>,
    ),
    /// Run a transaction for an extension's tool handler.
    ExtensionTx {
        extension_id: ExtensionId,
        transaction: crate::extension::host::ToolTransaction,
        reply: Reply<serde_json::Value>,
    },
    /// Admit a prompt an extension sent from outside this Session (`Tx::admit_into`),
    /// through the door like any prompt, tagged with its origin.
    Admit {
        request_id: shiitake_protocol::RequestId,
        text: PromptText,
        delivery: PromptDelivery,
        origin: crate::extension::Origin,
        reply: Reply<shiitake_protocol::Accepted>,
    },
    /// Publish the extension slots again without a change; answers whether anyone watched.
    Republish(Reply<bool>),
    /// Fire a due timer of this Session in the transaction that claims it.
    FireTimer(Box<crate::store::TimerRow>, Reply<()>),
    /// Stop now (the Session is being deleted, or the Agent closes): runs are
    /// stopped without a terminal, so recovery resumes them on the next open.
    Stop(oneshot::Sender<()>),
    /// A message from one of this owner's runs: events of a run that is no longer the
    /// one in progress (stopped when the owner paused) are dropped.
    Run(RunTag, RunEvent),
    /// The frames committed after a cursor, without a live receiver (a follower in
    /// this or another process catching up).
    Replay(SubscribeOptions, Reply<Vec<SessionFrame>>),
    /// Requests were forwarded to this Session from another process (shared stores
    /// only); a stand-in takes it as the moment to try for the lease.
    Drain,
    /// Another process took this Session's lease (taken with this token) over:
    /// stop without committing.
    LeaseLost(FencingToken),
}

impl Request {
    /// Answers the caller with `error` (a request nobody waits on is dropped; a stop
    /// is acknowledged): for requests this owner cannot or may no longer serve.
    pub(crate) fn fail(self, error: ShiitakeError) {
        match self {
            Request::Command(_, _, reply) => send(reply, Err(error)),
            Request::Read(_, reply) => send(reply, Err(error)),
            Request::Watch(_, reply) => send(reply, Err(error)),
            Request::Subscribe(_, reply) => send(reply, Err(error)),
            Request::Replay(_, reply) => send(reply, Err(error)),
            Request::Preference(reply) => send(reply, Err(error)),
            Request::SetPreference(_, reply) => send(reply, Err(error)),
            Request::ExtensionCall(_, _, _, reply) => send(reply, Err(error)),
            Request::ExtensionTx { reply, .. } => send(reply, Err(error)),
            Request::FireTimer(_, reply) => send(reply, Err(error)),
            Request::Admit { reply, .. } => send(reply, Err(error)),
            Request::Republish(reply) => send(reply, Err(error)),
            Request::Stop(done) => {
                if done.send(()).is_err() {
                    tracing::trace!("stop requester left");
                }
            }
            Request::Run(..) | Request::Drain | Request::LeaseLost(_) => {}
        }
    }
}

/// A tool handler's transaction reaches the owner through the same mailbox.
#[async_trait::async_trait]
impl crate::extension::host::TxMailbox for mpsc::Sender<Request> {
    async fn send_transaction(
        &self,
        extension_id: ExtensionId,
        transaction: crate::extension::host::ToolTransaction,
        reply: Reply<serde_json::Value>,
    ) -> bool {
        let request = Request::ExtensionTx {
            extension_id,
            transaction,
            reply,
        };
        self.send(request).await.is_ok()
    }
}

/// Which run of an owner an event comes from: the owner numbers its runs, so the
/// events of a run it stopped (when it paused for its store) cannot be taken for those
/// of the run that resumed the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunTag(pub(crate) u64);

/// A run's way to its owner: the owner's own mailbox, so its events and every other
/// request are served in one order, each event tagged with the run.
pub(crate) struct RunMailbox {
    pub(crate) mailbox: mpsc::Sender<Request>,
    pub(crate) tag: RunTag,
}

#[async_trait::async_trait]
impl crate::runner::OwnerMailbox for RunMailbox {
    async fn send_event(&self, event: RunEvent) -> bool {
        self.mailbox
            .send(Request::Run(self.tag, event))
            .await
            .is_ok()
    }
}

/// What subscribers receive from the owner after each commit.
#[derive(Clone, Debug)]
pub(crate) enum Published {
    /// Committed changes.
    Update(Arc<UpdateFrame>),
    /// Streaming progress.
    Progress(Arc<ProgressFrame>),
    /// The lineage changed (a branch): start again from this baseline.
    Reset(Arc<SessionSnapshot>),
    /// The last word of an owner that leaves because another process took the Session
    /// over: the Session goes on there, so a subscriber follows it from its cursor
    /// (`session/live.rs`) instead of ending when the channel closes.
    Moved,
}

/// Answers one caller; a caller that stopped waiting is no failure.
pub(crate) fn send<T>(reply: Reply<T>, result: Result<T, ShiitakeError>) {
    // The caller may have stopped waiting; what was committed stands.
    if reply.send(result).is_err() {
        tracing::trace!("a caller left before its answer");
    }
}
