//! The `/plan` flow as a `whistle.catalog/v1` catalog.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogChoice, CatalogCommand, CatalogFormat,
    CatalogScope,
};

/// `/plan` opens the checklist; `/plan clear` clears it. Both call the owner command `plan`.
pub(crate) fn catalog(extension_id: ExtensionId) -> Catalog {
    let choice = |label: &str, value: &str| CatalogChoice {
        label: label.into(),
        value: value.into(),
    };
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "plan".into(),
            summary: "Open the plan's checklist, or clear the plan".into(),
            scope: CatalogScope::Session,
            call: "plan".into(),
            arguments: vec![CatalogArgument {
                name: "action".into(),
                description: "open (the default) or clear".into(),
                kind: ArgumentKind::Choice {
                    choices: vec![choice("open", "open"), choice("clear", "clear")],
                    multiple: false,
                    free_text: false,
                },
                required: false,
            }],
            steps: Vec::new(),
            flow: None,
        }],
    }
}
