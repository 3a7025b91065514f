//! Snapshots list the first waiting prompts, bounded, with `hasMore`.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use shiitake_conformance::Fixture;
use shiitake_conformance::support::*;
use shiitake_model::{Script, Step, Turn};
use shiitake_protocol::*;

#[tokio::test]
async fn the_pending_view_is_bounded_at_its_edge() {
    let slow = Turn::new(vec![Step::DelayMs(20_000), Step::Text("late".into())]);
    let fixture = harness::Local::start(Script::new(vec![slow])).await;
    let session = new_session(fixture.agent()).await;
    send(&session, "running").await;
    // The documented default (docs/core.md), which the harness keeps.
    let limit = 20;
    let model = std::sync::Arc::new(shiitake_model::ScriptedModel::new(Script::new(vec![])));
    assert_eq!(harness::config(model).pending_view_limit, limit);
    let mut waiting = Vec::new();
    for n in 0..limit {
        waiting.push(send(&session, &format!("waiting {n}")).await);
    }
    let at_limit = session.read(ReadOptions::default()).await.unwrap().pending;
    assert_eq!(at_limit.prompts.len(), limit);
    assert!(!at_limit.has_more, "exactly the limit: nothing more");
    waiting.push(send(&session, "one more").await);
    let past_limit = session.read(ReadOptions::default()).await.unwrap().pending;
    assert_eq!(past_limit.prompts.len(), limit);
    assert!(past_limit.has_more);
    let listed: Vec<_> = past_limit
        .prompts
        .iter()
        .map(|p| p.command_id.clone())
        .collect();
    assert_eq!(listed, waiting[..limit], "acceptance order, oldest first");
    session.abort().await.unwrap();
}
