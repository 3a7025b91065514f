//! An owner whose store failed a commit for a reason that passes: it pauses where its
//! last commit left the work, and once the store is back it reads the Session again
//! and goes on from there.
//!
//! Whether the failed commit landed is not known (a connection can drop after
//! `COMMIT` was sent), so nothing in memory is trusted: the run is stopped without a
//! terminal, and the record, the queue, the waiting lines and the interrupted work are
//! read back from the store, exactly as a fresh owner would load them. What stays is
//! what never was stored: the publication channel (watchers stay attached), the run
//! numbering, and the cancels asked of the work that was running. Commits the
//! watchers did not see (one that landed though its answer was lost) are published
//! from the store before the work goes on.

use std::sync::Arc;

use shiitake_protocol::{FrameDelivery, SessionFrame, StorageWait, SubscribeOptions};

use super::extension_state::ExtensionState;
use super::{Owner, Published};
use crate::cursor::Position;
use crate::store::StoreError;

/// How reading the Session back came out.
pub(crate) enum Reloaded {
    /// The store answered and took a commit: the work goes on (call
    /// [`Owner::resume`] with [`Resumption::StoreReturned`](super::Resumption)).
    Resumed,
    /// The store still fails: wait and try again.
    StillDown(StoreError),
    /// The Session is gone (deleted meanwhile).
    Gone,
    /// Another process owns the Session now: this owner stops without answering.
    Fenced,
}

impl Owner {
    /// Stops the run where its last commit left it (no terminal) and says why the owner
    /// waits: what the store said. A cancel asked of the run is remembered.
    pub(crate) fn pause(&mut self) -> String {
        self.started_before_pause = self.work.started_calls();
        if let Some(cancelled) = self.work.stop_without_terminal() {
            self.cancelled_before_pause.push(cancelled);
        }
        self.publication.set_progress(None);
        self.publication.set_tool_output(None);
        self.tenure
            .unsure()
            .unwrap_or("the store failed a commit")
            .to_owned()
    }

    /// Shows watchers in this process that the work waits for the store (`Some`), or
    /// no longer does (`None`).
    pub(crate) fn show_storage_wait(&mut self, wait: Option<StorageWait>) {
        self.publication.set_storage_wait(wait);
        self.publish_changes(Vec::new(), Vec::new());
    }

    /// Reads the Session back from the store, publishes what watchers missed of it (it
    /// is committed, whatever comes next), and commits its header as read, which lands
    /// only when the store takes writes again (and, on a shared store, only under this
    /// owner's lease).
    pub(crate) async fn reload(&mut self) -> Reloaded {
        let store = self.deps.store.clone();
        let session_id = self.session_id().clone();
        let loaded = match store.load_session(&session_id).await {
            Ok(Some(loaded)) => loaded,
            Ok(None) => return Reloaded::Gone,
            Err(error) => return Reloaded::StillDown(error),
        };
        let extensions = match ExtensionState::load(&*store, &session_id).await {
            Ok(extensions) => extensions,
            Err(error) => return Reloaded::StillDown(error),
        };
        let published = self.record.position();
        self.extensions = extensions;
        self.take_loaded(loaded);
        self.tenure.reread();
        // What was read is committed, whatever the probe says next: watchers get it now,
        // before any frame carries the cursor it moved the owner to.
        self.publish_missed(published).await;
        let header = self.next_header();
        if let Err(error) = self.commit_raw(Vec::new(), header).await {
            return if self.tenure.fenced() {
                Reloaded::Fenced
            } else {
                Reloaded::StillDown(error)
            };
        }
        self.publication.set_storage_wait(None);
        self.publish_changes(Vec::new(), Vec::new());
        Reloaded::Resumed
    }

    /// Publishes what was committed after `published` (what watchers last saw): live
    /// updates, or a reset when that cannot be replayed; nothing when nothing was.
    async fn publish_missed(&mut self, published: Position) {
        if !self.publication.watched() {
            return;
        }
        let options = SubscribeOptions {
            after: Some(published.encode()),
            include_sandbox_failures: Some(true),
        };
        let frames = match self.subscribe(&options).await {
            Ok((frames, _receiver)) => frames,
            Err(error) => {
                tracing::warn!(%error, session = %self.session_id(), "could not replay what watchers missed while the store failed");
                Vec::new()
            }
        };
        for frame in frames {
            let published = match frame {
                SessionFrame::Update(mut update) => {
                    update.delivery = FrameDelivery::Live;
                    Published::Update(Arc::new(update))
                }
                SessionFrame::Reset(reset) => Published::Reset(Arc::new(reset.baseline)),
                SessionFrame::Progress(progress) => Published::Progress(Arc::new(progress)),
            };
            self.publication.publish(published);
        }
    }
}
