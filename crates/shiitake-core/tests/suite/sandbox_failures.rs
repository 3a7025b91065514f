//! Sandbox failures are recorded as events, shown only to observers that ask.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use std::sync::Arc;

use serde_json::json;
use shiitake_capabilities::{
    Catalog, ForModelError, ForModelKind, Module, ModulePath, Operation, OperationName, SourceId,
    StaticSource, ToolError,
};
use shiitake_conformance::support::*;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;

async fn catalog() -> Arc<Catalog> {
    let fetch = Operation::from_fn(
        OperationName::new("fetch").unwrap(),
        "Fetches a URL.",
        |_input, _ctx| async {
            Err(ToolError::ForModel(ForModelError::new(
                ForModelKind::SandboxDenied,
                "network access denied by sandbox",
            )))
        },
    );
    let module = Module::new(ModulePath::new("net").unwrap(), "Network.")
        .with_operation(fetch)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("net"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

#[tokio::test]
async fn a_denied_call_is_an_event_for_those_who_ask() {
    let script = Script::new(vec![
        Turn::tool_call("net__fetch", json!({"url": "https://example.com"})),
        Turn::text("blocked"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(script));
    let agent = harness::open_with(
        &dir.path().join("agent.db"),
        catalog().await,
        harness::config(model),
    )
    .await;
    let session = new_session(&agent).await;
    let command = send(&session, "fetch it").await;
    terminal_of(&session, &command).await;

    let plain = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(plain.sandbox_failures, None);
    let asked = ReadOptions {
        include_sandbox_failures: Some(true),
        ..ReadOptions::default()
    };
    let failures = session.read(asked).await.unwrap().sandbox_failures.unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(
        (
            failures[0].capability.as_str(),
            failures[0].message.as_str()
        ),
        ("net.fetch", "network access denied by sandbox")
    );
    let lines = outline(&transcript(&session).await);
    assert_eq!(
        lines[2],
        "tool net__fetch (error): network access denied by sandbox"
    );

    let replay = |include| SubscribeOptions {
        include_sandbox_failures: include,
        after: Some(Cursor::new("v1.0.1").unwrap()),
    };
    let mut frames = session.subscribe(replay(Some(true))).await.unwrap();
    let Some(Ok(SessionFrame::Update(update))) = futures::StreamExt::next(&mut frames).await else {
        panic!("a replay");
    };
    assert_eq!(update.sandbox_failures.unwrap(), failures);
    let mut frames = session.subscribe(replay(None)).await.unwrap();
    let Some(Ok(SessionFrame::Update(update))) = futures::StreamExt::next(&mut frames).await else {
        panic!("a replay");
    };
    assert_eq!(update.sandbox_failures, None);
}
