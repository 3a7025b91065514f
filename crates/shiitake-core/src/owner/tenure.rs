//! The owner's tenure: every commit of the Session goes through it, under the
//! lease when the store is shared.
//!
//! On a store several processes share, an owner holds its Session's lease and puts
//! the lease's fencing token in every commit. A commit the lease no longer covers
//! fails whole and fences the tenure: from then on nothing more is committed, and
//! the owner stops without answering (its callers ask again and reach the new owner).
//!
//! A commit that fails for a reason that passes ([`StoreError::Unavailable`]: a lost
//! connection, a full disk) may have landed or not, so the tenure is then *unsure*:
//! it commits nothing more until the owner has read its Session back from the store
//! ([`Tenure::reread`]); the owner pauses meanwhile (`owner_task.rs`). A run's read
//! of the Session that fails so does the same ([`Tenure::read_failed`]).

use std::sync::Arc;

use shiitake_protocol::SessionId;

use crate::store::ownership::{Lease, Release};
use crate::store::{FencingToken, Op, Ownership, Store, StoreError};

/// The one way an owner commits, and the lease it commits under.
pub(crate) struct Tenure {
    store: Arc<dyn Store>,
    ownership: Option<Arc<dyn Ownership>>,
    session_id: SessionId,
    /// The lease this owner holds on a shared store; every commit carries its token.
    lease: Option<FencingToken>,
    /// The previous owner handed the Session over on purpose: resuming its work is
    /// not a recovery from a crash.
    handed_over: bool,
    /// A commit was refused because the lease moved on (or the loss was announced).
    fenced: bool,
    /// A commit failed for a reason that passes (what the store said): whether it
    /// landed is not known, so nothing more commits until the Session is read back.
    unsure: Option<String>,
}

impl Tenure {
    /// A tenure of `session_id`, under `lease` when the store is shared.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        ownership: Option<Arc<dyn Ownership>>,
        session_id: SessionId,
        lease: Option<Lease>,
    ) -> Self {
        Self {
            store,
            ownership,
            session_id,
            lease: lease.map(|lease| lease.token),
            handed_over: lease.is_some_and(|lease| lease.handed_over),
            fenced: false,
            unsure: None,
        }
    }

    /// Whether this tenure began with a handover (the previous owner drained), so its
    /// interrupted work resumes without counting a recovery.
    pub(super) fn handed_over(&self) -> bool {
        self.handed_over
    }

    /// Commits `ops` as they are, under the lease when one is held. A commit the
    /// lease no longer covers fails whole and fences the tenure; a fenced tenure
    /// commits nothing more. A commit that fails for a reason that passes leaves the
    /// tenure unsure, and an unsure tenure commits nothing until [`reread`](Self::reread).
    pub(super) async fn commit(&mut self, mut ops: Vec<Op>) -> Result<(), StoreError> {
        if self.fenced {
            return Err(StoreError::Fenced(format!(
                "this process no longer owns Session {}",
                self.session_id
            )));
        }
        if let Some(reason) = &self.unsure {
            return Err(StoreError::Unavailable(format!(
                "an earlier commit failed ({reason}); the Session waits to be read back"
            )));
        }
        if let Some(token) = self.lease {
            ops.insert(
                0,
                Op::Fence {
                    session_id: self.session_id.clone(),
                    token,
                },
            );
        }
        let result = self.store.commit(ops).await;
        if let Err(StoreError::Fenced(reason)) = &result {
            tracing::warn!(session = %self.session_id, %reason, "fencing token rejected: another process owns this Session now; this owner stops");
            self.fenced = true;
        }
        if let Err(error) = &result
            && error.is_transient()
        {
            tracing::debug!(session = %self.session_id, %error, "a commit failed for a reason that passes; the owner pauses");
            self.unsure = Some(error.to_string());
        }
        result
    }

    /// What the store said when a commit failed for a reason that passes, until the
    /// Session has been read back.
    pub(super) fn unsure(&self) -> Option<&str> {
        self.unsure.as_deref()
    }

    /// A run's read of the Session failed for a reason that passes: nothing more commits
    /// until the Session is read back, as after a failed commit, so the owner pauses and
    /// the work goes on from what is committed.
    pub(super) fn read_failed(&mut self, error: &StoreError) {
        self.unsure = Some(error.to_string());
    }

    /// The store holds commits this owner has not seen. On a shared store another
    /// process made them, so the lease has moved on: the tenure is fenced. Alone on its
    /// store, only a commit whose answer was lost can have done it: the tenure is unsure
    /// and the owner reads the Session back.
    pub(super) fn behind_the_store(&mut self) {
        if self.ownership.is_some() {
            self.fenced = true;
        } else {
            self.unsure = Some("the store holds commits this owner has not seen".to_owned());
        }
    }

    /// The Session was read back from the store: commits may go on from what it holds.
    pub(super) fn reread(&mut self) {
        self.unsure = None;
    }

    /// Whether another process took the Session over: nothing more may be committed
    /// or answered here.
    pub(super) fn fenced(&self) -> bool {
        self.fenced
    }

    /// Another process took over the lease taken with `token`; `false` (and nothing
    /// changes) when that was an earlier tenure of this process, not this one.
    pub(super) fn lost(&mut self, token: FencingToken) -> bool {
        if self.lease != Some(token) {
            return false;
        }
        self.fenced = true;
        true
    }

    /// Gives the lease back, so another process may take the Session at once (a
    /// lease that moved on to another tenure is left alone by the store).
    pub(super) async fn release(&mut self, why: Release) {
        let (Some(token), Some(ownership)) = (self.lease.take(), self.ownership.clone()) else {
            return;
        };
        match ownership.release(&self.session_id, token, why).await {
            Ok(()) => {}
            // The store is down (a shutdown while it is): said once by the process.
            Err(error) if error.is_transient() => {
                tracing::debug!(%error, session = %self.session_id, "could not give a lease back; it lapses");
            }
            Err(error) => {
                tracing::warn!(%error, session = %self.session_id, "could not give a lease back; it lapses");
            }
        }
    }
}
