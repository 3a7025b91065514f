//! The `/approve` human command as a `whistle.catalog/v1` catalog.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{Catalog, CatalogCommand, CatalogFormat, CatalogScope};

use crate::contract::{ANSWER_FLOW, AnswerApproval};
use shiitake_protocol::extension::ContractCommand;

/// `/approve`: pick a waiting call, allow it once, for the Session, or deny it; the
/// server owns the conversation through the [`ANSWER_FLOW`] command.
pub(crate) fn catalog(extension_id: ExtensionId) -> Catalog {
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "approve".into(),
            summary: "Allow or deny a tool call that waits for you".into(),
            scope: CatalogScope::Session,
            call: AnswerApproval::NAME.into(),
            arguments: Vec::new(),
            steps: Vec::new(),
            flow: Some(ANSWER_FLOW.into()),
        }],
    }
}
