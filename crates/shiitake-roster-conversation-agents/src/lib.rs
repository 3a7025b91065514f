//! The shared Local/Hub conversation-Agent composition.
//!
//! - [`add_shared_set`]: the shared extension set (questions, goals, loops, plans,
//!   Almanac, skills), each with exactly its grants. Whether an Ask
//!   waits on the Agent that sent the work first is the host's choice
//!   ([`SharedSet::waits_on_sender`]: Local yes, Hub no).
//! - [`ConversationAgents`]: one Agent's `agents.*` tools over the host's
//!   [`AgentDirectory`]: `agents.create`, `agents.send` (through
//!   `LocalSession::send_from`, with a `Sender` naming this Agent and Session, waiting
//!   in-turn for the reply or a question the child asks), `agents.answer` and
//!   `agents.escalate` (through the question extension's `sender` module). When a
//!   sender's turn ends, Asks still waiting on it go to a person.
//! - The record of accepted creates and sends, in the sending Session's state, for the
//!   Subagents footer ([`RecordSource`]). It is read-only and grants no relationship
//!   or authority; storage is prepared lazily (the collection appears with its first
//!   row).
//!
//! What it does not own: which Agents exist and who may reach whom (the host's
//! directory), Home and Subagents composition (the Local and Hub rosters), any
//! extension's rules. `docs/roster.md` is the page.

pub mod contract;
mod directory;
mod extension;
mod follow;
pub mod record;
mod runtime;
mod shared_set;
mod source;
mod tools;
mod turns;

pub use directory::{AgentDirectory, DirectoryError};
pub use extension::{ConversationAgentsExtension, agents_grants};
pub use runtime::ConversationAgents;
pub use shared_set::{SharedSet, SharedSetError, add_shared_set};
pub use source::RecordSource;
