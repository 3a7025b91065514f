//! The durable Shiitake Agent.
//!
//! An [`Agent`] is a durable store of Sessions. Each live Session has one owner
//! task that serialises its changes: it applies a change to a copy of its state,
//! commits it through the [`Store`](store::Store), and only then answers and
//! publishes. Accepted prompts queue as work; the runner takes one prompt per
//! run, streams the model, has every completed message committed, executes
//! tool calls through the capabilities execute door, and ends with a terminal.
//! When an Agent opens, work that was running resumes from the last committed
//! message; a tool call without a committed result runs again only when its
//! operation is replay-safe.
//!
//! The Agent implements [`AgentApi`](shiitake_protocol::AgentApi) and its
//! Sessions [`SessionApi`](shiitake_protocol::SessionApi), the same traits the
//! HTTP client implements, so code written against them runs on either.
//!
//! What core does not own: any one extension's rules, model providers
//! (`shiitake-model`), tools (`shiitake-capabilities`, `knapsack`), HTTP, and any
//! database: the [`Store`](store::Store) is implemented by `shiitake-store-sqlite`
//! (the embedded default) and `shiitake-store-postgres` (the Hub).

mod agent;
mod agent_core;
pub mod backoff;
pub mod clock;
pub mod config;
pub mod cursor;
mod error;
pub mod extension;
pub mod ids;
pub mod inbox;
pub mod offer;
mod owner;
mod owner_task;
pub mod quiet;
mod runner;
mod session;
mod shared;
pub mod spans;
pub mod store;
mod store_waits;
pub mod telemetry;
mod timers;
mod tool_list;

pub use agent::{Agent, AgentBuilder};
pub use config::{AgentConfig, FixedModel, ModelResolver, RetryPolicy, SpecResolver};
pub use offer::{OfferedTools, ToolSelector, ToolSet, ToolSetError};
pub use session::LocalSession;
