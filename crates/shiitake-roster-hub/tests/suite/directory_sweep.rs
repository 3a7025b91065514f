//! The sweep opens the tenants whose Agents have work waiting (what a process that
//! died left), and their work runs; the background sweep closes idle tenants on the
//! directory's clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_model::Turn;
use shiitake_protocol::*;
use shiitake_roster_hub::{HubLimits, Swept};

use crate::support::*;

const IDLE: Duration = Duration::from_secs(600);

#[tokio::test]
async fn the_sweep_opens_tenants_with_work_waiting_and_the_work_runs() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(&dir, &[("acme", &["acme"]), ("globex", &["globex"])]);
    let models = Models::new(vec![(
        "acme",
        vec![
            an_hours_wait(),
            Turn::text("Resumed."),
            Turn::text("Second."),
        ],
    )]);
    let clock = ManualClock::new(1_000);
    // The first process accepts two prompts, the first running, the second queued,
    // and goes away (closed mid-run: nothing settles).
    let first = start(options(
        catalog.clone(),
        models.clone(),
        clock.clone(),
        limits(8, IDLE, 4),
    ));
    let acme = first.agent(&agent("acme")).await.unwrap();
    first.agent(&agent("globex")).await.unwrap();
    let session = new_session(&acme).await;
    let one = send(&session, "One").await;
    let two = send(&session, "Two").await;
    let model = models.of("acme");
    eventually(|| model.calls() == 1).await;
    first.close().await;
    drop(acme);

    // The survivor holds nothing until its sweep asks the catalog what is wanted.
    let survivor = start(options(
        catalog.clone(),
        models.clone(),
        clock,
        limits(8, IDLE, 4),
    ));
    assert!(survivor.open_tenants().is_empty());
    assert_eq!(
        survivor.sweep().await,
        Swept {
            closed: vec![],
            opened: vec![tenant("acme")],
        },
        "only the tenant with work waiting"
    );
    assert_eq!(survivor.open_tenants(), vec![tenant("acme")]);
    let acme = survivor.agent(&agent("acme")).await.unwrap();
    let session = acme.session(session.session_id().clone());
    assert_eq!(
        terminal_of(&session, &one).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        terminal_of(&session, &two).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        outline(&transcript(&session).await),
        [
            "user: One",
            "assistant: Resumed.",
            "user: Two",
            "assistant: Second."
        ]
    );
    assert_eq!(
        survivor.sweep().await,
        Swept::default(),
        "nothing more is wanted, and acme was used just now"
    );
    survivor.close().await;
}

#[tokio::test]
async fn the_background_sweep_closes_idle_tenants_on_the_directorys_clock() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(&dir, &[("acme", &["acme"])]);
    let clock = ManualClock::new(1_000);
    let directory = start(options(
        catalog,
        Models::new(vec![]),
        clock.clone(),
        HubLimits {
            sweep_every: Some(Duration::from_secs(30)),
            ..limits(8, IDLE, 4)
        },
    ));
    directory.agent(&agent("acme")).await.unwrap();
    clock.advance(IDLE - Duration::from_secs(1));
    // The sweeps this woke found it used 599 s ago: still open.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(directory.open_tenants(), vec![tenant("acme")]);
    clock.advance(Duration::from_secs(31));
    eventually(|| directory.open_tenants().is_empty()).await;
    directory.close().await;
}
