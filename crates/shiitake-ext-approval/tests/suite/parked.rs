//! A call that does not wait: parked when its wait is spent (a 60 s deadline leaves
//! none once the wait's minute is kept back) or a steer arrives, shown to the model in
//! later runs' prompt, answered later through one follow-up prompt (allow once lets
//! the model's identical call run once; deny carries the reason); a cancelled run
//! withdraws what it held; the `/approve` flow and catalog.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_ext_approval::contract::{
    AnswerApproval, ApprovalContract, ApprovalId, Decision, Delivery, EXTENSION_ID,
};
use shiitake_ext_testkit::{TestAgent, inbox_state, system_prompts, user_texts};
use shiitake_model::Turn;
use shiitake_protocol::catalog::FlowStep;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

async fn agent(dir: &std::path::Path, turns: Vec<Turn>, deadline: Duration) -> TestAgent {
    TestAgent::builder()
        .turns(turns)
        .tools(catalog(dir, false).await)
        .configure(move |config| config.tool_timeout = deadline)
        .kit_extension(shiitake_ext_approval::extension(ask_policy()).unwrap())
        .open()
        .await
}

fn answer(
    id: &ApprovalId,
    request: &str,
    decision: Decision,
    reason: Option<&str>,
) -> AnswerApproval {
    AnswerApproval {
        approval_id: id.clone(),
        request_id: request.into(),
        decision,
        reason: reason.map(str::to_owned),
    }
}

#[tokio::test]
async fn a_parked_call_allowed_once_resumes_through_one_follow_up_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut turns = write_then("later", "Asked; going on.");
    turns.extend(write_then("later", "Written after the approval."));
    let kit = agent(dir.path(), turns, Duration::from_secs(60)).await;
    let session = kit.session().await;
    let first = send(&session, "Write later").await;
    assert_eq!(
        terminal_of(&session, &first).await.outcome,
        TerminalOutcome::Completed
    );
    let results = tool_texts(&transcript(&session).await);
    assert!(
        results[0].starts_with(
            "not run yet: this call of notes__write waits for a person's approval (ap1)"
        ),
        "{results:?}"
    );
    let waiting = waiting(&session).await;
    assert!(waiting[0].parked);
    assert_eq!(
        inbox_state(&kit.agent, session.session_id()).await,
        SessionInboxState::NeedsYou
    );
    assert!(notes(dir.path()).is_empty());

    let receipt = bind_session_extension::<_, ApprovalContract>(&session)
        .call(&answer(
            &waiting[0].approval_id,
            "later-1",
            Decision::AllowOnce,
            None,
        ))
        .await
        .unwrap();
    assert_eq!(receipt.delivery, Delivery::FollowUp);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while notes(dir.path()).is_empty() || !inbox_idle(&kit, &session).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the follow-up did not run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let messages = transcript(&session).await;
    let prompts = user_texts(&messages);
    assert_eq!(
        prompts.len(),
        2,
        "the prompt and one follow-up: {prompts:?}"
    );
    assert!(
        prompts[1]
            .starts_with("[approval ap1] The person allowed your earlier call of notes__write")
    );
    assert_eq!(tool_texts(&messages)[1], "written");
    assert_eq!(notes(dir.path()), ["later"], "once");
    assert!(self::waiting(&session).await.is_empty());
}

async fn inbox_idle(kit: &TestAgent, session: &impl SessionApi) -> bool {
    inbox_state(&kit.agent, session.session_id()).await == SessionInboxState::Done
}

