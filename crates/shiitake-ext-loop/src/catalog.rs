//! The `/loop` flow as a `whistle.catalog/v1` catalog.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogChoice, CatalogCommand, CatalogFormat,
    CatalogScope, CatalogStep,
};

use crate::contract::{MAX_CADENCE_BYTES, MAX_PROMPT_BYTES};

/// `/loop start|pause|resume|stop [prompt] [cadence]`, calling the owner command `loop`.
pub(crate) fn catalog(extension_id: ExtensionId) -> Catalog {
    let choice = |value: &str| CatalogChoice {
        label: value.into(),
        value: value.into(),
    };
    let text = |max: usize| ArgumentKind::Text {
        max_bytes: u32::try_from(max).unwrap_or(u32::MAX),
    };
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "loop".into(),
            summary: "Start, pause, resume or stop the Session's repeated prompt".into(),
            scope: CatalogScope::Session,
            call: "loop".into(),
            arguments: vec![
                CatalogArgument {
                    name: "action".into(),
                    description: "start, pause, resume or stop".into(),
                    kind: ArgumentKind::Choice {
                        choices: ["start", "pause", "resume", "stop"]
                            .into_iter()
                            .map(choice)
                            .collect(),
                        multiple: false,
                        free_text: false,
                    },
                    required: true,
                },
                CatalogArgument {
                    name: "prompt".into(),
                    description: "The prompt to repeat (start)".into(),
                    kind: text(MAX_PROMPT_BYTES),
                    required: false,
                },
                CatalogArgument {
                    name: "cadence".into(),
                    description: "A Unix cron cadence in UTC, such as */30 * * * *; \
                                  without it the loop paces itself (start)"
                        .into(),
                    kind: text(MAX_CADENCE_BYTES),
                    required: false,
                },
            ],
            steps: vec![CatalogStep {
                argument: "action".into(),
                prompt: "Start, pause, resume or stop the loop?".into(),
            }],
            flow: None,
        }],
    }
}
