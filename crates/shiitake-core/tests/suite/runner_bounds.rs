//! The runner's bounds: a tool call's deadline and the model calls of one run.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shiitake_conformance::TestTools;
use shiitake_conformance::support::*;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;

async fn agent(
    script: Script,
    configure: impl FnOnce(&mut shiitake_core::AgentConfig),
) -> (tempfile::TempDir, shiitake_core::Agent) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = harness::config(Arc::new(ScriptedModel::new(script)));
    configure(&mut config);
    let agent = harness::open(
        &dir.path().join("agent.db"),
        Arc::new(TestTools::default()),
        config,
    )
    .await;
    (dir, agent)
}

#[tokio::test]
async fn a_tool_past_its_deadline_is_an_error_for_the_model() {
    let script = Script::new(vec![
        Turn::tool_call("test__slow", json!({})),
        Turn::text("gave up on it"),
    ]);
    let (_dir, agent) = agent(script, |config| {
        config.tool_timeout = Duration::from_millis(100)
    })
    .await;
    let session = new_session(&agent).await;
    let command = send(&session, "use the slow tool").await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    let lines = outline(&transcript(&session).await);
    assert!(
        lines[2].starts_with("tool test__slow (error):"),
        "{lines:?}"
    );
    assert!(lines[2].contains("deadline"), "{lines:?}");
    assert_eq!(lines[3], "assistant: gave up on it");
}

#[tokio::test]
async fn a_run_stops_after_its_last_allowed_model_call() {
    let script = Script::new(vec![Turn::tool_call("test__echo", json!({}))]).cycle(true);
    let (_dir, agent) = agent(script, |config| config.max_model_calls = 3).await;
    let session = new_session(&agent).await;
    let command = send(&session, "loop forever").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Failed);
    assert_eq!(
        terminal.diagnostic.as_deref(),
        Some("the run stopped after 3 model calls without finishing")
    );
    let assistant_turns = outline(&transcript(&session).await)
        .iter()
        .filter(|l| l.starts_with("assistant"))
        .count();
    assert_eq!(assistant_turns, 3, "exactly the allowed calls were made");
}
