//! Work that keeps dying with its process is not resumed forever: after the
//! configured number of recoveries it settles `interrupted` with a diagnostic.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use std::sync::Arc;

use shiitake_conformance::TestTools;
use shiitake_conformance::support::*;
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::*;

fn stuck() -> Arc<ScriptedModel> {
    let turn = Turn::new(vec![Step::DelayMs(60_000), Step::Text("never".into())]);
    Arc::new(ScriptedModel::new(Script::new(vec![turn])))
}

async fn open(path: &std::path::Path, model: Arc<ScriptedModel>) -> shiitake_core::Agent {
    let mut config = harness::config(model);
    config.max_recoveries = 1;
    harness::open(path, Arc::new(TestTools::default()), config).await
}

#[tokio::test]
async fn work_is_interrupted_after_its_last_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");

    let model = stuck();
    let agent = open(&path, model.clone()).await;
    let session = new_session(&agent).await;
    let command = send(&session, "this will keep dying").await;
    let id = session.session_id().clone();
    eventually(|| model.calls() == 1).await;
    agent.close().await.unwrap();

    // The first restart resumes it (one recovery allowed)...
    let model = stuck();
    let agent = open(&path, model.clone()).await;
    eventually(|| model.calls() == 1).await;
    agent.close().await.unwrap();

    // ...the second settles it.
    let model = stuck();
    let agent = open(&path, model.clone()).await;
    let session = agent.session(id);
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Interrupted);
    assert_eq!(
        terminal.diagnostic.as_deref(),
        Some("the Agent stopped during this work 2 times; it was not resumed again")
    );
    assert_eq!(model.calls(), 0, "not resumed again");
    let page = agent.list_sessions(None).await.unwrap();
    assert!(
        matches!(&page.sessions[0], SessionSummaryRow::Available { summary, .. }
        if summary.state == SessionInboxState::Errored)
    );
}
