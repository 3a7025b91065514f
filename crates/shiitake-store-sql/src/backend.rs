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

/// Implements core's `Store` for a type that implements [`SqlBackend`]: commits go to
/// its writer, and every read to the [`Reads`] method of the same name and arguments.
#[macro_export]
macro_rules! impl_store {
    ($store:ty) => {
        $crate::impl_store!(@reads $store;
            fn session_by_request(request_id: &RequestId) -> Option<SessionId>;
            fn load_session(id: &SessionId) -> Option<LoadedSession>;
            fn command_by_request(session_id: &SessionId, request_id: &RequestId) -> Option<StoredCommand>;
            fn entry(session_id: &SessionId, entry_id: &EntryId) -> Option<StoredEntry>;
            fn entry_at(session_id: &SessionId, sequence: u64) -> Option<StoredEntry>;
            fn lineage(session_id: &SessionId, from: &EntryId, limit: usize) -> Vec<StoredEntry>;
            fn entries_after(session_id: &SessionId, sequence: u64, limit: usize) -> Vec<StoredEntry>;
            fn terminals_between(session_id: &SessionId, after: u64, up_to: u64, limit: usize) -> Vec<StoredTerminal>;
            fn compactions(session_id: &SessionId) -> Vec<StoredCompaction>;
            fn sandbox_failures_between(session_id: &SessionId, after: u64, up_to: u64, limit: usize) -> Vec<StoredSandboxFailure>;
            fn list_sessions(after: Option<&ListPosition>, limit: usize) -> Vec<SummaryRow>;
            fn sessions_with_open_work() -> Vec<SessionId>;
            fn extension_rows(extension_id: Option<&ExtensionId>, scope: Option<&RowScope>) -> Vec<StoredExtensionRow>;
            fn extension_statuses() -> Vec<ExtensionStatusRow>;
            fn extension_request(extension_id: &ExtensionId, scope: &RowScope, request_id: &str) -> Option<ExtensionReceipt>;
            fn attention(session_id: &SessionId) -> Vec<AttentionRow>;
            fn next_timer() -> Option<TimerRow>;
            fn due_timers(now: u64, limit: usize) -> Vec<TimerRow>;
        );
    };
    (@reads $store:ty; $(fn $read:ident($($arg:ident: $type:ty),*) -> $answer:ty;)*) => {
        const _: () = {
            use $crate::__private::*;

            #[async_trait]
            impl Store for $store {
                async fn commit(&self, ops: Vec<Op>) -> Result<()> {
                    $crate::SqlBackend::commit(self, ops).await
                }

                async fn delete_session(&self, id: &SessionId) -> Result<bool> {
                    if !$crate::SqlBackend::reads(self).session_exists(id).await? {
                        return Ok(false);
                    }
                    let op = Op::DeleteSession { session_id: id.clone() };
                    $crate::SqlBackend::commit(self, vec![op]).await?;
                    Ok(true)
                }

                $(async fn $read(&self, $($arg: $type),*) -> Result<$answer> {
                    $crate::SqlBackend::reads(self).$read($($arg),*).await
                })*

                async fn close(&self) {
                    $crate::SqlBackend::close(self).await
                }

                fn ownership(&self) -> Option<std::sync::Arc<dyn Ownership>> {
                    $crate::SqlBackend::ownership(self)
                }
            }
        };
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
