//! The `agents.*` extension itself: the record (Session state), the `agents.*` tools, the
//! prompt section naming the Agents one can reach, and the settled hook that ends a
//! sender's turn.

use std::sync::Arc;

use serde_json::json;
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, Grant, Grants, HookError, RunContext, Settled,
    StateScope, Tx,
};
use shiitake_protocol::{BoundError, ExtensionId};

use crate::contract::{EXTENSION_ID, MAX_PROMPTED_AGENTS, NAMESPACE};
use crate::record;
use crate::runtime::Shared;
use crate::tools;
use crate::turns::TurnEnded;

/// Exactly what the host grants the extension: its record (`state`), the
/// `agents.*` tools (`tools`) and the section naming the Agents (`prompt`).
pub fn agents_grants() -> Grants {
    Grants::none()
        .with(Grant::State)
        .with(Grant::Tools)
        .with(Grant::Prompt)
}

/// The `agents.*` extension on one Agent; built by
/// [`ConversationAgents::extension`](crate::ConversationAgents::extension).
pub struct ConversationAgentsExtension {
    definition: ExtensionDefinition,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ConversationAgentsExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationAgentsExtension")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl ConversationAgentsExtension {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Self, BoundError> {
        Ok(Self {
            definition: ExtensionDefinition {
                id: ExtensionId::new(EXTENSION_ID)?,
                namespace: NAMESPACE.into(),
                scopes: vec![StateScope::Session],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
            shared,
        })
    }

    fn prompt_section(&self) -> String {
        let others: Vec<String> = self
            .shared
            .directory
            .names()
            .into_iter()
            .filter(|name| name != &self.shared.me)
            .take(MAX_PROMPTED_AGENTS)
            .map(String::from)
            .collect();
        let reach = if others.is_empty() {
            "No other Agent exists yet; agents.create makes one.".to_owned()
        } else {
            format!("Agents you can send work to: {}.", others.join(", "))
        };
        format!(
            "You are the Agent {me}. {reach} agents.send gives one of them work and waits for \
             its reply; a question it asks you comes back as waiting_on_you: answer it with \
             agents.answer, or pass it to a person with agents.escalate. Questions you leave \
             go to a person when your turn ends.",
            me = self.shared.me
        )
    }
}

impl Extension for ConversationAgentsExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    /// The sender's turn ended: hand its children to the task that passes Asks still
    /// waiting on this Session to a person.
    fn on_settled(&self, tx: &mut Tx<'_>, _settled: &Settled) -> Result<(), HookError> {
        let Some(parent) = tx.session_id().cloned() else {
            return Ok(());
        };
        let children: Vec<_> = record::load(tx)?
            .into_iter()
            .map(|row| (row.agent, row.session_id))
            .collect();
        if children.is_empty() {
            return Ok(());
        }
        if self
            .shared
            .turn_ends
            .send(TurnEnded { parent, children })
            .is_err()
        {
            tracing::debug!("the turn-end task is not running; the fallback timer passes Asks on");
        }
        Ok(())
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        Contribution {
            prompt_section: Some(self.prompt_section()),
            tools: tools::module(self.shared.clone(), tools, run.session_id.clone()),
        }
    }
}
