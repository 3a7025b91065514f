//! Goal: one objective per Session that keeps the agent working until it is achieved.
//!
//! A person sets a goal (`/goal`, or [`contract::SetGoal`]) or the model creates one
//! (`goal.create`). While it is live, Goal admits one continuation prompt after each
//! run settles, through the accepted-command door with its own correlation; only
//! those runs get the continuation directive, every run gets the quiet goal context
//! (both sections bounded in UTF-8 bytes). The model completes it (`goal.complete`)
//! or blocks it (`goal.block`); both are provisional until the run settles
//! successfully. A failed, cancelled or unresumable turn, a block, three tool-less
//! continuations, or goal turns reaching the host's bound ([`GoalBounds`]: turns, and
//! tokens where the provider reports usage) pause it, with a closed
//! `pauseCause.kind`; a tool-less
//! goal turn while a recorded sub-agent command is live waits on a core timer
//! instead. Goal turns are marked in the projection, so clients show a compact
//! note; an achieved or cleared goal adds one chat line. The rules are in [`state`];
//! `docs/ext-goal.md` is the page.
//!
//! What it does not own: the `agents.*` tools (`shiitake-ext-agents`, which records
//! sub-agent commands through [`roster`]), client rendering and notifications.
//!
//! The host builds it with [`extension`] (core's extension kit) and registers it with
//! `AgentBuilder::kit_extension`, which grants exactly what it declares. Its footer
//! row ([`contract::footer_row`]) reads `Pursuing goal` (a terminal adds ` since
//! 14:02`) or `Goal paused (/goal resume)` with a *Resume* button.
//!
//! With `default-features = false` only [`contract`] compiles: what a client needs,
//! without shiitake-core.

pub mod contract;

#[cfg(feature = "runtime")]
mod catalog;
#[cfg(feature = "runtime")]
mod extension;
#[cfg(feature = "runtime")]
pub mod flow;
#[cfg(feature = "runtime")]
mod migrate;
#[cfg(feature = "runtime")]
pub mod roster;
#[cfg(feature = "runtime")]
pub mod state;
#[cfg(feature = "runtime")]
mod store;
#[cfg(feature = "runtime")]
pub mod text;
#[cfg(feature = "runtime")]
mod tools;

#[cfg(feature = "runtime")]
pub use extension::{extension, extension_id, extension_with};
#[cfg(feature = "runtime")]
pub use state::GoalBounds;
#[cfg(feature = "runtime")]
pub use tools::GoalRun;
