//! When rows are read, on a paused clock: on a read of the parent when they are at
//! least a second old, and every five seconds while a child works, until nobody has
//! read the parent for thirty seconds; a watcher that keeps receiving them keeps them
//! polling.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use futures::StreamExt;
use shiitake_conformance::support::*;
use shiitake_core::LocalSession;
use shiitake_ext_subagents::contract::{POLL_EVERY_MS, QUIET_AFTER_MS, REFRESH_AFTER_MS};
use shiitake_protocol::*;

/// Lets the refresher act on what just happened, then says how many reads it made.
async fn settle(parent: &Parent) -> usize {
    tokio::time::sleep(Duration::from_millis(150)).await;
    parent.source.reads()
}

async fn read(session: &impl SessionApi) {
    session.read(ReadOptions::default()).await.unwrap();
}

fn ms(value: u64) -> Duration {
    Duration::from_millis(value)
}

/// A parent Agent and one of its Sessions whose one child, in the Agent `working`,
/// has work running (its model never answers).
async fn parent_of_a_working_child(dir: &tempfile::TempDir) -> (Parent, LocalSession) {
    let parent = parent(dir).await;
    let working = child(dir, "working", vec![busy()]).await;
    let child_session = new_session(&working).await;
    send(&child_session, "Build it").await;
    parent.source.add_agent("working", &working);
    let session = new_session(&parent.agent).await;
    parent
        .source
        .add_child(session.session_id(), "working", child_session.session_id());
    (parent, session)
}

#[tokio::test]
async fn a_read_refreshes_rows_only_when_they_are_a_second_old() {
    let dir = tempfile::tempdir().unwrap();
    let parent = parent(&dir).await;
    let session = new_session(&parent.agent).await;
    assert_eq!(settle(&parent).await, 0, "nobody read it yet");
    read(&session).await;
    eventually(|| parent.source.reads() == 1).await;
    read(&session).await;
    parent.clock.advance(ms(REFRESH_AFTER_MS - 1));
    read(&session).await;
    assert_eq!(
        settle(&parent).await,
        1,
        "rows under a second old are shown as they are"
    );
    parent.clock.advance(ms(1));
    read(&session).await;
    eventually(|| parent.source.reads() == 2).await;
    // Idle rows (no child here) never poll.
    parent.clock.advance(ms(10 * POLL_EVERY_MS));
    assert_eq!(settle(&parent).await, 2);
    parent.refresher.abort();
}

#[tokio::test]
async fn a_working_child_polls_every_five_seconds_until_thirty_quiet_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, session) = parent_of_a_working_child(&dir).await;
    read(&session).await;
    eventually(|| parent.source.reads() == 1).await;
    let mut reads = 1;
    // Polls at 5, 10, 15, 20 and 25 s after the read; not at 30 s.
    for step in 1..=(QUIET_AFTER_MS / POLL_EVERY_MS) {
        parent.clock.advance(ms(POLL_EVERY_MS - 1));
        assert_eq!(
            settle(&parent).await,
            reads,
            "not before five seconds (step {step})"
        );
        parent.clock.advance(ms(1));
        if step * POLL_EVERY_MS < QUIET_AFTER_MS {
            reads += 1;
            eventually(|| parent.source.reads() == reads).await;
        } else {
            assert_eq!(
                settle(&parent).await,
                reads,
                "quiet for thirty seconds: no poll"
            );
        }
    }
    parent.clock.advance(ms(10 * POLL_EVERY_MS));
    assert_eq!(settle(&parent).await, reads);
    // A read starts it again.
    read(&session).await;
    eventually(|| parent.source.reads() == reads + 1).await;
    parent.refresher.abort();
}

#[tokio::test]
async fn a_watcher_receiving_the_rows_keeps_a_working_child_polled() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, session) = parent_of_a_working_child(&dir).await;
    let watch = session.watch(WatchOptions::default()).await.unwrap();
    eventually(|| parent.source.reads() == 1).await;
    for polls in 1..=((2 * QUIET_AFTER_MS) / POLL_EVERY_MS) as usize {
        parent.clock.advance(ms(POLL_EVERY_MS));
        eventually(|| parent.source.reads() == 1 + polls).await;
    }
    drop(watch);
    parent.refresher.abort();
}

#[tokio::test]
async fn a_session_that_reached_nobody_gets_no_frame_until_it_has_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let parent = parent(&dir).await;
    let idle = child(&dir, "idle", vec![]).await;
    let child_session = new_session(&idle).await;
    parent.source.add_agent("idle", &idle);
    let session = new_session(&parent.agent).await;
    let watch = session.watch(WatchOptions::default()).await.unwrap();
    let mut changes = watch.changes;
    eventually(|| parent.source.reads() == 1).await;
    settle(&parent).await;
    assert!(
        tokio::time::timeout(ms(300), changes.next()).await.is_err(),
        "nothing to show: the watcher gets no frame"
    );
    parent
        .source
        .add_child(session.session_id(), "idle", child_session.session_id());
    parent.clock.advance(ms(REFRESH_AFTER_MS));
    read(&session).await;
    let frame = tokio::time::timeout(ms(5_000), changes.next())
        .await
        .expect("the rows are shown")
        .unwrap()
        .unwrap();
    let SessionFrame::Update(update) = frame else {
        panic!("an update, got {frame:?}")
    };
    assert_eq!(footer(&update.extensions).unwrap().rows.len(), 1);
    parent.refresher.abort();
}
