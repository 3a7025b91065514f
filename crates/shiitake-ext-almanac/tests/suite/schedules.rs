//! Almanac schedules admitting into Sessions on a paused clock: one-shot and
//! recurring, exactly once across restarts, refusals retried with backoff per
//! schedule, and the human commands.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::*;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_ext_almanac::contract::*;
use shiitake_protocol::extension::{ExtensionViewV0, bind_agent_extension, view};
use shiitake_protocol::{AgentApi, ErrorCode, ExtensionRunState, ReadOptions, SessionApi};

#[tokio::test]
async fn a_schedule_admits_into_its_session_once_and_a_cadence_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let clock = ManualClock::new(MONDAY);
    let (agent, _) = open(&path, clock.clone()).await;
    let session = new_session(&agent).await;
    let almanac = bind_agent_extension::<_, AlmanacContract>(&agent);
    let one = almanac
        .call(&once(
            session.session_id().as_str(),
            "Water the plants",
            MONDAY + MINUTE,
        ))
        .await
        .unwrap();
    assert_eq!(
        (one.status, one.next_due, one.admitted),
        (ScheduleStatus::Active, Some(MONDAY + MINUTE), 0)
    );
    // The Session shows the schedules that target it.
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    match view::<AlmanacContract>(&snapshot.extensions).unwrap() {
        ExtensionViewV0::Running { value: Some(p) } => assert_eq!(p.schedules, vec![one.clone()]),
        other => panic!("{other:?}"),
    }

    clock.set(MONDAY + MINUTE - 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(admitted_commands(&path).await.is_empty(), "not due yet");
    clock.set(MONDAY + MINUTE);
    let done = until(&agent, &one.id, |s| s.status == ScheduleStatus::Done).await;
    assert_eq!(done.admitted, 1);
    let key = format!("almanac:{}:{}", one.id.0, MONDAY + MINUTE);
    let commands = admitted_commands(&path).await;
    assert_eq!(commands.len(), 1);
    assert_eq!(commands[0].0, key);
    assert_eq!(&commands[0].1, session.session_id().as_str());
    let origin: Value = serde_json::from_str(&commands[0].2).unwrap();
    assert_eq!(
        origin,
        json!({"extensionId": EXTENSION_ID, "correlation": key})
    );
    assert_eq!(
        done.last_admission.unwrap().command_id,
        "cmd_".to_owned() + &done_command_suffix(&path, &key).await
    );
    let outline = outline(&transcript(&session).await);
    assert_eq!(outline[0], "user: Water the plants");

    // A recurring schedule: every ten minutes.
    let mut recurring = once(session.session_id().as_str(), "Check the mail", 0);
    recurring.at = None;
    recurring.cadence = Some("*/10 * * * *".into());
    let cron = almanac.call(&recurring).await.unwrap();
    assert_eq!(cron.next_due, Some(MONDAY + 10 * MINUTE));
    clock.set(MONDAY + 10 * MINUTE);
    until(&agent, &cron.id, |s| s.admitted == 1).await;
    clock.set(MONDAY + 20 * MINUTE);
    let twice = until(&agent, &cron.id, |s| s.admitted == 2).await;
    assert_eq!(
        (twice.status, twice.next_due),
        (ScheduleStatus::Active, Some(MONDAY + 30 * MINUTE))
    );
    assert_eq!(admitted_commands(&path).await.len(), 3);
    agent.close().await.unwrap();
}

async fn done_command_suffix(path: &std::path::Path, key: &str) -> String {
    let id: String = sqlx::query_scalar("SELECT id FROM commands WHERE request_id = ?")
        .bind(key)
        .fetch_one(&mut connect(path).await)
        .await
        .unwrap();
    id.trim_start_matches("cmd_").to_owned()
}

