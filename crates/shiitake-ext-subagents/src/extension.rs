//! The extension on shiitake-core: the projection (rows kept in memory), `/agents`,
//! and the observation signal that wakes the refresher.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use shiitake_core::clock::Clock;
use shiitake_core::extension::{
    Extension, ExtensionDefinition, Grant, Grants, HookError, StateView, Tx,
};
use shiitake_protocol::catalog::{Catalog, CatalogCommand, CatalogFormat, CatalogScope};
use shiitake_protocol::extension::ContractCommand;
use shiitake_protocol::{ExtensionId, SessionId};
use tokio::sync::Notify;

use crate::contract::{ChildRow, EXTENSION_ID, FooterView, NAMESPACE, ToggleRows, Toggled};
use crate::refresh::Refresher;
use crate::source::SubagentsSource;
use crate::state::{self, Tracking};

/// Exactly what the host grants Subagents: the footer (`projection`) and `/agents`
/// (`commands`). It has no state, tools, prompt or timers.
pub fn subagents_grants() -> Grants {
    Grants::none().with(Grant::Projection).with(Grant::Commands)
}

/// Why the extension could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SubagentsError {
    /// The extension id does not satisfy the protocol's identifier rules.
    #[error("extension id: {0}")]
    Identity(#[from] shiitake_protocol::BoundError),
}

/// One Session's footer as kept in memory.
#[derive(Clone, Debug, Default)]
pub(crate) struct Footer {
    pub(crate) collapsed: bool,
    pub(crate) rows: Vec<ChildRow>,
    pub(crate) more: u32,
    pub(crate) tracking: Tracking,
    /// Show it again without reading (after `/agents`).
    pub(crate) republish: bool,
}

impl Footer {
    fn view(&self) -> Option<FooterView> {
        if self.rows.is_empty() && self.more == 0 {
            return None;
        }
        Some(FooterView {
            collapsed: self.collapsed,
            rows: if self.collapsed {
                Vec::new()
            } else {
                self.rows.clone()
            },
            summary: state::summary(&self.rows),
            more: self.more,
            refreshed_at: self.tracking.refreshed_at,
        })
    }
}

/// What the extension and its refresher share.
pub(crate) struct Shared {
    pub(crate) source: Arc<dyn SubagentsSource>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) footers: Mutex<HashMap<SessionId, Footer>>,
    /// Woken when a Session was read or toggled, so the refresher looks again.
    pub(crate) wake: Notify,
}

impl Shared {
    pub(crate) fn footers(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Footer>> {
        self.footers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Subagents: one footer row per Agent a Session sent work to or created.
///
/// The rows live in memory only; the [`Refresher`] (a task the host runs with
/// [`SubagentsExtension::refresher`]) reads them through the host's
/// [`SubagentsSource`] when a watcher reads the Session, and polls while a child works
/// or waits.
pub struct SubagentsExtension {
    definition: ExtensionDefinition,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SubagentsExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentsExtension")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl SubagentsExtension {
    /// The extension over the host's `source`, timed by `clock` (the Agent's clock).
    pub fn new(
        source: Arc<dyn SubagentsSource>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, SubagentsError> {
        Ok(Self {
            definition: ExtensionDefinition {
                id: extension_id()?,
                namespace: NAMESPACE.into(),
                scopes: Vec::new(),
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
            shared: Arc::new(Shared {
                source,
                clock,
                footers: Mutex::new(HashMap::new()),
                wake: Notify::new(),
            }),
        })
    }

    /// A handle the host keeps to say that a Session's children changed (it sent work
    /// to an Agent, or created one), so its rows are read again at once.
    pub fn handle(&self) -> SubagentsHandle {
        SubagentsHandle {
            shared: self.shared.clone(),
        }
    }

    /// The task that reads the rows; the host runs it with the Agent this extension
    /// is added to ([`Refresher::spawn`]) and aborts it when the Agent closes.
    pub fn refresher(&self) -> Refresher {
        Refresher::new(self.shared.clone())
    }
}

/// Tells Subagents that a Session's children changed; cheap to clone.
#[derive(Clone)]
pub struct SubagentsHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SubagentsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentsHandle").finish_non_exhaustive()
    }
}

impl SubagentsHandle {
    /// The Session sent work to or created an Agent: read its rows again now,
    /// however fresh they are, and show them to its watchers.
    pub fn children_changed(&self, session_id: &SessionId) {
        self.shared
            .footers()
            .entry(session_id.clone())
            .or_default()
            .tracking
            .wanted = true;
        self.shared.wake.notify_one();
    }
}

/// The extension's id as core takes it.
pub fn extension_id() -> Result<ExtensionId, shiitake_protocol::BoundError> {
    ExtensionId::new(EXTENSION_ID)
}

impl Extension for SubagentsExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    /// `toggle` (`/agents`): collapses or expands this Session's rows, in memory.
    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        if command != ToggleRows::NAME {
            return Err(HookError::UnknownCommand(command.to_owned()));
        }
        let mut input = input;
        if let Some(map) = input.as_object_mut() {
            map.remove("requestId");
        }
        let toggle: ToggleRows = serde_json::from_value(input)
            .map_err(|error| HookError::Invalid(format!("toggle: {error}")))?;
        let session_id = tx
            .session_id()
            .cloned()
            .ok_or_else(|| HookError::Invalid("/agents acts on a Session".into()))?;
        let collapsed = {
            let mut footers = self.shared.footers();
            let footer = footers.entry(session_id).or_default();
            footer.collapsed = toggle.collapsed.unwrap_or(!footer.collapsed);
            footer.republish = true;
            footer.collapsed
        };
        self.shared.wake.notify_one();
        Ok(json!(Toggled { collapsed }))
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let session_id = state.session_id()?;
        let view = self.shared.footers().get(session_id)?.view()?;
        serde_json::to_value(view).ok()
    }

    fn on_observed(&self, session_id: &SessionId) {
        let now = self.shared.clock.now_ms();
        let wanted = {
            let mut footers = self.shared.footers();
            let footer = footers.entry(session_id.clone()).or_default();
            footer.tracking.observed(now);
            footer.tracking.wanted
        };
        if wanted {
            self.shared.wake.notify_one();
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(Catalog {
            format: CatalogFormat::V1,
            extension_id: self.definition.id.clone(),
            commands: vec![CatalogCommand {
                name: "agents".into(),
                summary: "Collapse the sub-agent rows to one summary row, or expand them".into(),
                scope: CatalogScope::Session,
                call: ToggleRows::NAME.into(),
                arguments: Vec::new(),
                steps: Vec::new(),
                flow: None,
            }],
        })
    }
}
