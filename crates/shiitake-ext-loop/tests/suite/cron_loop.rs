//! A cron loop on a paused clock: its occurrences fire after a restart exactly once,
//! an occurrence due while one is in flight is recorded, not stacked, it expires
//! seven days after it starts, and a person pauses, resumes and stops it.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::*;
use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_ext_loop::contract::*;
use shiitake_model::{Step, Turn};
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::{AgentApi, SessionApi};

fn texts(n: usize) -> Vec<Turn> {
    (0..n).map(|i| Turn::text(format!("ran {i}"))).collect()
}

#[tokio::test]
async fn occurrences_fire_after_a_restart_exactly_once_then_the_loop_expires() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(MONDAY + 30_000);
    let (agent, _) = open(&db(&dir), &clock, texts(0)).await;
    let session = new_session(&agent).await;
    let started = bind_session_extension::<_, LoopContract>(&session)
        .call(&start("Summarise the news", Some("*/5 * * * *")))
        .await
        .unwrap()
        .current
        .unwrap();
    assert_eq!(started.next_due, Some(MONDAY + 5 * MINUTE));
    assert_eq!(started.expires_at, Some(MONDAY + 30_000 + CRON_LIFETIME_MS));
    let session_id = session.session_id().clone();
    agent.close().await.unwrap();

    // The Agent is down while 00:05 and 00:10 pass.
    clock.set(MONDAY + 12 * MINUTE);
    let (agent, _) = open(&db(&dir), &clock, texts(4)).await;
    let session = agent.session(session_id.clone());
    let fired = until(&session, |r| r.occurrences >= 1 && r.in_flight.is_none()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let record = the_loop(&session).await.unwrap();
    assert_eq!((record.occurrences, record.skipped), (1, 0), "{fired:?}");
    assert_eq!(record.next_due, Some(MONDAY + 15 * MINUTE));
    assert_eq!(prompts(&session).await, vec!["user: Summarise the news"]);
    agent.close().await.unwrap();

    // A second restart with no time passed fires nothing.
    let (agent, _) = open(&db(&dir), &clock, texts(4)).await;
    let session = agent.session(session_id.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(the_loop(&session).await.unwrap().occurrences, 1);

    clock.set(MONDAY + 15 * MINUTE);
    until(&session, |r| r.occurrences == 2 && r.in_flight.is_none()).await;

    // Seven days after it started, it expires (the overdue 00:20 fires first, once).
    clock.set(MONDAY + 30_000 + CRON_LIFETIME_MS);
    let over = until(&session, |r| r.status == LoopStatus::Ended).await;
    assert_eq!((over.end, over.occurrences), (Some(LoopEnd::Expired), 3));
    idle(&session).await;
    assert_eq!(prompts(&session).await.len(), 3);
    assert_eq!(loop_timers(&db(&dir)).await, 0);
    agent.close().await.unwrap();
}

#[tokio::test]
async fn an_occurrence_due_while_one_runs_is_recorded_not_stacked() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(MONDAY + 30_000);
    let slow = Turn::new(vec![Step::DelayMs(600), Step::Text("slowly".into())]);
    let (agent, _) = open(&db(&dir), &clock, vec![slow, Turn::text("next")]).await;
    let session = new_session(&agent).await;
    bind_session_extension::<_, LoopContract>(&session)
        .call(&start("Poll the queue", Some("* * * * *")))
        .await
        .unwrap();
    clock.set(MONDAY + MINUTE);
    until(&session, |r| r.in_flight == Some(1)).await;
    // While occurrence 1 runs (600 ms), 00:02 comes due.
    clock.set(MONDAY + 2 * MINUTE);
    let busy = until(&session, |r| r.skipped == 1).await;
    assert_eq!((busy.occurrences, busy.in_flight), (1, Some(1)));
    until(&session, |r| r.in_flight.is_none()).await;
    clock.set(MONDAY + 3 * MINUTE);
    let later = until(&session, |r| r.occurrences == 2 && r.in_flight.is_none()).await;
    assert_eq!(later.skipped, 1);
    assert_eq!(
        prompts(&session).await.len(),
        2,
        "never two occurrences queued"
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_person_pauses_resumes_and_stops_a_cron_loop() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(MONDAY + 30_000);
    let (agent, _) = open(&db(&dir), &clock, texts(4)).await;
    let session = new_session(&agent).await;
    let control = bind_session_extension::<_, LoopContract>(&session);
    control
        .call(&start("Check prices", Some("*/10 * * * *")))
        .await
        .unwrap();
    // A second loop is refused while one is live.
    let refused = control.call(&start("Another", None)).await.unwrap_err();
    assert_eq!(refused.code, shiitake_protocol::ErrorCode::Invalid);

    let paused = control.call(&action(LoopAction::Pause)).await.unwrap();
    assert_eq!(paused.current.unwrap().status, LoopStatus::Paused);
    assert_eq!(
        loop_timers(&db(&dir)).await,
        1,
        "only the expiry timer stays"
    );
    clock.set(MONDAY + 25 * MINUTE);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(the_loop(&session).await.unwrap().occurrences, 0);

    let resumed = control
        .call(&action(LoopAction::Resume))
        .await
        .unwrap()
        .current
        .unwrap();
    assert_eq!(
        (resumed.status, resumed.next_due),
        (LoopStatus::Active, Some(MONDAY + 30 * MINUTE))
    );
    clock.set(MONDAY + 30 * MINUTE);
    until(&session, |r| r.occurrences == 1 && r.in_flight.is_none()).await;

    // Idempotent by request id.
    let mut stop = action(LoopAction::Stop);
    stop.request_id = Some("stop-1".into());
    let stopped = control.call(&stop).await.unwrap();
    assert_eq!(control.call(&stop).await.unwrap(), stopped);
    assert_eq!(
        stopped.current.unwrap().end,
        Some(LoopEnd::Stopped {
            by: StoppedBy::Person
        })
    );
    assert_eq!(loop_timers(&db(&dir)).await, 0);
    let again = control.call(&action(LoopAction::Stop)).await.unwrap_err();
    assert_eq!(again.code, shiitake_protocol::ErrorCode::Invalid);

    let catalogs = agent.catalogs().await.unwrap();
    let catalog = serde_json::to_value(
        &catalogs
            .catalogs
            .iter()
            .find(|e| e.catalog.extension_id.as_str() == EXTENSION_ID)
            .unwrap()
            .catalog,
    )
    .unwrap();
    assert_eq!(catalog["commands"][0]["name"], "loop");
    assert_eq!(
        catalog["commands"][0]["arguments"][0]["kind"]["choices"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    agent.close().await.unwrap();
}
