//! The directory opens a tenant, all its Agents, on first use, once however many
//! first uses race; and after a close and a reopen every Session is there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_model::Turn;
use shiitake_protocol::*;
use shiitake_roster_hub::CatalogError;

use crate::support::*;

#[tokio::test]
async fn first_use_opens_the_whole_tenant_once_however_many_race() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::with_open_delay(
        &dir,
        &[("acme", &["acme", "acme-helper"]), ("globex", &["globex"])],
        Duration::from_millis(50),
    );
    let clock = ManualClock::new(1_000);
    let directory = start(options(
        catalog.clone(),
        Models::new(vec![]),
        clock,
        limits(8, Duration::from_secs(600), 4),
    ));
    assert!(
        directory.open_tenants().is_empty(),
        "nothing opens before use"
    );
    let (acme, acme_helper) = (agent("acme"), agent("acme-helper"));
    let (first, second, helper) = tokio::join!(
        directory.agent(&acme),
        directory.agent(&acme),
        directory.agent(&acme_helper),
    );
    let (first, second, helper) = (first.unwrap(), second.unwrap(), helper.unwrap());
    assert_eq!(directory.open_tenants(), vec![tenant("acme")]);
    assert_eq!(
        (
            catalog.stores_opened("acme"),
            catalog.stores_opened("acme-helper")
        ),
        (1, 1),
        "three racing first uses opened the tenant once"
    );
    assert_eq!(
        catalog.stores_opened("globex"),
        0,
        "another tenant stays closed"
    );
    // The same Agent: a Session created through one handle is read through the other.
    let session = new_session(&first).await;
    let again = second.session(session.session_id().clone());
    assert_eq!(
        again.read(ReadOptions::default()).await.unwrap().session_id,
        *session.session_id()
    );
    assert!(
        helper
            .list_sessions(None)
            .await
            .unwrap()
            .sessions
            .is_empty()
    );
    assert_eq!(
        directory.tenant_of(&agent("acme-helper")).await.unwrap(),
        Some(tenant("acme"))
    );
    assert_eq!(
        directory.tenant_of(&agent("globex")).await.unwrap(),
        Some(tenant("globex"))
    );
    assert_eq!(directory.tenant_of(&agent("nobody")).await.unwrap(), None);
    assert_eq!(
        directory.names_of(&tenant("acme")).await.unwrap(),
        vec![agent("acme"), agent("acme-helper")]
    );
    let missing = directory.agent(&agent("nobody")).await;
    assert!(
        matches!(&missing, Err(CatalogError::NotFound(reason)) if reason == "no Agent named nobody"),
        "{missing:?}"
    );
    assert_eq!(directory.open_tenants(), vec![tenant("acme")]);
    directory.close().await;
    assert!(directory.open_tenants().is_empty());
    let closed = directory.agent(&agent("acme")).await;
    assert!(
        matches!(closed, Err(CatalogError::Unavailable(_))),
        "{closed:?}"
    );
}

#[tokio::test]
async fn after_a_close_and_a_reopen_every_session_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(&dir, &[("acme", &["acme"])]);
    let models = Models::new(vec![(
        "acme",
        vec![Turn::text("First answer."), Turn::text("Second answer.")],
    )]);
    let clock = ManualClock::new(1_000);
    let directory = start(options(
        catalog.clone(),
        models.clone(),
        clock.clone(),
        limits(8, Duration::from_secs(600), 4),
    ));
    let acme = directory.agent(&agent("acme")).await.unwrap();
    let first = new_session(&acme).await;
    let sent = send(&first, "One").await;
    terminal_of(&first, &sent).await;
    let second = new_session(&acme).await;
    let sent = send(&second, "Two").await;
    terminal_of(&second, &sent).await;
    let before_first = outline(&transcript(&first).await);
    let before_second = outline(&transcript(&second).await);
    assert_eq!(before_first, ["user: One", "assistant: First answer."]);
    let mut before: Vec<SessionId> = session_ids(&acme).await;
    before.sort();

    // One handle while open, another after a reopen (what a host keys per Agent).
    let handle = directory.shared_agent(&agent("acme")).await.unwrap();
    assert!(Arc::ptr_eq(
        &handle,
        &directory.shared_agent(&agent("acme")).await.unwrap()
    ));

    // Closed by the directory's close, and by the idle sweep: both keep everything.
    assert!(directory.close_tenant(&tenant("acme")).await);
    assert!(
        !directory.close_tenant(&tenant("acme")).await,
        "already closed"
    );
    assert!(directory.open_tenants().is_empty());
    let acme = directory.agent(&agent("acme")).await.unwrap();
    assert_eq!(catalog.stores_opened("acme"), 2, "reopened");
    assert!(!Arc::ptr_eq(
        &handle,
        &directory.shared_agent(&agent("acme")).await.unwrap()
    ));
    drop(handle);
    owners_gone(&directory, "acme").await;
    clock.advance(Duration::from_secs(600));
    assert_eq!(directory.sweep().await.closed, vec![tenant("acme")]);
    directory.close().await;

    let directory = start(options(
        catalog.clone(),
        models,
        clock,
        limits(8, Duration::from_secs(600), 4),
    ));
    let reopened = directory.agent(&agent("acme")).await.unwrap();
    assert_eq!(catalog.stores_opened("acme"), 3);
    drop(acme);
    let mut after = session_ids(&reopened).await;
    after.sort();
    assert_eq!(after, before);
    let first = reopened.session(first.session_id().clone());
    let second = reopened.session(second.session_id().clone());
    assert_eq!(outline(&transcript(&first).await), before_first);
    assert_eq!(outline(&transcript(&second).await), before_second);
    directory.close().await;
}

async fn session_ids(agent: &impl AgentApi) -> Vec<SessionId> {
    agent
        .list_sessions(None)
        .await
        .unwrap()
        .sessions
        .into_iter()
        .map(|row| match row {
            SessionSummaryRow::Available { session_id, .. } => session_id,
            SessionSummaryRow::Unavailable { session_id } => session_id,
        })
        .collect()
}

#[tokio::test]
async fn each_tenant_gets_its_own_computers_each_time_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(
        &dir,
        &[("acme", &["acme", "acme-2"]), ("globex", &["globex"])],
    );
    let asked = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut options = options(
        catalog,
        Models::new(vec![]),
        ManualClock::new(1_000),
        limits(8, Duration::from_secs(600), 4),
    );
    let record = asked.clone();
    options.computers = Arc::new(move |tenant| {
        record.lock().unwrap().push(tenant.to_string());
        Arc::new(shiitake_ext_home::ComputerList::default())
    });
    let directory = start(options);
    directory.agent(&agent("acme-2")).await.unwrap();
    directory.agent(&agent("acme")).await.unwrap();
    directory.agent(&agent("globex")).await.unwrap();
    assert_eq!(
        *asked.lock().unwrap(),
        ["acme", "globex"],
        "once per tenant, shared by its Agents"
    );
    directory.close_tenant(&tenant("acme")).await;
    directory.agent(&agent("acme")).await.unwrap();
    assert_eq!(*asked.lock().unwrap(), ["acme", "globex", "acme"]);
    directory.close().await;
}
