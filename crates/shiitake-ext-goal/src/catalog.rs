//! The `/goal` human command as a `whistle.catalog/v1` catalog.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{Catalog, CatalogCommand, CatalogFormat, CatalogScope};

use crate::flow::GOAL_FLOW;

/// `/goal`: set, pause, resume or clear the Session's goal. The server owns the
/// conversation through [`GOAL_FLOW`], because what to ask depends on the goal (a
/// replacement asks first and carries the revision the person was shown).
pub(crate) fn catalog(extension_id: ExtensionId) -> Catalog {
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "goal".into(),
            summary: "Set, pause, resume or clear the goal the agent works toward".into(),
            scope: CatalogScope::Session,
            call: "goal".into(),
            arguments: Vec::new(),
            steps: Vec::new(),
            flow: Some(GOAL_FLOW.into()),
        }],
    }
}
