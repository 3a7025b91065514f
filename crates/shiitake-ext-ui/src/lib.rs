//! The `ui` extension: each run of a Session borrows the browser App bridge's
//! `ui` module.
//!
//! **What it owns.** Nothing but the loan. At the start of every run,
//! [`UiExtension`] asks its [`UiBridge`] to [`lend`](UiBridge::lend) the run's
//! Session the `ui` module (`ui.discover`, `ui.execute`); the run holds it, and
//! with it the Session's browser host, until the run ends and drops its tools. A
//! bridge that was closed lends nothing: the run goes without `ui` (logged at
//! `info`). The extension keeps no state and needs only the `tools` grant.
//!
//! **What it does not own.** The bridge's rules (`knapsack::ui`), its HTTP
//! routes (`shiitake-server`, [`ServerConfig::with_browser`]) and the App in the
//! browser (`connectBrowser`, served at `/browser/knapsack-ui.js`).
//!
//! [`ServerConfig::with_browser`]: https://docs.rs/shiitake-server
//!
//! ```no_run
//! # async fn demo(
//! #     store: std::sync::Arc<dyn shiitake_core::store::Store>,
//! #     tools: std::sync::Arc<shiitake_capabilities::Catalog>,
//! #     config: shiitake_core::AgentConfig,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! use knapsack::ui::UiBridge;
//! use shiitake_ext_ui::UiExtension;
//!
//! let bridge = UiBridge::default();
//! let agent = shiitake_core::Agent::builder(store, tools, config)
//!     .extension(UiExtension::new(bridge.clone())?, UiExtension::grants())
//!     .open()
//!     .await?;
//! // Mount `bridge` on the server: `ServerConfig::new(token).with_browser(bridge)`.
//! # drop(agent);
//! # Ok(())
//! # }
//! ```

use knapsack::ui::UiBridge;
use serde_json::json;
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, Grant, Grants, RunContext,
};
use shiitake_protocol::{BoundError, ExtensionId};

/// Lends every run the `ui` module of one [`UiBridge`].
pub struct UiExtension {
    bridge: UiBridge,
    definition: ExtensionDefinition,
}

impl std::fmt::Debug for UiExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiExtension")
            .field("id", &self.definition.id)
            .field("bridge", &self.bridge)
            .finish()
    }
}

impl UiExtension {
    /// The extension's id.
    pub const ID: &'static str = "knapsack-ui";

    /// An extension that lends runs `bridge`'s module; the host mounts the same
    /// bridge's routes on its server. (The id is a constant; the `Result` is the
    /// id grammar's.)
    pub fn new(bridge: UiBridge) -> Result<Self, BoundError> {
        Ok(Self {
            bridge,
            definition: ExtensionDefinition {
                id: ExtensionId::new(Self::ID)?,
                namespace: "ui".to_owned(),
                scopes: Vec::new(),
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
        })
    }

    /// The grants it needs: `tools`, nothing else.
    pub fn grants() -> Grants {
        Grants::none().with(Grant::Tools)
    }

    /// The bridge it lends from.
    pub fn bridge(&self) -> &UiBridge {
        &self.bridge
    }
}

impl Extension for UiExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn contribute(&self, run: &RunContext<'_>, _tools: ToolTx) -> Contribution {
        match self.bridge.lend(run.session_id) {
            Ok(module) => Contribution {
                tools: Some(module),
                ..Contribution::default()
            },
            Err(error) => {
                tracing::info!(
                    session = %run.session_id,
                    code = error.code(),
                    "this run goes without the ui module: {error}"
                );
                Contribution::default()
            }
        }
    }
}
