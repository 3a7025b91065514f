//! Idle tenants close after the idle time (on the directory's clock, moved by the
//! test), busy ones never; the open set is bounded, the least recently used idle
//! tenant making room, and an open refused when every open tenant is busy.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_core::store::{Op, TimerKind, TimerRow};
use shiitake_protocol::ExtensionId;
use shiitake_roster_hub::CatalogError;

use crate::support::*;

const IDLE: Duration = Duration::from_secs(600);

#[tokio::test]
async fn a_tenant_unused_for_the_idle_time_closes_and_a_use_restarts_the_time() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(&dir, &[("acme", &["acme"])]);
    let clock = ManualClock::new(1_000);
    let directory = start(options(
        catalog.clone(),
        Models::new(vec![]),
        clock.clone(),
        limits(8, IDLE, 4),
    ));
    let acme = directory.agent(&agent("acme")).await.unwrap();
    let session = new_session(&acme).await;
    let sent = send(&session, "Hello").await;
    terminal_of(&session, &sent).await;
    owners_gone(&directory, "acme").await;

    clock.advance(IDLE - Duration::from_millis(1));
    let swept = directory.sweep().await;
    assert!(swept.closed.is_empty(), "a millisecond early: {swept:?}");
    assert_eq!(directory.open_tenants(), vec![tenant("acme")]);
    clock.advance(Duration::from_millis(1));
    assert_eq!(directory.sweep().await.closed, vec![tenant("acme")]);
    assert!(directory.open_tenants().is_empty());

    // Reopened; a use 599 s later restarts the time, so 601 s after the open it stays.
    directory.agent(&agent("acme")).await.unwrap();
    assert_eq!(catalog.stores_opened("acme"), 2);
    clock.advance(Duration::from_secs(599));
    directory.agent(&agent("acme")).await.unwrap();
    clock.advance(Duration::from_secs(2));
    assert!(directory.sweep().await.closed.is_empty());
    clock.advance(IDLE);
    assert_eq!(directory.sweep().await.closed, vec![tenant("acme")]);
    directory.close().await;
}

#[tokio::test]
async fn a_tenant_with_a_running_and_a_queued_prompt_is_never_closed() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(&dir, &[("acme", &["acme"]), ("globex", &["globex"])]);
    // The first run waits in its model call (an hour, cancellable) while the second
    // prompt queues behind it.
    let models = Models::new(vec![("acme", vec![an_hours_wait()])]);
    let clock = ManualClock::new(1_000);
    let directory = start(options(
        catalog.clone(),
        models.clone(),
        clock.clone(),
        limits(1, IDLE, 4),
    ));
    let acme = directory.agent(&agent("acme")).await.unwrap();
    let session = new_session(&acme).await;
    send(&session, "One").await;
    send(&session, "Two").await;
    let model = models.of("acme");
    eventually(|| model.calls() == 1).await;

    clock.advance(IDLE * 3);
    let swept = directory.sweep().await;
    assert!(swept.closed.is_empty(), "busy, so open: {swept:?}");
    assert_eq!(directory.open_tenants(), vec![tenant("acme")]);

    // At the bound of one open tenant, the busy one is not closed to make room.
    let refused = directory.agent(&agent("globex")).await;
    let Err(CatalogError::Unavailable(reason)) = &refused else {
        panic!("refused as unavailable: {refused:?}");
    };
    assert_eq!(
        reason,
        "the tenant globex cannot open here: this process holds at most 1 open tenants and every one has work in progress; try again later"
    );
    assert_eq!(directory.open_tenants(), vec![tenant("acme")]);
    assert_eq!(catalog.stores_opened("globex"), 0);
    directory.close().await;
}

#[tokio::test]
async fn past_the_bound_the_least_recently_used_idle_tenant_closes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(&dir, &[("a", &["a"]), ("b", &["b"]), ("c", &["c"])]);
    let clock = ManualClock::new(1_000);
    let directory = start(options(
        catalog.clone(),
        Models::new(vec![]),
        clock.clone(),
        limits(2, IDLE, 4),
    ));
    let second = Duration::from_secs(1);
    directory.agent(&agent("a")).await.unwrap();
    clock.advance(second);
    directory.agent(&agent("b")).await.unwrap();
    assert_eq!(
        directory.open_tenants(),
        vec![tenant("a"), tenant("b")],
        "at the bound, both open"
    );
    clock.advance(second);
    directory.agent(&agent("c")).await.unwrap();
    assert_eq!(
        directory.open_tenants(),
        vec![tenant("b"), tenant("c")],
        "one past it, the least recently used (a) closed"
    );
    // b is used again, so c is now the least recently used.
    clock.advance(second);
    directory.agent(&agent("b")).await.unwrap();
    clock.advance(second);
    directory.agent(&agent("a")).await.unwrap();
    assert_eq!(directory.open_tenants(), vec![tenant("a"), tenant("b")]);
    assert_eq!(
        (
            catalog.stores_opened("a"),
            catalog.stores_opened("b"),
            catalog.stores_opened("c")
        ),
        (2, 1, 1)
    );
    directory.close().await;
}

#[tokio::test]
async fn a_tenant_with_an_armed_timer_stays_open_until_the_timer_goes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(&dir, &[("acme", &["acme", "acme-2"])]);
    let clock = ManualClock::new(1_000);
    let directory = start(options(
        catalog.clone(),
        Models::new(vec![]),
        clock.clone(),
        limits(8, IDLE, 4),
    ));
    directory.agent(&agent("acme")).await.unwrap();
    // A timer a year away in the tenant's second Agent (as an Almanac schedule would
    // arm), written behind the Agent.
    let store = catalog.open_store("acme-2");
    let almanac = ExtensionId::new("botanical-agent-almanac").unwrap();
    let year_ms = 365 * 24 * 3_600 * 1_000;
    store
        .commit(vec![Op::PutTimer(TimerRow {
            id: "01J0000000000000000000TEST".into(),
            extension_id: almanac.clone(),
            session_id: None,
            due_at: shiitake_core::clock::now_ms() + year_ms,
            cadence: None,
            payload: serde_json::Value::Null,
            kind: TimerKind::Hook,
        })])
        .await
        .unwrap();
    clock.advance(IDLE * 2);
    assert!(
        directory.sweep().await.closed.is_empty(),
        "an armed timer is work in progress"
    );
    store
        .commit(vec![Op::DeleteTimer {
            extension_id: almanac,
            id: "01J0000000000000000000TEST".into(),
        }])
        .await
        .unwrap();
    assert_eq!(directory.sweep().await.closed, vec![tenant("acme")]);
    directory.close().await;
}
