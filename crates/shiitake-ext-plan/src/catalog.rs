//! The `/plan` flow as a `whistle.catalog/v1` catalog.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogCommand, CatalogFormat, CatalogScope,
};

/// `/plan` opens the checklist; `/plan clear` clears it. Both call the owner command `plan`.
pub(crate) fn catalog(extension_id: ExtensionId) -> Catalog {
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "plan".into(),
            summary: "Open the plan's checklist, or clear the plan".into(),
            scope: CatalogScope::Session,
            call: "plan".into(),
            arguments: vec![CatalogArgument::optional(
                "action",
                "open (the default) or clear",
                ArgumentKind::one_of(["open", "clear"]),
            )],
            steps: Vec::new(),
            flow: None,
        }],
    }
}
