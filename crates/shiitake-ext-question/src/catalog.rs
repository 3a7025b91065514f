//! The `/answer` human command as a `whistle.catalog/v1` catalog.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{Catalog, CatalogCommand, CatalogFormat, CatalogScope};

use crate::flow::ANSWER_FLOW;

/// `/answer`: pick a waiting question and answer each of its questions; the server
/// owns the conversation through the [`ANSWER_FLOW`] command.
pub fn catalog(extension_id: ExtensionId) -> Catalog {
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "answer".into(),
            summary: "Answer a question the agent asked".into(),
            scope: CatalogScope::Session,
            call: "answer".into(),
            arguments: Vec::new(),
            steps: Vec::new(),
            flow: Some(ANSWER_FLOW.into()),
        }],
    }
}
