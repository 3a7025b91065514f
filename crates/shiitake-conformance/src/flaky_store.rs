//! A real store with a switch in front of its commits: a test makes them fail for a
//! reason that passes (as a full disk or a lost connection does), or land and then
//! report a failure (a connection lost after `COMMIT` was sent), or fail for good.
//! Reads go through (what a disk-full SQLite file does), except the lineage reads a
//! test asks to fail (a pool with no connection to spare).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use shiitake_core::store::*;
use shiitake_protocol::{EntryId, ExtensionId, RequestId, SessionId};

/// What the next commits do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Commit as the store does.
    None,
    /// Fail every commit with `StoreError::Unavailable`, landing nothing.
    Refuse,
    /// Land the next commit, then answer `StoreError::Unavailable` (once).
    LandThenFail,
    /// Fail the next commit with a database error that does not pass (once).
    Permanent,
}

/// The store with its switch.
pub struct FlakyStore {
    inner: Arc<dyn Store>,
    fault: Mutex<Fault>,
    /// Commits refused or failed by the switch.
    pub failed: AtomicUsize,
    /// Lineage reads still to fail with `StoreError::Unavailable`.
    lineage_failures: AtomicUsize,
}

impl FlakyStore {
    /// `inner` behind a switch that is off.
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fault: Mutex::new(Fault::None),
            failed: AtomicUsize::new(0),
            lineage_failures: AtomicUsize::new(0),
        })
    }

    /// What the next commits do.
    pub fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap_or_else(PoisonError::into_inner) = fault;
    }

    /// Fails the next `reads` lineage reads for a reason that passes.
    pub fn fail_lineage_reads(&self, reads: usize) {
        self.lineage_failures.store(reads, Ordering::SeqCst);
    }

    /// Lineage reads still to fail.
    pub fn lineage_failures_left(&self) -> usize {
        self.lineage_failures.load(Ordering::SeqCst)
    }

    /// Commits refused or failed by the switch so far.
    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Store for FlakyStore {
    async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let fault = {
            let mut fault = self.fault.lock().unwrap_or_else(PoisonError::into_inner);
            let now = *fault;
            if matches!(now, Fault::LandThenFail | Fault::Permanent) {
                *fault = Fault::None;
            }
            now
        };
        match fault {
            Fault::None => self.inner.commit(ops).await,
            Fault::Refuse => {
                self.failed.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::unavailable(
                    "database or disk is full (injected)",
                ))
            }
            Fault::LandThenFail => {
                self.inner.commit(ops).await?;
                self.failed.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::unavailable(
                    "connection lost while COMMIT was answered (injected)",
                ))
            }
            Fault::Permanent => {
                self.failed.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::database("CHECK constraint failed (injected)"))
            }
        }
    }

    async fn session_by_request(
        &self,
        request_id: &RequestId,
    ) -> Result<Option<SessionId>, StoreError> {
        self.inner.session_by_request(request_id).await
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<LoadedSession>, StoreError> {
        self.inner.load_session(id).await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.inner.delete_session(id).await
    }

    async fn command_by_request(
        &self,
        session_id: &SessionId,
        request_id: &RequestId,
    ) -> Result<Option<StoredCommand>, StoreError> {
        self.inner.command_by_request(session_id, request_id).await
    }

    async fn entry(
        &self,
        session_id: &SessionId,
        entry_id: &EntryId,
    ) -> Result<Option<StoredEntry>, StoreError> {
        self.inner.entry(session_id, entry_id).await
    }

    async fn entry_at(
        &self,
        session_id: &SessionId,
        sequence: u64,
    ) -> Result<Option<StoredEntry>, StoreError> {
        self.inner.entry_at(session_id, sequence).await
    }

    async fn lineage(
        &self,
        session_id: &SessionId,
        from: &EntryId,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        let failing = self
            .lineage_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if failing {
            return Err(StoreError::unavailable(
                "pool timed out while waiting for an open connection (injected)",
            ));
        }
        self.inner.lineage(session_id, from, limit).await
    }

    async fn entries_after(
        &self,
        session_id: &SessionId,
        sequence: u64,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        self.inner.entries_after(session_id, sequence, limit).await
    }

    async fn terminals_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredTerminal>, StoreError> {
        self.inner
            .terminals_between(session_id, after, up_to, limit)
            .await
    }

    async fn compactions(
        &self,
        session_id: &SessionId,
    ) -> Result<Vec<StoredCompaction>, StoreError> {
        self.inner.compactions(session_id).await
    }

    async fn sandbox_failures_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredSandboxFailure>, StoreError> {
        self.inner
            .sandbox_failures_between(session_id, after, up_to, limit)
            .await
    }

    async fn list_sessions(
        &self,
        after: Option<&ListPosition>,
        limit: usize,
    ) -> Result<Vec<SummaryRow>, StoreError> {
        self.inner.list_sessions(after, limit).await
    }

    async fn sessions_with_open_work(&self) -> Result<Vec<SessionId>, StoreError> {
        self.inner.sessions_with_open_work().await
    }

    async fn extension_rows(
        &self,
        extension_id: Option<&ExtensionId>,
        scope: Option<&RowScope>,
    ) -> Result<Vec<StoredExtensionRow>, StoreError> {
        self.inner.extension_rows(extension_id, scope).await
    }

    async fn extension_statuses(&self) -> Result<Vec<ExtensionStatusRow>, StoreError> {
        self.inner.extension_statuses().await
    }

    async fn extension_request(
        &self,
        extension_id: &ExtensionId,
        scope: &RowScope,
        request_id: &str,
    ) -> Result<Option<ExtensionReceipt>, StoreError> {
        self.inner
            .extension_request(extension_id, scope, request_id)
            .await
    }

    async fn attention(&self, session_id: &SessionId) -> Result<Vec<AttentionRow>, StoreError> {
        self.inner.attention(session_id).await
    }

    async fn next_timer(&self) -> Result<Option<TimerRow>, StoreError> {
        self.inner.next_timer().await
    }

    async fn due_timers(&self, now: u64, limit: usize) -> Result<Vec<TimerRow>, StoreError> {
        self.inner.due_timers(now, limit).await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}

/// Pauses the owner of `session` for its store and lets the store back: a prompt sent
/// while `store` refuses commits is refused, the owner shows it waits for its store
/// (`activity.storageWait`), and then commits go through again.
pub async fn pause_owner(session: &impl shiitake_protocol::SessionApi, store: &FlakyStore) {
    use futures::StreamExt;
    use shiitake_protocol::{PromptText, ReadOptions, SendOptions, SessionFrame};
    let mut changes = session
        .watch(ReadOptions::default())
        .await
        .expect("the Session is watched")
        .changes;
    store.set(Fault::Refuse);
    let prompt = PromptText::new("meanwhile").expect("a prompt");
    let refused = session.send(prompt, SendOptions::default()).await;
    assert!(
        refused.is_err(),
        "a prompt was taken while commits fail: {refused:?}"
    );
    tokio::time::timeout(crate::support::PATIENCE, async {
        while let Some(frame) = changes.next().await {
            if let SessionFrame::Update(update) = frame.expect("a frame")
                && update.activity.storage_wait.is_some()
            {
                return;
            }
        }
    })
    .await
    .expect("the owner showed it waits for its store");
    store.set(Fault::None);
}
