//! Subagents declared to core's kit: the projection and footer rows (read from
//! memory), `/agents`, and the observation signal that wakes the refresher.

use std::sync::Arc;

use shiitake_core::clock::Clock;
use shiitake_core::extension::HookError;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{Catalog, CatalogCommand, CatalogFormat, CatalogScope};
use shiitake_protocol::extension::ContractCommand;

use crate::contract::{NAMESPACE, SubagentsContract, ToggleRows, Toggled};
use crate::refresh::Refresher;
use crate::shared::Shared;
use crate::source::SubagentsSource;

/// Subagents over the host's `source`, timed by `clock` (the Agent's clock): the
/// extension to register with `AgentBuilder::kit_extension`, and the [`Refresher`]
/// task that reads its rows (run it with [`Refresher::spawn`] once the Agent is open;
/// [`Refresher::handle`] tells it a Session's children changed).
///
/// The rows live in memory only: the refresher reads them through the source when a
/// watcher reads the Session, and polls while a child works or waits. Its grants are
/// the footer's (`projection`) and `/agents` (`commands`); it keeps no state.
pub fn extension(
    source: Arc<dyn SubagentsSource>,
    clock: Arc<dyn Clock>,
) -> Result<(KitExtension<SubagentsContract>, Refresher), KitError> {
    let shared = Arc::new(Shared::new(source, clock));
    let extension = ExtensionKit::<SubagentsContract>::new(NAMESPACE)?
        .command({
            let shared = shared.clone();
            move |tx, input: ToggleRows| {
                let session_id = tx
                    .session_id()
                    .cloned()
                    .ok_or_else(|| HookError::Invalid("/agents acts on a Session".into()))?;
                let collapsed = shared.toggle(session_id, input.collapsed);
                Ok(Toggled { collapsed })
            }
        })
        .projection({
            let shared = shared.clone();
            move |state| shared.view(state.session_id()?)
        })
        .footer({
            let shared = shared.clone();
            move |state, id| {
                state
                    .session_id()
                    .and_then(|session_id| shared.view(session_id))
                    .map(|view| view.footer_rows(id))
                    .unwrap_or_default()
            }
        })
        .on_observed({
            let shared = shared.clone();
            move |session_id| shared.observed(session_id)
        })
        .catalog(catalog)
        .build()?;
    Ok((extension, Refresher::new(shared)))
}

/// `/agents`, a Session command that calls `toggle` with no arguments.
fn catalog(extension_id: ExtensionId) -> Catalog {
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "agents".into(),
            summary: "Collapse the sub-agent rows to one summary row, or expand them".into(),
            scope: CatalogScope::Session,
            call: ToggleRows::NAME.into(),
            arguments: Vec::new(),
            steps: Vec::new(),
            flow: None,
        }],
    }
}
