//! Approval's fixture on the extension test kit: a host tool with a side effect that
//! must happen at most once (`notes.write`, not replay-safe, appending a line to a file),
//! a read-only one (`notes.read`, replay-safe), the Agent with the approval extension,
//! and the waiting approvals of the projection.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

mod notes;

use serde_json::json;
use shiitake_ext_approval::contract::{ApprovalContract, ApprovalView};
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_ext_testkit::projection;
use shiitake_model::Turn;
use shiitake_protocol::SessionApi;

pub use notes::{catalog, notes};
pub use shiitake_ext_testkit::tool_texts;

/// The tests' policy: ask before every tool not marked safe to repeat.
pub fn ask_policy() -> Policy {
    Policy::new(Ruling::Ask)
}

/// The model writes `text` with `notes.write`, then says `then`.
pub fn write_then(text: &str, then: &str) -> Vec<Turn> {
    vec![
        Turn::tool_call("notes__write", json!({"text": text})),
        Turn::text(then),
    ]
}

/// The waiting approvals of the Session, as the projection shows them.
pub async fn waiting(session: &impl SessionApi) -> Vec<ApprovalView> {
    projection::read::<ApprovalContract>(session)
        .await
        .unwrap_or_default()
        .approvals
}

/// Follows the Session until `count` approvals wait, and returns them.
pub async fn until_waiting(session: &impl SessionApi, count: usize) -> Vec<ApprovalView> {
    projection::until::<ApprovalContract>(session, |p| p.approvals.len() == count)
        .await
        .approvals
}
