//! The `/loop` flow as a `whistle.catalog/v1` catalog.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogCommand, CatalogFormat, CatalogScope,
    CatalogStep,
};

use crate::contract::{MAX_CADENCE_BYTES, MAX_PROMPT_BYTES};

/// `/loop start|pause|resume|stop [prompt] [cadence]`, calling the owner command `loop`.
pub(crate) fn catalog(extension_id: ExtensionId) -> Catalog {
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "loop".into(),
            summary: "Start, pause, resume or stop the Session's repeated prompt".into(),
            scope: CatalogScope::Session,
            call: "loop".into(),
            arguments: vec![
                CatalogArgument::required(
                    "action",
                    "start, pause, resume or stop",
                    ArgumentKind::one_of(["start", "pause", "resume", "stop"]),
                ),
                CatalogArgument::optional(
                    "prompt",
                    "The prompt to repeat (start)",
                    ArgumentKind::text(MAX_PROMPT_BYTES),
                ),
                CatalogArgument::optional(
                    "cadence",
                    "A Unix cron cadence in UTC, such as */30 * * * *; \
                     without it the loop paces itself (start)",
                    ArgumentKind::text(MAX_CADENCE_BYTES),
                ),
            ],
            steps: vec![CatalogStep {
                argument: "action".into(),
                prompt: "Start, pause, resume or stop the loop?".into(),
            }],
            flow: None,
        }],
    }
}
