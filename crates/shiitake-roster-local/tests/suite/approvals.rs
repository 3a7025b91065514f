//! The Local default asks before edits: a Local Agent's model reads a file of the
//! workspace without asking, and its patch waits for a person (the Session's inbox
//! state is `needs_you`) and is applied once the person allows it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::FixedModel;
use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, Decision};
use shiitake_ext_home::{Attachment, ComputerList};
use shiitake_ext_testkit::projection;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;
use shiitake_roster_local::{LocalDirectory, LocalOptions};

#[tokio::test]
async fn the_local_default_reads_freely_and_asks_before_a_patch() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "hello\n").unwrap();
    let patch = "*** Begin Patch\n*** Add File: plan.txt\n+ship it\n*** End Patch";
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call("files__read", json!({"path": "notes.txt"})),
        Turn::tool_call("files__apply_patch", json!({"patch": patch})),
        Turn::text("Planned."),
    ])));
    let mut options = LocalOptions::new(dir.path().join("data"), Arc::new(FixedModel(model)));
    options.computers = Arc::new(ComputerList::new(vec![
        Attachment::from_local("workspace", knapsack::LocalFiles::new(&workspace).unwrap())
            .unwrap(),
    ]));
    let directory = LocalDirectory::open(options).await.unwrap();
    let agent = directory.default_agent();
    let session = new_session(&agent).await;
    let command = send(&session, "Read the notes, then write the plan").await;
    let waiting = projection::until::<ApprovalContract>(&session, |p| !p.approvals.is_empty())
        .await
        .approvals;
    assert_eq!(waiting.len(), 1, "the patch waits");
    assert_eq!(waiting[0].tool, "files__apply_patch");
    assert_eq!(waiting[0].why, "the host asks before files__apply_patch");
    assert!(!workspace.join("plan.txt").exists(), "not applied yet");
    let summary = agent
        .session_summary(session.session_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.state, SessionInboxState::NeedsYou);
    bind_session_extension::<_, ApprovalContract>(&session)
        .call(&AnswerApproval {
            approval_id: waiting[0].approval_id.clone(),
            request_id: "local-1".into(),
            decision: Decision::AllowOnce,
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("plan.txt")).unwrap(),
        "ship it\n"
    );
    let lines = outline(&transcript(&session).await);
    assert!(
        lines[2].starts_with("tool files__read: "),
        "read without asking: {lines:?}"
    );
    directory.close().await;
}
