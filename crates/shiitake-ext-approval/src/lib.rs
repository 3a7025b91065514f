//! Approval: a person decides before a tool with side effects runs, durably.
//!
//! The host gives a [`policy::Policy`]: per tool name or pattern (`files__apply_patch`,
//! `env__mcp__notes__*`, `env__computers__*`) allow, ask or deny; tools marked safe to
//! repeat (read-only ones) default to allow, every other tool to the host's default.
//! The extension is core's tool gate ([`extension`], on the kit's `tool_gate`): when the
//! model calls a tool the policy asks about, the call is recorded and the Session shows
//! attention `needs_you` with the tool, its arguments (bounded, secrets never shown:
//! [`preview`]) and why it asks. The call waits in-turn like a live Ask, and parks after
//! the same bounds, when a steer arrives, or when its run ends.
//!
//! A person answers through the contract ([`contract::ApprovalContract`]: `list`,
//! `answer` with a `requestId`), the `/approve` catalog flow, or the footer row's
//! *Answer* button: allow once, allow for this Session (kept in the extension's state),
//! or deny with an optional reason the model reads as the tool's error result. A
//! parked call's answer reaches the model as one follow-up prompt; an allow-once then
//! lets the model's next identical call run once.
//!
//! Crash safety comes from core's gate and the kit: the decision is committed before
//! the call runs, the start of an allowed call is committed before it runs, an
//! approved call that had not started runs exactly once after a restart, a call that
//! started but whose result was not committed is "outcome unknown" and never runs
//! again, a denied one never runs. The rules are in [`state`]; `docs/ext-approval.md`
//! is the page.
//!
//! With `default-features = false` only the client's side compiles ([`contract`],
//! [`policy`], [`preview`], [`state`], [`flow`], [`fingerprint`]), without shiitake-core.

pub mod command;
pub mod contract;
pub mod fingerprint;
pub mod flow;
pub mod policy;
pub mod preview;
mod ruling;
pub mod shell;
pub mod state;
mod text;

#[cfg(feature = "runtime")]
mod catalog;
#[cfg(feature = "runtime")]
mod extension;
#[cfg(feature = "runtime")]
mod store;

#[cfg(feature = "runtime")]
pub use extension::{extension, extension_id};
