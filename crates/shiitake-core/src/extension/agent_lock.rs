//! The Agent-transaction lock: transactions that may write Agent-scope rows take
//! their turn, in this process and, on a shared store, across processes.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use shiitake_protocol::ExtensionId;

use super::tx::Rows;

/// Serialises transactions that may write Agent-scope rows: in this process, and
/// across processes when the store is shared.
#[derive(Default)]
pub(crate) struct AgentTransactions {
    local: tokio::sync::Mutex<()>,
    shared: std::sync::OnceLock<SharedAgentState>,
}

/// What cross-process Agent transactions need.
struct SharedAgentState {
    store: Arc<dyn crate::store::Store>,
    ownership: Arc<dyn crate::store::Ownership>,
    rows: Arc<RwLock<HashMap<ExtensionId, Rows>>>,
}

/// A held [`AgentTransactions`]: released when dropped.
pub(crate) struct AgentGuard<'a> {
    _local: tokio::sync::MutexGuard<'a, ()>,
    _shared: Option<crate::store::ownership::AgentStateLock>,
}

impl AgentTransactions {
    /// Makes every later transaction also take the cross-process lock and read the
    /// Agent's rows from `store` into `rows` (a store several processes share).
    pub(crate) fn share(
        &self,
        store: Arc<dyn crate::store::Store>,
        ownership: Arc<dyn crate::store::Ownership>,
        rows: Arc<RwLock<HashMap<ExtensionId, Rows>>>,
    ) {
        let shared = SharedAgentState {
            store,
            ownership,
            rows,
        };
        if self.shared.set(shared).is_err() {
            tracing::warn!("Agent state was already shared");
        }
    }

    /// Waits for the turn of this transaction. On a shared store it also takes the
    /// cross-process lock and reloads the Agent's rows, so the transaction reads
    /// what every process committed.
    pub(crate) async fn lock(&self) -> AgentGuard<'_> {
        let local = self.local.lock().await;
        let Some(shared) = self.shared.get() else {
            return AgentGuard {
                _local: local,
                _shared: None,
            };
        };
        let lock = match shared.ownership.lock_agent_state().await {
            Ok(lock) => Some(lock),
            Err(error) => {
                tracing::warn!(%error, "could not take the Agent state lock; going on without it");
                None
            }
        };
        let scope = crate::store::RowScope::Agent;
        match shared.store.extension_rows(None, Some(&scope)).await {
            Ok(stored) => {
                let mut fresh: HashMap<ExtensionId, Rows> = HashMap::new();
                for stored in stored {
                    let row = stored.row;
                    fresh
                        .entry(stored.extension_id)
                        .or_default()
                        .insert((row.collection, row.key), row.value);
                }
                *shared.rows.write().unwrap_or_else(PoisonError::into_inner) = fresh;
            }
            Err(error) => {
                tracing::warn!(%error, "could not reload Agent state; using this process's copy");
            }
        }
        AgentGuard {
            _local: local,
            _shared: lock,
        }
    }
}