#[tokio::test]
async fn a_steer_parks_the_call_later_runs_are_told_and_a_parked_denial_carries_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::tool_call("notes__write", json!({"text": "draft"})),
        Turn::text("Steered."),
        Turn::text("Did the other thing."),
        Turn::text("Understood, not written."),
    ];
    let kit = agent(dir.path(), turns, Duration::from_secs(120)).await;
    let session = kit.session().await;
    let first = send(&session, "Write the draft").await;
    until_waiting(&session, 1).await;
    steer(&session, "never mind that").await;
    terminal_of(&session, &first).await;
    let messages = transcript(&session).await;
    assert!(
        tool_texts(&messages)[0].starts_with("not run yet"),
        "parked by the steer"
    );
    assert_eq!(user_texts(&messages)[1], "never mind that");
    let waiting = waiting(&session).await;
    assert!(waiting[0].parked);
    let other = send(&session, "Do the other thing").await;
    terminal_of(&session, &other).await;
    let prompts = system_prompts(&kit.model);
    assert!(
        !prompts[0].contains("waiting for a person's approval"),
        "nothing waited when the first run began"
    );
    assert!(
        prompts[2].contains("Tool calls waiting for a person's approval")
            && prompts[2].contains("- ap1: approve notes__write? {\"text\":\"draft\"}"),
        "a later run is told: {}",
        prompts[2]
    );

    bind_session_extension::<_, ApprovalContract>(&session)
        .call(&answer(
            &waiting[0].approval_id,
            "deny-1",
            Decision::Deny,
            Some("keep the draft local"),
        ))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while kit.model.requests().len() < 4 || !inbox_idle(&kit, &session).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the follow-up did not run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let prompts = user_texts(&transcript(&session).await);
    assert!(
        prompts[3].contains("The person denied your earlier call of notes__write")
            && prompts[3].ends_with("Their reason: keep the draft local"),
        "{prompts:?}"
    );
    assert!(notes(dir.path()).is_empty());
}

#[tokio::test]
async fn a_cancelled_run_withdraws_the_call_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let kit = agent(
        dir.path(),
        write_then("x", "never"),
        Duration::from_secs(120),
    )
    .await;
    let session = kit.session().await;
    let first = send(&session, "Write x").await;
    let waiting = until_waiting(&session, 1).await;
    session.abort().await.unwrap();
    assert_eq!(
        terminal_of(&session, &first).await.outcome,
        TerminalOutcome::Cancelled
    );
    until_waiting(&session, 0).await;
    let refused = bind_session_extension::<_, ApprovalContract>(&session)
        .call(&answer(
            &waiting[0].approval_id,
            "late",
            Decision::AllowOnce,
            None,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Conflict);
    assert!(refused.message.contains("withdrawn"), "{}", refused.message);
    assert_eq!(
        inbox_state(&kit.agent, session.session_id()).await,
        SessionInboxState::Done
    );
    assert!(notes(dir.path()).is_empty());
}

#[tokio::test]
async fn the_approve_flow_walks_a_waiting_call_to_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let kit = agent(
        dir.path(),
        write_then("flow", "Done."),
        Duration::from_secs(120),
    )
    .await;
    let catalogs = kit.agent.catalogs().await.unwrap();
    let approve = catalogs
        .catalogs
        .iter()
        .flat_map(|entry| &entry.catalog.commands)
        .find(|command| command.name == "approve")
        .expect("/approve is advertised");
    assert_eq!(approve.flow.as_deref(), Some("answer_flow"));
    let session = kit.session().await;
    let first = send(&session, "Write flow").await;
    until_waiting(&session, 1).await;
    let id = ExtensionId::new(EXTENSION_ID).unwrap();
    let step = |input: serde_json::Value| {
        let session = &session;
        let id = id.clone();
        async move {
            serde_json::from_value::<FlowStep>(
                session
                    .call_extension(&id, "answer_flow", input)
                    .await
                    .unwrap(),
            )
            .unwrap()
        }
    };
    assert!(
        matches!(step(json!({})).await, FlowStep::Ask { argument, .. } if argument == "decision")
    );
    let FlowStep::Confirm { input, summary } = step(json!({"decision": "allow_once"})).await else {
        panic!("the flow did not confirm");
    };
    assert_eq!(summary, "Allow once: notes__write");
    let mut input = input;
    input["requestId"] = json!("flow-1");
    session.call_extension(&id, "answer", input).await.unwrap();
    assert_eq!(
        terminal_of(&session, &first).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(notes(dir.path()), ["flow"]);
}
