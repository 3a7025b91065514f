//! An Agent's Sessions for other agents and hosts, over the open protocols through
//! which they delegate work: an MCP server ([`mcp`], Streamable HTTP) and the A2A
//! protocol ([`a2a`], JSON-RPC with SSE). Both work over any [`AgentApi`]
//! and keep what a Session promises: a prompt is accepted work, followed to its end
//! from the durable transcript ([`delegate`]), so a retry, a reconnect or a restart
//! of the host loses nothing and runs nothing twice; a question or an approval waits
//! durably until someone answers it.
//!
//! `shiitake-server` mounts both next to the HTTP API, behind its bearer token.
//! `docs/interop.md` maps each protocol onto Sessions.
//!
//! [`AgentApi`]: shiitake_protocol::AgentApi

pub mod a2a;
pub mod delegate;
pub mod mcp;
pub mod streams;
