//! The `ui` extension: each run of a Session borrows the browser App bridge's
//! `ui` module.
//!
//! **What it owns.** Nothing but the loan. At the start of every run, the
//! extension asks its [`UiBridge`] to [`lend`](UiBridge::lend) the run's Session
//! the `ui` module (`ui.discover`, `ui.execute`); the run holds it, and with it
//! the Session's browser host, until the run ends and drops its tools. A bridge
//! that was closed lends nothing: the run goes without `ui` (logged at `info`).
//! It is declared on core's extension kit ([`extension`]): it keeps no state, has
//! no commands, and its only grant is `tools`.
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
//!
//! let bridge = UiBridge::default();
//! let agent = shiitake_core::Agent::builder(store, tools, config)
//!     .kit_extension(shiitake_ext_ui::extension(bridge.clone())?)
//!     .open()
//!     .await?;
//! // Mount `bridge` on the server: `ServerConfig::new(token).with_browser(bridge)`.
//! # drop(agent);
//! # Ok(())
//! # }
//! ```

use knapsack::ui::UiBridge;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_protocol::extension_contract;

/// The extension's id.
pub const EXTENSION_ID: &str = "knapsack-ui";
/// The module it lends: the model calls `ui.discover` and `ui.execute`.
pub const NAMESPACE: &str = "ui";

extension_contract! {
    /// The `ui` extension as clients see it: no projection and no commands, only the
    /// run's loan of the bridge's module.
    pub UiContract = EXTENSION_ID, projection ()
}

/// The extension that lends every run `bridge`'s `ui` module; the host mounts the
/// same bridge's routes on its server. Its only grant is `tools`.
pub fn extension(bridge: UiBridge) -> Result<KitExtension<UiContract>, KitError> {
    ExtensionKit::<UiContract>::new(NAMESPACE)?
        .run_tools(move |run, _tools| match bridge.lend(run.session_id) {
            Ok(module) => Some(module),
            Err(error) => {
                tracing::info!(
                    session = %run.session_id,
                    code = error.code(),
                    "this run goes without the ui module: {error}"
                );
                None
            }
        })
        .build()
}

#[cfg(test)]
mod tests {
    use shiitake_core::extension::Grant;

    use super::*;

    #[test]
    fn it_asks_for_tools_and_nothing_else() {
        let ui = extension(UiBridge::default()).expect("the ui extension builds");
        let grants = ui.grants();
        assert!(grants.has(Grant::Tools));
        for grant in [
            Grant::State,
            Grant::Files,
            Grant::Prompt,
            Grant::Projection,
            Grant::Commands,
            Grant::Timers,
            Grant::Admissions,
            Grant::Attention,
        ] {
            assert!(!grants.has(grant), "{grant}");
        }
        assert_eq!(ui.commands().count(), 0);
    }
}