#[tokio::test]
async fn an_occurrence_due_while_the_agent_was_down_is_admitted_once_after_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let clock = ManualClock::new(MONDAY);
    let (agent, _) = open(&path, clock.clone()).await;
    let session = new_session(&agent).await;
    let created = bind_agent_extension::<_, AlmanacContract>(&agent)
        .call(&once(
            session.session_id().as_str(),
            "Good morning",
            MONDAY + MINUTE,
        ))
        .await
        .unwrap();
    agent.close().await.unwrap();
    clock.set(MONDAY + 60 * MINUTE);
    for _ in 0..2 {
        let (agent, _) = open(&path, clock.clone()).await;
        until(&agent, &created.id, |s| s.status == ScheduleStatus::Done).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(admitted_commands(&path).await.len(), 1);
        assert_eq!(schedule(&agent, &created.id).await.admitted, 1);
        agent.close().await.unwrap();
    }
    assert_eq!(almanac_timers(&path).await, 0);
}

#[tokio::test]
async fn a_refused_admission_retries_with_backoff_for_its_schedule_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let clock = ManualClock::new(MONDAY);
    let (agent, _) = open(&path, clock.clone()).await;
    let live = new_session(&agent).await;
    let doomed = new_session(&agent).await;
    let almanac = bind_agent_extension::<_, AlmanacContract>(&agent);
    let refused = almanac
        .call(&once(
            doomed.session_id().as_str(),
            "Into the void",
            MONDAY + MINUTE,
        ))
        .await
        .unwrap();
    let fine = almanac
        .call(&once(
            live.session_id().as_str(),
            "Still here",
            MONDAY + MINUTE,
        ))
        .await
        .unwrap();
    agent.delete_session(doomed.session_id()).await.unwrap();

    clock.set(MONDAY + MINUTE);
    let mut now = MONDAY + MINUTE;
    let first = until(&agent, &refused.id, |s| s.last_error.is_some()).await;
    let error = first.last_error.clone().unwrap();
    assert_eq!((error.code.as_str(), error.at), ("not_found", now));
    assert_eq!(
        first.pending,
        Some(PendingOccurrence {
            occurrence: MONDAY + MINUTE,
            attempts: 1,
            retry_at: Some(now + RETRY_BASE_MS)
        })
    );
    assert_eq!(first.status, ScheduleStatus::Active);
    let other = until(&agent, &fine.id, |s| s.status == ScheduleStatus::Done).await;
    assert_eq!(
        (other.admitted, other.last_error),
        (1, None),
        "the other schedule is untouched"
    );

    for attempt in 2..=MAX_ATTEMPTS {
        let retry_at = schedule(&agent, &refused.id)
            .await
            .pending
            .unwrap()
            .retry_at
            .unwrap();
        assert_eq!(retry_at, now + state_backoff(attempt - 1));
        clock.set(retry_at - 1);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(
            schedule(&agent, &refused.id)
                .await
                .pending
                .unwrap()
                .attempts,
            attempt - 1,
            "not before its retry time"
        );
        clock.set(retry_at);
        now = retry_at;
        until(&agent, &refused.id, |s| {
            s.pending.as_ref().is_some_and(|p| p.attempts == attempt)
        })
        .await;
    }
    let stopped = schedule(&agent, &refused.id).await;
    assert_eq!(stopped.status, ScheduleStatus::Stopped);
    assert_eq!(
        stopped.last_error.unwrap().code,
        "not_found",
        "the recorded error is shown"
    );
    assert_eq!(
        almanac_timers(&path).await,
        0,
        "a stopped schedule holds no timer"
    );
    let statuses = agent.list_extensions().await.unwrap();
    assert_eq!(
        statuses[0].state,
        ExtensionRunState::Running,
        "the extension keeps running"
    );

    // The owner's resume command tries the occurrence again at once.
    let resumed = almanac
        .call(&ResumeSchedule(ScheduleRef {
            schedule_id: refused.id.clone(),
            request_id: None,
        }))
        .await
        .unwrap();
    assert_eq!(resumed.status, ScheduleStatus::Active);
    let again = until(&agent, &refused.id, |s| {
        s.pending.as_ref().is_some_and(|p| p.attempts == 1)
    })
    .await;
    assert_eq!(again.last_error.unwrap().at, now);
    assert!(
        admitted_commands(&path)
            .await
            .iter()
            .all(|c| !c.0.contains(&refused.id.0))
    );
    agent.close().await.unwrap();
}

