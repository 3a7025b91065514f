//! Runs borrow the `ui` module and return it, without a browser: a scripted run
//! through the core Agent is offered `ui.discover` and `ui.execute`, holds the
//! Session's host while it runs, gets `browser_not_connected` with no tab, and
//! drops the host when it ends; after `close`, runs go without `ui`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use knapsack::ui::{UiBridge, UiOptions};
use serde_json::json;
use shiitake_conformance::support::{new_session, outline, send, terminal_of, transcript};
use shiitake_core::Agent;
use shiitake_ext_testkit::{TestAgent, tool_names};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::{AgentApi, TerminalOutcome};

async fn agent(bridge: &UiBridge, model: Arc<ScriptedModel>, dir: &tempfile::TempDir) -> Agent {
    TestAgent::builder()
        .file(dir.path().join("agent.db"))
        .model(model)
        .kit_extension(shiitake_ext_ui::extension(bridge.clone()).unwrap())
        .open()
        .await
        .agent
}

#[tokio::test]
async fn a_run_borrows_ui_and_returns_it_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = UiBridge::new(UiOptions::default());
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call(
            "ui__execute",
            json!({ "command": "add_note", "input": { "text": "x" } }),
        ),
        Turn::text("no browser"),
    ])));
    let agent = agent(&bridge, model.clone(), &dir).await;
    let session = new_session(&agent).await;
    assert_eq!(bridge.hosts(), 0);

    let command = send(&session, "note it").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Completed);
    assert_eq!(
        outline(&transcript(&session).await),
        [
            "user: note it",
            "assistant: -> ui__execute",
            "tool ui__execute (error): no browser is connected to this Session",
            "assistant: no browser",
        ]
    );
    let offered = tool_names(&model, 0);
    assert!(offered.contains(&"ui__discover".to_owned()), "{offered:?}");
    assert!(offered.contains(&"ui__execute".to_owned()), "{offered:?}");
    // The run ended and dropped its tools: no one holds the host.
    shiitake_conformance::support::eventually(|| bridge.hosts() == 0).await;
    agent.close().await.unwrap();
}

#[tokio::test]
async fn after_close_a_run_goes_without_ui() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = UiBridge::new(UiOptions::default());
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("fine")])));
    let agent = agent(&bridge, model.clone(), &dir).await;
    let session = new_session(&agent).await;
    bridge.close();
    let command = send(&session, "hello").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Completed);
    let offered = tool_names(&model, 0);
    assert!(
        offered.iter().all(|name| !name.starts_with("ui__")),
        "{offered:?}"
    );
    assert_eq!(bridge.hosts(), 0);
    agent.close().await.unwrap();
}
