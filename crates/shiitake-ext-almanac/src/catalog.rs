//! Almanac's commands as a `whistle.catalog/v1` catalog, all of Agent scope.

use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogCommand, CatalogFormat, CatalogScope,
};

use crate::contract::{MAX_CADENCE_BYTES, MAX_PROMPT_BYTES};

fn argument(name: &str, description: &str, kind: ArgumentKind, required: bool) -> CatalogArgument {
    CatalogArgument {
        name: name.into(),
        description: description.into(),
        kind,
        required,
    }
}

fn text(max: usize) -> ArgumentKind {
    ArgumentKind::Text {
        max_bytes: u32::try_from(max).unwrap_or(u32::MAX),
    }
}

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
    let by_id = || vec![argument("scheduleId", "The schedule", text(64), true)];
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![
            command(
                "create",
                "Schedule a prompt into a Session, once or on a cron cadence (UTC)",
                vec![
                    argument("sessionId", "The target Session", text(64), true),
                    argument("prompt", "The prompt", text(MAX_PROMPT_BYTES), true),
                    argument(
                        "at",
                        "Once, at these Unix milliseconds",
                        ArgumentKind::Integer,
                        false,
                    ),
                    argument(
                        "cadence",
                        "A Unix cron cadence in UTC",
                        text(MAX_CADENCE_BYTES),
                        false,
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
