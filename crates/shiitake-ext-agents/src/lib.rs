//! Conversation agents: the `agents.*` extension, through which one Agent gives
//! another work and answers its questions.
//!
//! - [`extension`]: the extension of one Agent over the host's [`AgentDirectory`],
//!   declared to core's kit (identity `botanical-session-agents`; its grants are its
//!   record's `state`, the `tools` and the `prompt`), and its runtime
//!   ([`ConversationAgents`]). It offers the tools `agents.create`, `agents.send`
//!   (through `LocalSession::send_from`, with a `Sender` naming this Agent and Session,
//!   waiting in-turn for the reply or a question the child asks), `agents.answer` and
//!   `agents.escalate` (through the question extension's `sender` module), and a
//!   prompt section naming the Agents one can reach. When a sender's turn ends, Asks
//!   still waiting on it go to a person. The sender's goal learns of the work it sent
//!   through `shiitake_ext_goal::roster`.
//! - [`record`]: the accepted creates and sends, in the sending Session's state, read
//!   by the Subagents footer ([`RecordSource`]) and by a later send that continues a
//!   Session. It is read-only and grants no relationship or authority; storage is
//!   prepared lazily (the collection appears with its first row).
//!
//! What it does not own: which Agents exist and who may reach whom (the host's
//! directory), the questions and goals themselves (their extensions, reached only
//! through their host APIs), the footer (`shiitake-ext-subagents`), and which
//! extensions an Agent gets (the rosters). `docs/ext-agents.md` is the page.
//!
//! With `default-features = false` only [`contract`] compiles: the wire shapes of the
//! tools and the record, without shiitake-core.

pub mod contract;

#[cfg(feature = "runtime")]
mod directory;
#[cfg(feature = "runtime")]
mod extension;
#[cfg(feature = "runtime")]
mod follow;
#[cfg(feature = "runtime")]
pub mod record;
#[cfg(feature = "runtime")]
mod runtime;
#[cfg(feature = "runtime")]
mod source;
#[cfg(feature = "runtime")]
mod tools;
#[cfg(feature = "runtime")]
mod turns;

#[cfg(feature = "runtime")]
pub use directory::{AgentDirectory, DirectoryError};
#[cfg(feature = "runtime")]
pub use extension::{ConversationAgents, extension};
#[cfg(feature = "runtime")]
pub use source::RecordSource;
