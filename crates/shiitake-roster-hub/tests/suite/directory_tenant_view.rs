//! Each Agent sees its own tenant only: a sibling is reached, another tenant's Agent
//! is absent; `agents.create` is admitted up to the host's bound and refused past it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use shiitake_core::clock::ManualClock;
use shiitake_model::Turn;
use shiitake_protocol::AgentApi;

use crate::support::*;

#[tokio::test]
async fn a_run_reaches_its_sibling_and_is_told_another_tenants_agent_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(
        &dir,
        &[("acme", &["acme", "acme-2"]), ("globex", &["globex"])],
    );
    let models = Models::new(vec![
        (
            "acme",
            vec![
                Turn::tool_call("agents__send", json!({"agent": "globex", "text": "Hi"})),
                Turn::tool_call("agents__send", json!({"agent": "acme-2", "text": "Hi"})),
                Turn::text("Done."),
            ],
        ),
        ("acme-2", vec![Turn::text("Hello from acme-2.")]),
    ]);
    let directory = start(options(
        catalog.clone(),
        models,
        ManualClock::new(1_000),
        limits(8, Duration::from_secs(600), 4),
    ));
    let acme = directory.agent(&agent("acme")).await.unwrap();
    let lines = prompt_once(&acme, "Reach out.").await;
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(
        lines[2],
        "tool agents__send (error): no Agent named globex; the Agents here are: acme, acme-2"
    );
    assert!(
        lines[4].starts_with("tool agents__send: ") && lines[4].contains("Hello from acme-2."),
        "{lines:?}"
    );
    assert_eq!(lines[5], "assistant: Done.");
    // globex was never touched: not opened, no store, no Session.
    assert_eq!(directory.open_tenants(), vec![tenant("acme")]);
    assert_eq!(catalog.stores_opened("globex"), 0);
    let globex = directory.agent(&agent("globex")).await.unwrap();
    assert!(
        globex
            .list_sessions(None)
            .await
            .unwrap()
            .sessions
            .is_empty()
    );
    directory.close().await;
}

#[tokio::test]
async fn agents_create_is_admitted_up_to_the_bound_and_refused_one_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = MemoryCatalog::new(&dir, &[("acme", &["acme"]), ("globex", &["globex"])]);
    let models = Models::new(vec![(
        "acme",
        vec![
            Turn::tool_call("agents__create", json!({"name": "acme-2"})),
            Turn::tool_call("agents__create", json!({"name": "acme-3"})),
            Turn::tool_call("agents__create", json!({"name": "acme-4"})),
            Turn::tool_call("agents__create", json!({"name": "globex"})),
            Turn::tool_call("agents__create", json!({"name": "acme-2"})),
            Turn::tool_call("agents__send", json!({"agent": "acme-3", "text": "Ping"})),
            Turn::text("Done."),
        ],
    )]);
    let directory = start(options(
        catalog.clone(),
        models,
        ManualClock::new(1_000),
        limits(8, Duration::from_secs(600), 3),
    ));
    let acme = directory.agent(&agent("acme")).await.unwrap();
    let lines = prompt_once(&acme, "Grow.").await;
    assert_eq!(lines.len(), 14, "{lines:?}");
    let results: Vec<&String> = lines
        .iter()
        .filter(|line| line.starts_with("tool "))
        .collect();
    assert!(
        results[0].starts_with("tool agents__create: "),
        "{results:?}"
    );
    assert!(
        results[1].starts_with("tool agents__create: "),
        "the third Agent is at the bound: {results:?}"
    );
    assert_eq!(
        results[2],
        "tool agents__create (error): creating Agent acme-4 is not allowed: the tenant acme has 3 Agents, the most it may have"
    );
    assert_eq!(
        results[3],
        "tool agents__create (error): creating Agent globex is not allowed: the name is taken on this Hub; choose another",
        "another tenant's Agent is not named as existing"
    );
    assert!(
        results[4].starts_with(r#"tool agents__create: {"agent":"acme-2""#),
        "a sibling's name answers with the sibling (the extension's rule), adding no Agent: {results:?}"
    );
    assert!(
        results[5].starts_with("tool agents__send: ") && results[5].contains("Ping"),
        "the created Agent is a reachable sibling (it echoes): {results:?}"
    );
    assert_eq!(
        directory.names_of(&tenant("acme")).await.unwrap(),
        vec![agent("acme"), agent("acme-2"), agent("acme-3")]
    );
    assert_eq!(
        directory.tenant_of(&agent("acme-3")).await.unwrap(),
        Some(tenant("acme"))
    );
    // Opened into the tenant's group: reached without opening its store again.
    directory.agent(&agent("acme-3")).await.unwrap();
    assert_eq!(catalog.stores_opened("acme-3"), 1);
    assert_eq!(catalog.stores_opened("acme-4"), 0);
    assert_eq!(directory.open_tenants(), vec![tenant("acme")]);
    // Another tenant's bound is its own.
    assert_eq!(
        directory.names_of(&tenant("globex")).await.unwrap(),
        vec![agent("globex")]
    );
    directory.close().await;
}
