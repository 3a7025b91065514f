//! The shared Local/Hub conversation-Agent composition: which extensions an Agent gets,
//! each with exactly its grants.
//!
//! - [`add_shared_set`]: the shared extension set (questions, goals, loops, plans,
//!   Almanac, skills). Whether an Ask waits on the Agent that sent the work first is
//!   the host's choice ([`SharedSet::waits_on_sender`]: Local yes, Hub no).
//! - [`add_conversation_agents`]: the `agents.*` extension (`shiitake-ext-agents`)
//!   over the host's [`AgentDirectory`], and the Subagents footer
//!   (`shiitake-ext-subagents`) reading its record, wired to each other; their tasks
//!   start once the Agent is open ([`ConversationTasks::start`]).
//!
//! What it does not own: any extension's rules (each lives in its `shiitake-ext-*`
//! crate), which Agents exist and who may reach whom (the host's directory), Home and
//! the store (the Local and Hub rosters). `docs/roster.md` is the page.

mod conversation;
mod shared_set;

pub use conversation::{ConversationError, ConversationTasks, add_conversation_agents};
pub use shared_set::{SharedSet, SharedSetError, add_shared_set};
/// The host's directory, which [`add_conversation_agents`] takes; from
/// `shiitake-ext-agents`, so a host composing with this crate need not name it.
pub use shiitake_ext_agents::{AgentDirectory, DirectoryError};
