//! Almanac's commands as a `whistle.catalog/v1` catalog, all of Agent scope.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogCommand, CatalogFormat, CatalogScope,
};

use crate::contract::{MAX_CADENCE_BYTES, MAX_PROMPT_BYTES};

/// `almanac-<name>`, calling the Agent-scope command `<name>`.
fn command(name: &str, summary: &str, arguments: Vec<CatalogArgument>) -> CatalogCommand {
    CatalogCommand {
        name: format!("almanac-{name}"),
        summary: summary.into(),
        scope: CatalogScope::Agent,
        call: name.into(),
        arguments,
        steps: Vec::new(),
        flow: None,
    }
}

/// `almanac-create`, `-list`, `-pause`, `-resume` and `-delete`.
pub(crate) fn catalog(extension_id: ExtensionId) -> Catalog {
    let by_id = || {
        vec![CatalogArgument::required(
            "scheduleId",
            "The schedule",
            ArgumentKind::text(64),
        )]
    };
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![
            command(
                "create",
                "Schedule a prompt into a Session, once or on a cron cadence (UTC)",
                vec![
                    CatalogArgument::required(
                        "sessionId",
                        "The target Session",
                        ArgumentKind::text(64),
                    ),
                    CatalogArgument::required(
                        "prompt",
                        "The prompt",
                        ArgumentKind::text(MAX_PROMPT_BYTES),
                    ),
                    CatalogArgument::optional(
                        "at",
                        "Once, at these Unix milliseconds",
                        ArgumentKind::Integer,
                    ),
                    CatalogArgument::optional(
                        "cadence",
                        "A Unix cron cadence in UTC",
                        ArgumentKind::text(MAX_CADENCE_BYTES),
                    ),
                ],
            ),
            command("list", "List the schedules", Vec::new()),
            command("pause", "Pause a schedule", by_id()),
            command("resume", "Resume a paused or stopped schedule", by_id()),
            command("delete", "Delete a schedule", by_id()),
        ],
    }
}
