//! Timers on an injected clock: a paused clock fires a timer exactly when moved to
//! its due time, and a clock that moves between two readings cannot break the
//! scheduler (it reads the clock once per pass).

#![allow(clippy::unwrap_used)]

use crate::support::harness;
use crate::support::probe;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::clock::{Clock, ManualClock, Sleep, SystemClock};
use shiitake_core::extension::Grants;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::*;

const START: u64 = 1_795_996_800_000; // 2026-11-30T00:00:00Z, a Monday

fn model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(Script::new(vec![])))
}

async fn fired(session: &shiitake_core::LocalSession) -> i64 {
    match session
        .read(ReadOptions::default())
        .await
        .unwrap()
        .extensions
        .get(&probe::id())
    {
        Some(ExtensionSlotV0::Running { value }) => value["fired"].as_i64().unwrap_or(0),
        other => panic!("no probe slot: {other:?}"),
    }
}

/// Waits (in real time, briefly) until the probe counted `count` firings.
async fn until_fired(session: &shiitake_core::LocalSession, count: i64) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while fired(session).await < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never fired {count}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_paused_clock_fires_a_timer_only_when_moved_to_its_due_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    let mut config = harness::config(model());
    config.clock = clock.clone();
    let agent = probe::agent_with(
        &dir.path().join("agent.db"),
        config,
        probe::Probe::new(),
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    let hour = 60 * 60 * 1000;
    session
        .call_extension(&probe::id(), "timer", json!({"afterMs": hour}))
        .await
        .unwrap();
    // One millisecond early: the scheduler wakes (the clock moved) and sleeps again.
    clock.advance(Duration::from_millis(hour - 1));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(fired(&session).await, 0, "not due one millisecond early");
    clock.advance(Duration::from_millis(1));
    until_fired(&session, 1).await;
    // Much later, still once: a one-shot timer was deleted by its claim.
    clock.advance(Duration::from_secs(7 * 24 * 60 * 60));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(fired(&session).await, 1);
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_cron_cadence_on_a_paused_clock_fires_once_per_occurrence_reached() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    let mut config = harness::config(model());
    config.clock = clock.clone();
    let agent = probe::agent_with(
        &dir.path().join("agent.db"),
        config,
        probe::Probe::new(),
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    // Mondays at 09:00 UTC.
    session
        .call_extension(&probe::id(), "cron", json!({"expression": "0 9 * * 1"}))
        .await
        .unwrap();
    clock.set(START + 9 * 60 * 60 * 1000 - 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(fired(&session).await, 0);
    clock.advance(Duration::from_millis(1));
    until_fired(&session, 1).await;
    // Three weeks pass while nothing runs the clock forward step by step: the overdue
    // occurrence fires once and the cadence moves to the next Monday after now.
    clock.advance(Duration::from_secs(3 * 7 * 24 * 60 * 60));
    until_fired(&session, 2).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(fired(&session).await, 2);
    agent.close().await.unwrap();
}

/// A clock that moves forward every time it is read, as a busy machine's does.
struct Ticking {
    now: AtomicU64,
    step: u64,
}

impl Clock for Ticking {
    fn now_ms(&self) -> u64 {
        self.now.fetch_add(self.step, Ordering::SeqCst) + self.step
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        let wait = at_ms.saturating_sub(self.now.load(Ordering::SeqCst));
        Box::pin(tokio::time::sleep(Duration::from_millis(wait.min(5))))
    }
}

#[tokio::test]
async fn a_clock_that_moves_between_readings_does_not_break_the_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = harness::config(model());
    // Every reading is 25 ms after the last: a second reading would pass a due time
    // the first one had not reached (the old `due_at - now` underflowed there).
    config.clock = Arc::new(Ticking {
        now: AtomicU64::new(SystemClock.now_ms()),
        step: 25,
    });
    let agent = probe::agent_with(
        &dir.path().join("agent.db"),
        config,
        probe::Probe::new(),
        Grants::all(),
    )
    .await;
    let session = new_session(&agent).await;
    for n in 1..=5 {
        session
            .call_extension(&probe::id(), "timer", json!({"afterMs": 30}))
            .await
            .unwrap();
        until_fired(&session, n).await;
    }
    agent.close().await.unwrap();
}
