//! The browser App bridge (`Knapsack.ui`): the App open in a person's browser
//! becomes the `ui` module of that Session's runs.
//!
//! **Hosts.** A [`UiBridge`] keeps one browser host per Session. A tab's events
//! stream ([`UiBridge::connect`]) opens it, and so does a run borrowing the
//! module ([`UiBridge::lend`]); it is dropped when neither holds it.
//!
//! **Requests.** `ui.discover` lists the App's live commands and `ui.execute`
//! runs one. Each call is one request, sent to every connected tab as a
//! `request` event. A tab claims it before running it (`POST .../claims`): the
//! first claim wins, every other is refused. The host accepts only the claimer's
//! result for that request (`POST .../results`). One Session has at most one
//! outstanding request:
//!
//! | situation | the run gets |
//! | --- | --- |
//! | a second request while one is outstanding | `browser_busy` |
//! | no tab connected, the last tab left before a claim, or no claim within the claim timeout | `browser_not_connected` (the command did not run) |
//! | the claimer disconnected before answering | `browser_execution_indeterminate` (it may have run) |
//! | the bridge was closed | `browser_closed` |
//! | the command threw | `browser_command_failed` |
//!
//! A run that is cancelled or passes its deadline gives its request up; a later
//! claim or result for it is refused. [`UiBridge::close`] ends every stream;
//! later tab requests are refused ([`Refusal::Closed`], HTTP 410) and later runs
//! fail to borrow.
//!
//! **Transport.** The bridge speaks in [`BrowserEvent`]s, [`ClaimBody`] and
//! [`ResultBody`]; the HTTP routes (`/browser/sessions/<id>/browser/{events,
//! claims,results}`) live in `shiitake-server`, behind its authentication: the
//! bridge authenticates nothing. [`BROWSER_JS`] is the browser side, a
//! dependency-free ES module exporting `connectBrowser({ baseUrl, commands })`.
//!
//! ```
//! # async fn demo() -> Result<(), knapsack::ui::UiError> {
//! use knapsack::ui::{UiBridge, UiError, UiOptions};
//! use shiitake_protocol::SessionId;
//!
//! let bridge = UiBridge::new(UiOptions::default());
//! let session = SessionId::new("s-1").map_err(|e| UiError::Module(e.to_string()))?;
//! let module = bridge.lend(&session)?; // `ui.discover`, `ui.execute` for one run
//! assert_eq!(module.path().as_str(), "ui");
//! assert_eq!(bridge.hosts(), 1);
//! drop(module); // the run ended
//! assert_eq!(bridge.hosts(), 0);
//! # Ok(())
//! # }
//! ```

mod bridge;
mod error;
mod host;
pub mod limits;
mod machine;
mod module;
mod wire;

pub use bridge::{UiBridge, UiOptions};
pub use error::{Refusal, UiError};
pub use host::BrowserStream;
pub use wire::{
    BadId, BrowserEvent, BrowserOutcome, BrowserRequest, BrowserRequestId, ClaimBody, Claimed,
    ConnectionId, Discovered, RequestKind, ResultBody, UiCommand,
};

/// The browser side: an ES module with no dependencies that exports
/// `connectBrowser({ baseUrl, commands, headers?, fetch? })`. A host serves it
/// as `text/javascript` (`shiitake-server` at `/browser/knapsack-ui.js`).
pub const BROWSER_JS: &str = include_str!("browser.js");
