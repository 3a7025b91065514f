//! What extensions give a Session's views and runs: the slots snapshots and frames
//! carry, and each run's prompt sections and tool modules.

use std::sync::Arc;

use shiitake_protocol::footer::SessionFooter;
use shiitake_protocol::{CommandId, SessionExtensionSlots};

use super::Owner;
use crate::extension::host::{ToolTx, bound_prompt_section};
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
        let host = &self.deps.host;
        let agent = host.agent_read();
        let mut sections = Vec::new();
        let mut modules = Vec::new();
        for registered in &host.extensions {
            let id = &registered.definition.id;
            let wants_prompt = registered.grants.has(Grant::Prompt);
            // An extension the host handed a file port may offer the tools over it with
            // `files` alone (Home's file tools); any other tool module needs `tools`.
            let wants_tools = registered.grants.has(Grant::Tools)
                || (registered.grants.has(Grant::Files) && registered.files.is_some());
            if host.stopped(id).is_some() || !(wants_prompt || wants_tools) {
                continue;
            }
            let agent_rows = agent.get(id);
            let context = RunContext {
                files: registered.files.as_ref(),
                grants: &registered.grants,
                session_id: self.record.id(),
                command_id,
                origin: provenance.origin.as_ref(),
                sender: provenance.sender.as_ref(),
                state: StateView {
                    session_id: Some(self.record.id()),
                    session: Some(self.extensions.rows_of(id)),
                    agent: agent_rows,
                },
            };
            let tools = ToolTx {
                mailbox: Arc::new(self.mailbox.clone()),
                extension_id: id.clone(),
                changes: self.extensions.changes_of(id),
            };
            let extension = registered.extension.clone();
            let contributed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                extension.contribute(&context, tools)
            }));
            let Ok(contribution) = contributed else {
                tracing::warn!(extension = %id, "contribute panicked; this run goes without it");
                continue;
            };
            if wants_prompt && let Some(section) = contribution.prompt_section {
                sections.push((id.clone(), bound_prompt_section(&section)));
            }
            if wants_tools && let Some(module) = contribution.tools {
                modules.push((id.clone(), module));
            }
        }
        (sections, modules)
    }
}
