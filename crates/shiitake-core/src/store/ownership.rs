//! Ownership across processes: leases, fencing tokens and requests forwarded to
//! the owner, for stores that several processes share.
//!
//! A store that one process holds (SQLite) has no [`Ownership`]: every Session's
//! owner lives in that process. A shared store (PostgreSQL) gives each live
//! Session a **lease**: a row naming the process that owns it, an expiry the
//! holder keeps renewing, and a **fencing token** that grows every time the lease
//! changes hands. The owner puts its token in every commit ([`Op::Fence`]); a
//! commit whose token is no longer the lease's fails with [`StoreError::Fenced`]
//! and none of it lands, so an owner that lost its lease (paused past the expiry,
//! cut off from the database) can never write over the new owner's work.
//!
//! A process that dies loses its leases at once: the store knows a process is alive
//! while its database connection is (PostgreSQL drops a dead client's connection), so
//! a claim on a Session whose holder died succeeds without waiting for the expiry,
//! and the store announces the Sessions it freed ([`OwnershipEvent::Released`]). The
//! expiry stays as the safety net for a process that is alive but stopped (paused,
//! cut off): only the expiry frees its Sessions, and the fencing token refuses its
//! commits afterwards. A process that leaves on purpose drains
//! ([`Ownership::drain`]): it takes no more Sessions and hands its own over
//! ([`Release::Handover`]), which the next owner does not count as a crash.
//!
//! Other processes reach the owner through the database, never a side channel:
//! a request is a row ([`Ownership::forward`]) plus a notification that wakes
//! the owner, and the answer comes back the same way. Committed changes are
//! announced ([`OwnershipEvent::Committed`]) so subscribers in every process see
//! frames committed in any of them.
//!
//! [`Op::Fence`]: super::Op::Fence

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use shiitake_protocol::SessionId;
use tokio::sync::broadcast;

use super::StoreError;

/// Grows by one each time a Session's lease changes hands; a commit carrying an
/// older token than the lease's is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub u64);

/// A lease this process just took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The token every commit of this tenure carries.
    pub token: FencingToken,
    /// The previous holder handed the Session over as it left ([`Release::Handover`]):
    /// its work was stopped on purpose, so resuming it is not a recovery from a crash.
    pub handed_over: bool,
}

/// What [`Ownership::claim`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This process holds the lease now.
    Held(Lease),
    /// Another live process holds it (or this process is draining and takes nothing);
    /// requests go to that owner through the database.
    Elsewhere {
        /// How long until the lease lapses unless its holder renews it: when to look
        /// again at the latest, as a lapse is not announced (a release or a death is).
        lapses_in: Duration,
    },
    /// The store has no such Session (for this Agent).
    Missing,
}

/// Why a lease is given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The owner left with nothing to do (idle, or the Session was deleted).
    Idle,
    /// The owner stopped its work on purpose (the process drains): the next owner
    /// resumes it without counting a recovery.
    Handover,
}

/// The id of one forwarded request row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ForwardId(pub i64);

/// A request waiting for the owner of its Session.
#[derive(Clone, Debug, PartialEq)]
pub struct ForwardedRequest {
    /// Its row.
    pub id: ForwardId,
    /// The request, as the forwarding process wrote it.
    pub request: Value,
}

/// Sessions whose owner went away, and when to look again.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Orphans {
    /// Sessions with something to do (open work, an unanswered forwarded request, a
    /// due timer) whose lease lapsed, was given back, or whose holder died.
    pub sessions: Vec<SessionId>,
    /// How long until the next lease of such a Session lapses, if another process holds one.
    pub next_lapse: Option<Duration>,
}

/// What other processes did, as the database announced it.
#[derive(Clone, Debug, PartialEq)]
pub enum OwnershipEvent {
    /// A Session's owner committed a change; the Session's head sequence is now `head_sequence`.
    Committed {
        /// The Session.
        session_id: SessionId,
        /// Its head sequence after the commit.
        head_sequence: u64,
    },
    /// A request was forwarded to a Session's owner.
    Forwarded {
        /// The Session.
        session_id: SessionId,
    },
    /// A forwarded request was answered.
    Answered {
        /// The request.
        id: ForwardId,
    },
    /// A lease was given back (its owner left or drained), or its holder died: another
    /// process may take the Session now.
    Released {
        /// The Session.
        session_id: SessionId,
    },
    /// This process lost the lease of a Session it owned (another took it over):
    /// its owner here must stop.
    Lost {
        /// The Session.
        session_id: SessionId,
        /// The tenure that ended; an owner that took the lease again since holds another.
        token: FencingToken,
    },
    /// Announcements may have been missed (the listening connection was lost and
    /// came back): whoever waits on one should look at the database again.
    Resync,
}

/// Leases, fencing and forwarded requests of a store shared by several processes.
#[async_trait]
pub trait Ownership: Send + Sync + 'static {
    /// How long a lease lasts without renewal; the store renews the leases of this
    /// process well within it, for as long as the process runs.
    fn lease_ttl(&self) -> Duration;

    /// Takes the lease of a Session for this process if it is free, lapsed, held by
    /// a process that died, or already ours (a new token each time it changes hands).
    /// A draining process takes nothing.
    async fn claim(&self, session_id: &SessionId) -> Result<Claim, StoreError>;

    /// Gives a lease back so another process may take the Session at once; a
    /// lease that moved on (another token) is left alone.
    async fn release(
        &self,
        session_id: &SessionId,
        token: FencingToken,
        why: Release,
    ) -> Result<(), StoreError>;

    /// From now on this process takes no Session (its claims answer
    /// [`Claim::Elsewhere`]), so the Sessions it gives back as it leaves go to the
    /// processes that stay.
    async fn drain(&self) -> Result<(), StoreError>;

    /// Sessions whose owner went away and that have something to do.
    async fn orphans(&self) -> Result<Orphans, StoreError>;

    /// Writes a request for the owner of `session_id` and wakes it.
    async fn forward(
        &self,
        session_id: &SessionId,
        request: &Value,
    ) -> Result<ForwardId, StoreError>;

    /// Unanswered requests for `session_id` with an id after `after`, oldest first.
    async fn forwarded(
        &self,
        session_id: &SessionId,
        after: ForwardId,
    ) -> Result<Vec<ForwardedRequest>, StoreError>;

    /// Stores the answer to a forwarded request and wakes its sender.
    async fn answer(&self, id: ForwardId, answer: &Value) -> Result<(), StoreError>;

    /// Takes the answer of a forwarded request, removing the row; `None` while unanswered.
    async fn take_answer(&self, id: ForwardId) -> Result<Option<Value>, StoreError>;

    /// Withdraws an unanswered request; `false` when it was answered first (take the answer).
    async fn withdraw(&self, id: ForwardId) -> Result<bool, StoreError>;

    /// Announcements from every process, this one included.
    fn events(&self) -> broadcast::Receiver<OwnershipEvent>;

    /// Serialises the Agent-scope transactions of every process: held from before
    /// a transaction reads the Agent's rows until it committed. Dropping the guard
    /// releases it; a process that dies releases it with its connection.
    async fn lock_agent_state(&self) -> Result<AgentStateLock, StoreError>;
}

/// A held [`Ownership::lock_agent_state`]; dropping it releases the lock.
pub struct AgentStateLock {
    _held: Box<dyn Send>,
}

impl AgentStateLock {
    /// Wraps whatever releases the lock when dropped.
    pub fn new(held: impl Send + 'static) -> Self {
        Self {
            _held: Box::new(held),
        }
    }
}

impl std::fmt::Debug for AgentStateLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentStateLock")
    }
}
