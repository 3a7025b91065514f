//! What extensions give a Session's views and runs: the slots snapshots and frames
//! carry, and each run's prompt sections and tool modules.

use std::sync::Arc;

use shiitake_protocol::footer::SessionFooter;
use shiitake_protocol::{CommandId, ExtensionId, LeftOutReason, SessionExtensionSlots, SessionId};

use super::Owner;
use crate::extension::host::{Host, Rows, ToolTx, TxMailbox, bound_prompt_section};
use crate::extension::{Grant, Provenance, RunContext, StateView};
use crate::runner::{PromptSections, ToolModules};

impl Owner {
    /// The extension slots and footer rows of this Session for snapshots and frames.
    pub(super) fn extension_views(&self) -> (SessionExtensionSlots, SessionFooter) {
        let host = &self.deps.host;
        let agent = host.agent_read();
        let mut slots = SessionExtensionSlots::new();
        let mut footer = SessionFooter::new();
        for registered in &host.extensions {
            let id = &registered.definition.id;
            let agent_rows = agent.get(id);
            let view = StateView {
                session_id: Some(self.record.id()),
                session: Some(self.extensions.rows_of(id)),
                agent: agent_rows,
            };
            footer.extend(host.footer(registered, &view));
            if let Some(slot) = host.slot(registered, view) {
                slots.insert(id.clone(), slot);
            }
        }
        (slots, footer)
    }

    /// Prompt sections and tool modules every running extension contributes to a run,
    /// each with its extension (the runner leaves out the section of an extension none
    /// of whose tools the run's model is offered).
    pub(super) fn contributions(
        &self,
        command_id: &CommandId,
        provenance: &Provenance,
    ) -> (PromptSections, ToolModules) {
        let mailbox: Arc<dyn TxMailbox> = Arc::new(self.mailbox.clone());
        let asked = Asked {
            session_id: self.record.id(),
            command_id,
            provenance,
        };
        let contributions = contribute(
            &self.deps.host,
            &asked,
            |id| self.extensions.rows_of(id),
            |id| ToolTx {
                mailbox: mailbox.clone(),
                extension_id: id.clone(),
                changes: self.extensions.changes_of(id),
            },
        );
        (contributions.sections, contributions.modules)
    }
}

/// The run extensions contribute to: its Session, its work item and who sent it.
pub(crate) struct Asked<'a> {
    pub(crate) session_id: &'a SessionId,
    pub(crate) command_id: &'a CommandId,
    pub(crate) provenance: &'a Provenance,
}

/// What the running extensions contribute to one run, and which would have offered
/// tools and did not.
#[derive(Default)]
pub(crate) struct Contributions {
    pub(crate) sections: PromptSections,
    pub(crate) modules: ToolModules,
    /// Extensions with tools to offer that offered none: (extension, why, detail).
    pub(crate) left_out: Vec<(ExtensionId, LeftOutReason, Option<String>)>,
}

/// Asks every running extension for its contribution to the run `asked`, reading its
/// Session rows with `rows_of` and handing its tool handlers `tools_for` (a run's
/// owner, or none for the operator's list of tools).
pub(crate) fn contribute<'r>(
    host: &Host,
    asked: &Asked<'_>,
    rows_of: impl Fn(&ExtensionId) -> &'r Rows,
    tools_for: impl Fn(&ExtensionId) -> ToolTx,
) -> Contributions {
    let agent = host.agent_read();
    let mut out = Contributions::default();
    for registered in &host.extensions {
        let id = &registered.definition.id;
        let wants_prompt = registered.grants.has(Grant::Prompt);
        // An extension the host handed a file port may offer the tools over it with
        // `files` alone (Home's file tools); any other tool module needs `tools`.
        let wants_tools = registered.grants.has(Grant::Tools)
            || (registered.grants.has(Grant::Files) && registered.files.is_some());
        if !(wants_prompt || wants_tools) {
            continue;
        }
        if let Some(reason) = host.stopped(id) {
            if wants_tools {
                out.left_out
                    .push((id.clone(), LeftOutReason::ExtensionStopped, Some(reason)));
            }
            continue;
        }
        let agent_rows = agent.get(id);
        let context = RunContext {
            files: registered.files.as_ref(),
            grants: &registered.grants,
            session_id: asked.session_id,
            command_id: asked.command_id,
            origin: asked.provenance.origin.as_ref(),
            sender: asked.provenance.sender.as_ref(),
            state: StateView {
                session_id: Some(asked.session_id),
                session: Some(rows_of(id)),
                agent: agent_rows,
            },
        };
        let tools = tools_for(id);
        let extension = registered.extension.clone();
        let contributed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            extension.contribute(&context, tools)
        }));
        let Ok(contribution) = contributed else {
            tracing::warn!(extension = %id, "contribute panicked; this run goes without it");
            if wants_tools {
                out.left_out
                    .push((id.clone(), LeftOutReason::ContributionFailed, None));
            }
            continue;
        };
        if wants_prompt && let Some(section) = contribution.prompt_section {
            out.sections
                .push((id.clone(), bound_prompt_section(&section)));
        }
        if wants_tools {
            for module in contribution
                .tools
                .into_iter()
                .chain(contribution.more_tools)
            {
                out.modules.push((id.clone(), module));
            }
        }
    }
    out
}
