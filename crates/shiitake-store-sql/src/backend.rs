//! Core's `Store`, implemented once for every SQL store: a store crate implements the
//! small [`SqlBackend`] (its commits, its reads, closing, ownership) and invokes
//! [`impl_store!`](crate::impl_store), which writes the whole `Store` on top.
//!
//! A macro rather than a generic type: the stores keep their own types
//! (`SqliteStore::open(path, durability)`, `PostgresStore` with its leases), and Rust
//! lets a crate implement core's trait only for its own types, so the one
//! implementation is stamped onto each of them.

use std::sync::Arc;

use async_trait::async_trait;
use shiitake_core::store::{Op, Ownership, StoreError};

use crate::reads::Reads;

/// What a SQL store supplies so that [`impl_store!`](crate::impl_store) can implement
/// core's `Store` for it: everything else is shared.
#[async_trait]
pub trait SqlBackend: Send + Sync + 'static {
    /// The sqlx database its reads run on.
    type Db: sqlx::Database;

    /// Its reads.
    fn reads(&self) -> &Reads<Self::Db>;

    /// Commits `ops` atomically through its writer: all of them or none.
    async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError>;

    /// Stops its writer after the commits already handed over, and closes its pools.
    async fn close(&self);

    /// Leases and forwarding, for a store several processes share; `None` by default.
    fn ownership(&self) -> Option<Arc<dyn Ownership>> {
        None
    }
}

