//! The tool gates a run asks before each call: every extension the host granted
//! `gate`, in registration order, with the door to its owner transactions.

use std::sync::Arc;

use super::Owner;
use crate::extension::Grant;
use crate::extension::host::ToolTx;
use crate::runner::GateLink;

impl Owner {
    /// The run's gates. A stopped gate stays among them: its transactions fail, so the
    /// calls it would decide on are refused until the host resumes it (a gate fails
    /// closed).
    pub(super) fn gates(&self) -> Vec<GateLink> {
        self.deps
            .host
            .extensions
            .iter()
            .filter(|registered| registered.grants.has(Grant::Gate))
            .map(|registered| GateLink {
                extension: registered.extension.clone(),
                tools: ToolTx {
                    mailbox: Arc::new(self.mailbox.clone()),
                    extension_id: registered.definition.id.clone(),
                    changes: self.extensions.changes_of(&registered.definition.id),
                },
            })
            .collect()
    }
}
