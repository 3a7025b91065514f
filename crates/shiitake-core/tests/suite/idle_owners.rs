//! Owners of idle Sessions leave memory after a quiet period and come back on demand.

#![allow(clippy::unwrap_used)] // test support code outside #[test] functions

use crate::support::harness;

use std::sync::Arc;
use std::time::Duration;

use shiitake_conformance::support::*;
use shiitake_conformance::{Fixture, TestTools};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;

#[tokio::test]
async fn idle_owners_are_dropped_and_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("hi")])));
    let mut config = harness::config(model);
    config.owner_idle = Duration::from_millis(100);
    let agent = harness::open(
        &dir.path().join("agent.db"),
        Arc::new(TestTools::default()),
        config,
    )
    .await;

    let session = new_session(&agent).await;
    let command = send(&session, "hello").await;
    terminal_of(&session, &command).await;
    assert_eq!(agent.live_sessions(), 1);
    eventually(|| agent.live_sessions() == 0).await;

    // A call after the owner left loads the Session again, history intact.
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: hello", "assistant: hi"]
    );
    assert_eq!(agent.live_sessions(), 1);
}

#[tokio::test]
async fn a_subscriber_keeps_its_owner_alive() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let mut config = harness::config(model);
    config.owner_idle = Duration::from_millis(50);
    let agent = harness::open(
        &dir.path().join("agent.db"),
        Arc::new(TestTools::default()),
        config,
    )
    .await;
    let session = new_session(&agent).await;
    let frames = session
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(agent.live_sessions(), 1, "an owner with a subscriber stays");
    drop(frames);
    eventually(|| agent.live_sessions() == 0).await;
}

#[tokio::test]
async fn the_harness_fixture_starts_clean() {
    let fixture = harness::Local::start(Script::new(vec![])).await;
    assert_eq!(fixture.agent().live_sessions(), 0);
}