/// Implements core's `Store` for a type that implements [`SqlBackend`]: reads go to
/// its [`Reads`], commits to its writer.
#[macro_export]
macro_rules! impl_store {
    ($store:ty) => {
        #[$crate::__private::async_trait]
        impl $crate::__private::Store for $store {
            async fn commit(
                &self,
                ops: ::std::vec::Vec<$crate::__private::Op>,
            ) -> $crate::__private::Result<()> {
                $crate::SqlBackend::commit(self, ops).await
            }

            async fn session_by_request(
                &self,
                request_id: &$crate::__private::RequestId,
            ) -> $crate::__private::Result<Option<$crate::__private::SessionId>> {
                $crate::SqlBackend::reads(self)
                    .session_by_request(request_id)
                    .await
            }

            async fn load_session(
                &self,
                id: &$crate::__private::SessionId,
            ) -> $crate::__private::Result<Option<$crate::__private::LoadedSession>> {
                $crate::SqlBackend::reads(self).load_session(id).await
            }

            async fn delete_session(
                &self,
                id: &$crate::__private::SessionId,
            ) -> $crate::__private::Result<bool> {
                if !$crate::SqlBackend::reads(self).session_exists(id).await? {
                    return Ok(false);
                }
                let op = $crate::__private::Op::DeleteSession {
                    session_id: id.clone(),
                };
                $crate::SqlBackend::commit(self, vec![op]).await?;
                Ok(true)
            }

            async fn command_by_request(
                &self,
                session_id: &$crate::__private::SessionId,
                request_id: &$crate::__private::RequestId,
            ) -> $crate::__private::Result<Option<$crate::__private::StoredCommand>> {
                $crate::SqlBackend::reads(self)
                    .command_by_request(session_id, request_id)
                    .await
            }

            async fn entry(
                &self,
                session_id: &$crate::__private::SessionId,
                entry_id: &$crate::__private::EntryId,
            ) -> $crate::__private::Result<Option<$crate::__private::StoredEntry>> {
                $crate::SqlBackend::reads(self)
                    .entry(session_id, entry_id)
                    .await
            }

            async fn entry_at(
                &self,
                session_id: &$crate::__private::SessionId,
                sequence: u64,
            ) -> $crate::__private::Result<Option<$crate::__private::StoredEntry>> {
                $crate::SqlBackend::reads(self)
                    .entry_at(session_id, sequence)
                    .await
            }

            async fn lineage(
                &self,
                session_id: &$crate::__private::SessionId,
                from: &$crate::__private::EntryId,
                limit: usize,
            ) -> $crate::__private::Result<Vec<$crate::__private::StoredEntry>> {
                $crate::SqlBackend::reads(self)
                    .lineage(session_id, from, limit)
                    .await
            }

            async fn entries_after(
                &self,
                session_id: &$crate::__private::SessionId,
                sequence: u64,
                limit: usize,
            ) -> $crate::__private::Result<Vec<$crate::__private::StoredEntry>> {
                $crate::SqlBackend::reads(self)
                    .entries_after(session_id, sequence, limit)
                    .await
            }

            async fn terminals_between(
                &self,
                session_id: &$crate::__private::SessionId,
                after: u64,
                up_to: u64,
                limit: usize,
            ) -> $crate::__private::Result<Vec<$crate::__private::StoredTerminal>> {
                $crate::SqlBackend::reads(self)
                    .terminals_between(session_id, (after, up_to), limit)
                    .await
            }

            async fn compactions(
                &self,
                session_id: &$crate::__private::SessionId,
            ) -> $crate::__private::Result<Vec<$crate::__private::StoredCompaction>> {
                $crate::SqlBackend::reads(self)
                    .compactions(session_id)
                    .await
            }

            async fn sandbox_failures_between(
                &self,
                session_id: &$crate::__private::SessionId,
                after: u64,
                up_to: u64,
                limit: usize,
            ) -> $crate::__private::Result<Vec<$crate::__private::StoredSandboxFailure>> {
                $crate::SqlBackend::reads(self)
                    .sandbox_failures_between(session_id, (after, up_to), limit)
                    .await
            }

            async fn list_sessions(
                &self,
                after: Option<&$crate::__private::ListPosition>,
                limit: usize,
            ) -> $crate::__private::Result<Vec<$crate::__private::SummaryRow>> {
                $crate::SqlBackend::reads(self)
                    .list_sessions(after, limit)
                    .await
            }

            async fn sessions_with_open_work(
                &self,
            ) -> $crate::__private::Result<Vec<$crate::__private::SessionId>> {
                $crate::SqlBackend::reads(self)
                    .sessions_with_open_work()
                    .await
            }

            async fn extension_rows(
                &self,
                extension_id: Option<&$crate::__private::ExtensionId>,
                scope: Option<&$crate::__private::RowScope>,
            ) -> $crate::__private::Result<Vec<$crate::__private::StoredExtensionRow>> {
                $crate::SqlBackend::reads(self)
                    .extension_rows(extension_id, scope)
                    .await
            }

            async fn extension_statuses(
                &self,
            ) -> $crate::__private::Result<Vec<$crate::__private::ExtensionStatusRow>> {
                $crate::SqlBackend::reads(self).extension_statuses().await
            }

            async fn extension_request(
                &self,
                extension_id: &$crate::__private::ExtensionId,
                scope: &$crate::__private::RowScope,
                request_id: &str,
            ) -> $crate::__private::Result<Option<$crate::__private::ExtensionReceipt>> {
                $crate::SqlBackend::reads(self)
                    .extension_request(extension_id, scope, request_id)
                    .await
            }

            async fn attention(
                &self,
                session_id: &$crate::__private::SessionId,
            ) -> $crate::__private::Result<Vec<$crate::__private::AttentionRow>> {
                $crate::SqlBackend::reads(self).attention(session_id).await
            }

            async fn next_timer(
                &self,
            ) -> $crate::__private::Result<Option<$crate::__private::TimerRow>> {
                $crate::SqlBackend::reads(self).next_timer().await
            }

            async fn due_timers(
                &self,
                now: u64,
                limit: usize,
            ) -> $crate::__private::Result<Vec<$crate::__private::TimerRow>> {
                $crate::SqlBackend::reads(self).due_timers(now, limit).await
            }

            async fn close(&self) {
                $crate::SqlBackend::close(self).await
            }

            fn ownership(&self) -> Option<::std::sync::Arc<dyn $crate::__private::Ownership>> {
                $crate::SqlBackend::ownership(self)
            }
        }
    };
}

/// What [`impl_store!`](crate::impl_store) names, so a store crate needs no imports for it.
#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use shiitake_core::store::{
        AttentionRow, ExtensionReceipt, ExtensionStatusRow, ListPosition, LoadedSession, Op,
        Ownership, RowScope, Store, StoredCommand, StoredCompaction, StoredEntry,
        StoredExtensionRow, StoredSandboxFailure, StoredTerminal, SummaryRow, TimerRow,
    };
    pub use shiitake_protocol::{EntryId, ExtensionId, RequestId, SessionId};

    /// A store's answer.
    pub type Result<T> = std::result::Result<T, shiitake_core::store::StoreError>;
}
