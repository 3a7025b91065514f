//! A child whose tool call waits for a person's approval shows "needs you" in its
//! parent's footer with the call, and is answered from the row: the row's Answer action
//! walks the approval's own `/approve` flow on the child's Session, and the call runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use serde_json::{Map, Value, json};
use shiitake_conformance::support::*;
use shiitake_ext_approval::contract::ApprovalContract;
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_ext_subagents::contract::ChildStatus;
use shiitake_ext_testkit::{TestAgent, fast_retry, projection, side_effect};
use shiitake_model::Turn;
use shiitake_protocol::catalog::FlowStep;
use shiitake_protocol::footer::FooterActionKind;
use shiitake_protocol::*;

#[tokio::test]
async fn a_childs_waiting_tool_call_needs_you_and_is_answered_from_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let parent = parent(&dir).await;
    let (tools, runs) = side_effect::counted("deploy", "run").await.unwrap();
    let patcher = TestAgent::builder()
        .file(dir.path().join("patcher.db"))
        .turns(vec![
            Turn::tool_call("deploy__run", json!({"target": "staging"})),
            Turn::text("Deployed."),
        ])
        .tools(tools)
        .configure(|config| config.retry = fast_retry(1))
        .kit_extension(shiitake_ext_approval::extension(Policy::new(Ruling::Ask)).unwrap())
        .open()
        .await
        .agent;
    let child = new_session(&patcher).await;
    let work = send(&child, "Deploy it").await;
    projection::until::<ApprovalContract>(&child, |p| !p.approvals.is_empty()).await;
    parent.source.add_agent("patcher", &patcher);
    let parent_session = new_session(&parent.agent).await;
    parent
        .source
        .add_child(parent_session.session_id(), "patcher", child.session_id());

    let shown = projection::until::<shiitake_ext_subagents::contract::SubagentsContract>(
        &parent_session,
        |f| f.rows.len() == 1,
    )
    .await;
    let ChildStatus::NeedsYou {
        question: None,
        approval: Some(approval),
    } = &shown.rows[0].status
    else {
        panic!(
            "the child needs you for its call: {:?}",
            shown.rows[0].status
        );
    };
    assert_eq!(
        approval.text,
        r#"approve deploy__run? {"target":"staging"}"#
    );
    assert_eq!(shown.summary.needs_you, 1);
    let snapshot = parent_session.read(ReadOptions::default()).await.unwrap();
    let row = snapshot
        .footer
        .iter()
        .find(|row| row.key == child.session_id().as_str())
        .unwrap();
    assert_eq!(
        row.text,
        r#"agent patcher (Deploy it): needs you: approve deploy__run? {"target":"staging"}"#
    );
    assert_eq!(row.note.as_deref(), Some("/answer @patcher"));

    // The Answer action, as a client runs it: the flow on the child's Session, preset,
    // until it confirms, then the call with a request id of its own.
    let action = row.actions.iter().find(|a| a.name == "answer").unwrap();
    let FooterActionKind::Flow {
        extension_id,
        flow,
        call,
        preset,
        target: Some(target),
    } = &action.kind
    else {
        panic!("a flow on the child's Session: {action:?}");
    };
    assert_eq!(target.agent, "patcher");
    let on_child = patcher.session(SessionId::new(target.session_id.as_str()).unwrap());
    let mut collected: Map<String, Value> = preset.as_object().cloned().unwrap_or_default();
    let input = loop {
        let step: FlowStep = serde_json::from_value(
            on_child
                .call_extension(extension_id, flow, Value::Object(collected.clone()))
                .await
                .unwrap(),
        )
        .unwrap();
        match step {
            FlowStep::Ask { argument, .. } if argument == "decision" => {
                collected.insert(argument, json!("allow_once"));
            }
            FlowStep::Confirm { mut input, .. } => {
                input["requestId"] = json!("from-the-parent-row");
                break input;
            }
            other => panic!("unexpected step {other:?}"),
        }
    };
    on_child
        .call_extension(extension_id, call, input)
        .await
        .unwrap();
    assert_eq!(
        terminal_of(&child, &work).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(runs.count(), 1);
    parent.clock.advance(Duration::from_secs(1));
    let idle = projection::until::<shiitake_ext_subagents::contract::SubagentsContract>(
        &parent_session,
        |f| {
            f.rows
                .first()
                .is_some_and(|row| row.status == ChildStatus::Idle)
        },
    )
    .await;
    assert_eq!(idle.summary.needs_you, 0);
    parent.refresher.abort();
}
