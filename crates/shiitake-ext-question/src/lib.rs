//! Ask: the model asks a person, or the Agent that sent the work, to decide.
//!
//! The model calls `question.ask` with one to four decision questions. By default
//! the call waits in-turn for the answer (at most ten minutes, leaving a minute of
//! the call's deadline); `mode: "continue"`, a steer, or a wait that runs out parks
//! the Ask, and its answer arrives later as one self-contained follow-up prompt.
//! People answer or decline through the contract ([`contract::QuestionContract`]:
//! `list`, `answer`, `decline`, each with a `requestId`) or the `/answer` catalog
//! flow; an open Ask raises attention, so the Session's inbox state is `needs_you`.
//! Optional `onExpire` stops the model or proceeds with the recommended (first)
//! options. When the host turns on [`QuestionConfig::waits_on_sender`] and the run's
//! work was sent by another Agent, an Ask waits on that Agent first ([`sender`]).
//!
//! Delivery is exactly once: the waiter, the person and the expiry timer share one
//! transition; an in-turn answer keeps its receipt until the tool outcome is
//! committed, and otherwise goes once as a follow-up when the run settles (not when
//! it was cancelled). The rules are in [`state`]; `docs/ext-question.md` is the page.
//!
//! The host builds it with [`extension`] (core's extension kit) and registers it with
//! `AgentBuilder::kit_extension`, which grants exactly what it declares. Each open Ask
//! is a footer row ([`contract::footer_rows`]): its first question, and `/answer` with
//! an *Answer* button when a person is asked.
//!
//! What it does not own: the `agents.*` tools (`shiitake-ext-agents`),
//! client cards and notifications.
//!
//! With `default-features = false` only [`contract`] and [`validate`] compile: what a
//! client needs, without shiitake-core.

pub mod contract;
mod labels;
pub mod reply;
pub mod validate;

#[cfg(feature = "runtime")]
mod catalog;
#[cfg(feature = "runtime")]
mod closed;
#[cfg(feature = "runtime")]
mod extension;
#[cfg(feature = "runtime")]
pub mod flow;
#[cfg(feature = "runtime")]
pub mod sender;
#[cfg(feature = "runtime")]
pub mod state;
#[cfg(feature = "runtime")]
mod store;
#[cfg(feature = "runtime")]
mod text;
#[cfg(feature = "runtime")]
mod tools;

#[cfg(feature = "runtime")]
pub use extension::{QuestionConfig, extension, extension_id};
#[cfg(feature = "runtime")]
pub use tools::AskRun;
