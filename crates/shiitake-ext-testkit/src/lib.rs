//! A test kit for Shiitake extensions: what every extension's behaviour tests need,
//! written once.
//!
//! **What it owns.** What an extension test does again and again:
//!
//! - a real [`Agent`](shiitake_core::Agent) on a temporary SQLite file with the
//!   scripted model and the extensions the test registers ([`TestAgent`]), reopened on
//!   the same file for restart tests;
//! - a clock the test moves ([`paused_clock`]), so timers fire without sleeping;
//! - one run of the scripted model and what it committed: each tool result and the
//!   final assistant message ([`run`], [`call_tool`]);
//! - the extension's projection decoded through its contract, read once
//!   ([`projection::read`]) or awaited until a predicate holds ([`projection::until`]);
//! - for client tests, an extension with a footer row of a kind no client knows
//!   ([`sample::weather`]);
//! - a host tool with a side effect that counts its runs, for tests of what decides
//!   whether a call runs ([`side_effect::counted`]).
//!
//! ```no_run
//! # async fn example(extension: impl shiitake_core::extension::Extension) {
//! use serde_json::json;
//! use shiitake_core::extension::Grants;
//! use shiitake_ext_testkit::{TestAgent, call_tool, run};
//!
//! let kit = TestAgent::builder()
//!     .turns(call_tool("counter__add", json!({"by": 2})))
//!     .extension(extension, Grants::all())
//!     .open()
//!     .await;
//! let session = kit.session().await;
//! let outcome = run(&session, "add two").await;
//! assert_eq!(outcome.tool_results[0].ok(), &json!(2));
//! # }
//! ```
//!
//! **What it does not own.** Anything about one extension: its fixtures, its commands
//! and its contract live in that extension's `tests/support/`. The kit is test support
//! and is not published.

mod agent;
pub mod projection;
mod run;
pub mod sample;
pub mod side_effect;
mod sqlite;

pub use agent::{START, TestAgent, TestAgentBuilder, fast_retry, paused_clock};
pub use run::{
    RunOutcome, ToolOutput, call_tool, inbox_state, run, system_prompts, tool_names, tool_texts,
    tool_values, until_idle, user_texts,
};
pub use sqlite::{connect, timers_of};

/// The longest any wait of the kit takes before the test fails.
pub use shiitake_conformance::support::PATIENCE;
