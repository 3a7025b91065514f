//! A self-paced loop of three occurrences that ends when the model omits
//! `loop.schedule_next`, on a paused clock; `schedule_next` outside the loop's own
//! run is refused.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::*;
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_ext_loop::contract::*;
use shiitake_model::Turn;
use shiitake_protocol::AgentApi;
use shiitake_protocol::extension::bind_session_extension;

#[tokio::test]
async fn three_occurrences_then_the_loop_ends_without_schedule_next() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(MONDAY);
    let next = || Turn::tool_call("loop__schedule_next", json!({"delaySeconds": 60}));
    let (agent, _model) = open(
        &db(&dir),
        &clock,
        vec![
            next(),
            Turn::text("first"),
            next(),
            Turn::text("second"),
            Turn::text("third, and that is enough"),
            // A person's run asks for a next occurrence: refused.
            next(),
            Turn::text("ok"),
        ],
    )
    .await;
    let session = new_session(&agent).await;
    let started = bind_session_extension::<_, LoopContract>(&session)
        .call(&start("Check the build", None))
        .await
        .unwrap()
        .current
        .unwrap();
    assert_eq!(
        (started.mode.clone(), started.status, started.in_flight),
        (LoopMode::SelfPaced, LoopStatus::Active, Some(1))
    );

    for n in 1..=2u64 {
        let waiting = until(&session, |r| r.in_flight.is_none() && r.next_due.is_some()).await;
        assert_eq!(waiting.occurrences, n);
        let due = waiting.next_due.unwrap();
        assert_eq!(
            due,
            MONDAY + (n - 1) * MINUTE + MINUTE,
            "60 s after the run ended"
        );
        // One millisecond early nothing happens.
        clock.set(due - 1);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(the_loop(&session).await.unwrap().occurrences, n);
        clock.set(due);
        until(&session, |r| r.occurrences == n + 1).await;
    }
    let over = until(&session, |r| r.status == LoopStatus::Ended).await;
    assert_eq!(
        (over.occurrences, over.end, over.skipped),
        (3, Some(LoopEnd::NoNextOccurrence), 0)
    );
    assert_eq!(loop_timers(&db(&dir)).await, 0, "no timer left behind");
    assert_eq!(
        prompts(&session).await,
        vec!["user: Check the build"; 3],
        "each occurrence admitted the prompt once"
    );

    let id = send(&session, "schedule another one").await;
    terminal_of(&session, &id).await;
    let outline = outline(&transcript(&session).await);
    let refused = outline
        .iter()
        .rev()
        .find(|l| l.starts_with("tool loop__schedule_next"))
        .unwrap();
    assert!(
        refused.contains("(error)") && refused.contains("only in the active self-paced loop"),
        "{refused}"
    );
    assert_eq!(the_loop(&session).await.unwrap().status, LoopStatus::Ended);
    agent.close().await.unwrap();
}

#[tokio::test]
async fn the_model_starts_a_self_paced_loop_and_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(MONDAY);
    let (agent, _model) = open(
        &db(&dir),
        &clock,
        vec![
            Turn::tool_call("loop__start", json!({"prompt": "Tidy the inbox"})),
            Turn::text("started"),
            // The loop's first occurrence runs after this run; it stops the loop.
            Turn::tool_call("loop__get", json!({})),
            Turn::tool_call("loop__stop", json!({})),
            Turn::text("stopped"),
        ],
    )
    .await;
    let session = new_session(&agent).await;
    send(&session, "start a loop").await;
    let over = until(&session, |r| r.status == LoopStatus::Ended).await;
    assert_eq!(
        (over.occurrences, over.end),
        (
            1,
            Some(LoopEnd::Stopped {
                by: StoppedBy::Model
            })
        )
    );
    idle(&session).await;
    assert_eq!(
        prompts(&session).await,
        vec!["user: start a loop", "user: Tidy the inbox"]
    );
    let outline = outline(&transcript(&session).await);
    let got = outline
        .iter()
        .find(|l| l.starts_with("tool loop__get"))
        .unwrap();
    assert!(
        got.contains("Tidy the inbox") && got.contains("\"inFlight\":1"),
        "{got}"
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_queued_occurrence_pauses_a_self_paced_loop() {
    use shiitake_protocol::{CancelInput, CancelResult, ReadOptions, SessionApi};
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(MONDAY);
    let (agent, _model) = open(
        &db(&dir),
        &clock,
        vec![Turn::new(vec![
            shiitake_model::Step::DelayMs(10_000),
            shiitake_model::Step::Text("late".into()),
        ])],
    )
    .await;
    let session = new_session(&agent).await;
    // A person's slow run holds the Session, so the first occurrence queues behind it.
    let busy = send(&session, "take your time").await;
    let started = bind_session_extension::<_, LoopContract>(&session)
        .call(&start("Check the build", None))
        .await
        .unwrap()
        .current
        .unwrap();
    assert_eq!(started.in_flight, Some(1));
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    let queued = snapshot
        .pending
        .prompts
        .iter()
        .find(|p| p.text.as_str() == "Check the build")
        .unwrap()
        .command_id
        .clone();
    let outcome = session
        .cancel(CancelInput {
            command_id: queued,
            only_if_pending: Some(true),
        })
        .await
        .unwrap();
    assert!(matches!(outcome, CancelResult::Accepted(_)));
    let paused = the_loop(&session).await.unwrap();
    assert_eq!(
        (paused.status, paused.in_flight),
        (LoopStatus::Paused, None),
        "the cancelled occurrence settled: nothing stays in flight"
    );
    session.abort().await.unwrap();
    terminal_of(&session, &busy).await;
    agent.close().await.unwrap();
}