fn state_backoff(attempts: u32) -> u64 {
    shiitake_ext_almanac::state::backoff(attempts)
}

#[tokio::test]
async fn people_create_list_pause_resume_and_delete_schedules() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let clock = ManualClock::new(MONDAY);
    let (agent, _) = open(&path, clock.clone()).await;
    let session = new_session(&agent).await;
    let sid = session.session_id().as_str().to_owned();
    let almanac = bind_agent_extension::<_, AlmanacContract>(&agent);

    // Bad input is a typed refusal.
    let mut both = once(&sid, "x", MONDAY);
    both.cadence = Some("* * * * *".into());
    let too_long = once(&sid, &"a".repeat(MAX_PROMPT_BYTES + 1), MONDAY);
    let mut bad_cadence = once(&sid, "x", 0);
    bad_cadence.at = None;
    bad_cadence.cadence = Some("* * * * 8".into());
    for bad in [
        both,
        too_long,
        bad_cadence,
        once("not a session", "x", MONDAY),
    ] {
        assert_eq!(
            almanac.call(&bad).await.unwrap_err().code,
            ErrorCode::Invalid
        );
    }
    assert!(
        almanac
            .call(&once(&sid, &"a".repeat(MAX_PROMPT_BYTES), MONDAY + MINUTE))
            .await
            .is_ok()
    );

    let mut create = once(&sid, "Stretch", MONDAY + 2 * MINUTE);
    create.request_id = Some("create-1".into());
    let made = almanac.call(&create).await.unwrap();
    assert_eq!(
        almanac.call(&create).await.unwrap(),
        made,
        "idempotent by request id"
    );
    assert_eq!(list(&agent).await.len(), 2);

    let by_id = |id: &ScheduleId| ScheduleRef {
        schedule_id: id.clone(),
        request_id: None,
    };
    let paused = almanac.call(&PauseSchedule(by_id(&made.id))).await.unwrap();
    assert_eq!(paused.status, ScheduleStatus::Paused);
    assert_eq!(
        almanac
            .call(&PauseSchedule(by_id(&made.id)))
            .await
            .unwrap_err()
            .code,
        ErrorCode::Invalid
    );
    clock.set(MONDAY + 3 * MINUTE);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        schedule(&agent, &made.id).await.admitted,
        0,
        "a paused schedule waits"
    );
    almanac
        .call(&ResumeSchedule(by_id(&made.id)))
        .await
        .unwrap();
    until(&agent, &made.id, |s| s.status == ScheduleStatus::Done).await;

    let first = list(&agent)
        .await
        .into_iter()
        .find(|s| s.id != made.id)
        .unwrap();
    assert!(
        almanac
            .call(&DeleteSchedule(by_id(&first.id)))
            .await
            .unwrap()
    );
    assert!(
        !almanac
            .call(&DeleteSchedule(by_id(&first.id)))
            .await
            .unwrap()
    );
    assert_eq!(list(&agent).await.len(), 1);
    assert_eq!(almanac_timers(&path).await, 0);

    let catalogs = agent.catalogs().await.unwrap();
    let catalog = &catalogs
        .catalogs
        .iter()
        .find(|e| e.catalog.extension_id.as_str() == EXTENSION_ID)
        .unwrap()
        .catalog;
    let calls: Vec<&str> = catalog.commands.iter().map(|c| c.call.as_str()).collect();
    assert_eq!(calls, vec!["create", "list", "pause", "resume", "delete"]);
    agent.close().await.unwrap();
}
