//! Extensions' state in one Session, as committed: their Session-scope rows, the
//! attention they raised, and the change signals their tool handlers wait on.

use std::collections::{BTreeMap, HashMap};

use shiitake_protocol::{ExtensionId, SessionId};
use tokio::sync::watch;

use crate::extension::Grant;
use crate::extension::host::{Host, Raised, Rows, Writes, apply_writes};
use crate::store::{RowScope, Store, StoreError};

/// Attention raised or cleared by a transaction: (extension, kind, change).
pub(super) type AttentionChange = (ExtensionId, String, Raised);

/// Every extension's committed state in one Session.
#[derive(Default)]
pub(super) struct ExtensionState {
    /// Session-scope rows of every extension.
    rows: HashMap<ExtensionId, Rows>,
    /// Bumped when an extension's Session rows change, for tool handlers that wait
    /// on their state ([`crate::extension::host::StateChanges`]); created on demand.
    changes: HashMap<ExtensionId, watch::Sender<u64>>,
    /// Attention raised on this Session: (extension, kind) → (inbox, text).
    attention: BTreeMap<(ExtensionId, String), (bool, String)>,
}

impl ExtensionState {
    /// Reads the Session's extension rows and attention from the store.
    pub(super) async fn load(
        store: &dyn Store,
        session_id: &SessionId,
    ) -> Result<Self, StoreError> {
        let mut state = Self::default();
        let scope = RowScope::Session(session_id.clone());
        for stored in store.extension_rows(None, Some(&scope)).await? {
            let row = stored.row;
            state
                .rows
                .entry(stored.extension_id)
                .or_default()
                .insert((row.collection, row.key), row.value);
        }
        for attention in store.attention(session_id).await? {
            state.attention.insert(
                (attention.extension_id, attention.kind),
                (attention.inbox, attention.text),
            );
        }
        Ok(state)
    }

    /// One extension's Session rows (empty when it has none).
    pub(super) fn rows_of(&self, id: &ExtensionId) -> &Rows {
        static EMPTY: Rows = BTreeMap::new();
        self.rows.get(id).unwrap_or(&EMPTY)
    }

    /// Applies committed writes of one extension and tells its tool handlers.
    pub(super) fn apply_writes(&mut self, id: ExtensionId, writes: Writes) {
        if writes.is_empty() {
            return;
        }
        if let Some(changes) = self.changes.get(&id) {
            changes.send_modify(|version| *version = version.wrapping_add(1));
        }
        apply_writes(self.rows.entry(id).or_default(), writes);
    }

    /// Applies committed attention.
    pub(super) fn apply_attention(&mut self, (id, kind, change): AttentionChange) {
        match change {
            Some(raised) => {
                self.attention.insert((id, kind), raised);
            }
            None => {
                self.attention.remove(&(id, kind));
            }
        }
    }

    /// Whether some attention would wait on a person once `changes` are applied.
    pub(super) fn waits_on_person_with(&self, changes: &[AttentionChange]) -> bool {
        let mut attention = self.attention.clone();
        for (id, kind, change) in changes {
            match change {
                Some(raised) => attention.insert((id.clone(), kind.clone()), raised.clone()),
                None => attention.remove(&(id.clone(), kind.clone())),
            };
        }
        attention.values().any(|(inbox, _)| *inbox)
    }

    /// Makes sure every extension that offers tools or gates them has a change signal
    /// its tool handlers (or a held call) can wait on; called before a run's
    /// contributions are gathered.
    pub(super) fn prepare_change_signals(&mut self, host: &Host) {
        for registered in &host.extensions {
            if registered.grants.has(Grant::Tools) || registered.grants.has(Grant::Gate) {
                self.changes
                    .entry(registered.definition.id.clone())
                    .or_insert_with(|| watch::Sender::new(0));
            }
        }
    }

    /// A receiver of changes to an extension's Session rows, for its tool handlers.
    pub(super) fn changes_of(&self, id: &ExtensionId) -> watch::Receiver<u64> {
        match self.changes.get(id) {
            Some(changes) => changes.subscribe(),
            // Not prepared: a receiver whose sender is gone reports the owner stopped.
            None => watch::Sender::new(0).subscribe(),
        }
    }
}
