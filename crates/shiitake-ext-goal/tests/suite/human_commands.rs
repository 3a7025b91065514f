//! People set, pause, resume and clear the goal through the contract and the `/goal`
//! flow; a replacement asks first and carries the observed revision. Runs' goal
//! tools are fenced by the revision they saw; only a person clears or replaces a
//! live goal, and the model may resume or replace one that paused on its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_ext_goal::contract::{
    ClearGoal, GetGoal, GoalChange, GoalContract, GoalStatus, PauseKind, SetBy, SetGoal,
};
use shiitake_ext_goal::extension_id;
use shiitake_model::Turn;
use shiitake_protocol::catalog::{ArgumentKind, FlowStep};
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

fn set(objective: &str, replace: Option<u64>, request: Option<&str>) -> SetGoal {
    SetGoal {
        objective: objective.into(),
        replace_revision: replace,
        request_id: request.map(str::to_owned),
    }
}

async fn paused_with(session: &impl SessionApi, kind: PauseKind) {
    until(session, |p| {
        p.goal
            .as_ref()
            .and_then(|g| g.pause_cause.as_ref())
            .is_some_and(|c| c.kind == kind)
    })
    .await;
}

#[tokio::test]
async fn replacing_a_goal_asks_first_and_never_replaces_a_newer_one() {
    // No script: every continuation fails at once, so the goal pauses (failed).
    let s = setup(vec![]).await;
    let session = new_session(&s.agent).await;
    let goal = bind_session_extension::<_, GoalContract>(&session);
    let first = goal
        .call(&set("Write the intro", None, None))
        .await
        .unwrap();
    paused_with(&session, PauseKind::Failed).await;
    until_idle(&session).await;
    let current = goal.call(&GetGoal {}).await.unwrap().unwrap();
    assert_eq!(current.goal_id, first.goal_id);

    let error = goal
        .call(&set("Write the outro", None, None))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Invalid);
    assert!(error.message.contains("asks first"), "{}", error.message);
    let error = goal
        .call(&set("Write the outro", Some(current.revision - 1), None))
        .await
        .unwrap_err();
    assert!(error.message.contains("not replaced"), "{}", error.message);
    assert_eq!(goal.call(&GetGoal {}).await.unwrap().unwrap(), current);

    let second = goal
        .call(&set("Write the outro", Some(current.revision), None))
        .await
        .unwrap();
    assert_eq!(second.status, GoalStatus::Live);
    assert!(
        second.revision > current.revision + 1,
        "a newer goal has a higher revision"
    );
    until_idle(&session).await;
    assert_eq!(
        goal_lines(&transcript(&session).await),
        vec!["Goal cleared: Write the intro"],
        "the replaced goal is recorded as cleared"
    );
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn commands_are_idempotent_by_request_id_and_check_the_revision() {
    let s = setup(vec![]).await;
    let session = new_session(&s.agent).await;
    let goal = bind_session_extension::<_, GoalContract>(&session);
    let first = goal
        .call(&set("Sort the inbox", None, Some("set-1")))
        .await
        .unwrap();
    let again = goal
        .call(&set("Sort the inbox", None, Some("set-1")))
        .await
        .unwrap();
    assert_eq!(first, again, "an exact retry returns the original answer");
    let error = goal
        .call(&set("Sort the mail", None, Some("set-1")))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Conflict);

    paused_with(&session, PauseKind::Failed).await;
    until_idle(&session).await;
    let current = goal.call(&GetGoal {}).await.unwrap().unwrap();
    let error = goal
        .call(&ClearGoal(GoalChange {
            revision: Some(current.revision + 1),
            request_id: None,
        }))
        .await
        .unwrap_err();
    assert!(error.message.contains("look again"), "{}", error.message);
    let cleared = goal
        .call(&ClearGoal(GoalChange {
            revision: Some(current.revision),
            request_id: None,
        }))
        .await
        .unwrap();
    assert_eq!(cleared.status, GoalStatus::Cleared);
    let p = projection(&session).await;
    assert_eq!(p.footer, None);
    assert_eq!(
        goal_lines(&transcript(&session).await),
        vec!["Goal cleared: Sort the inbox"]
    );
    let error = goal.call(&ClearGoal::default()).await.unwrap_err();
    assert!(error.message.contains("no live or paused goal"));
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn the_goal_flow_asks_then_confirms_with_the_revision() {
    let s = setup(vec![call("gate__wait")]).await;
    let session = new_session(&s.agent).await;
    let id = extension_id().unwrap();
    let catalogs = s.agent.catalogs().await.unwrap();
    let command = catalogs
        .catalogs
        .iter()
        .find(|entry| entry.catalog.extension_id == id)
        .map(|entry| entry.catalog.commands[0].clone())
        .unwrap();
    assert_eq!(
        (
            command.name.as_str(),
            command.call.as_str(),
            command.flow.as_deref()
        ),
        ("goal", "goal", Some("goal_flow"))
    );
    let step = |input: Value| {
        let session = session.clone();
        let id = id.clone();
        async move {
            let value = session
                .call_extension(&id, "goal_flow", input)
                .await
                .unwrap();
            serde_json::from_value::<FlowStep>(value).unwrap()
        }
    };
    let choices = |step: FlowStep| match step {
        FlowStep::Ask {
            kind: ArgumentKind::Choice { choices, .. },
            ..
        } => choices.into_iter().map(|c| c.value).collect::<Vec<_>>(),
        other => panic!("expected a choice, got {other:?}"),
    };
    assert_eq!(choices(step(json!({})).await), vec!["set"]);
    assert!(matches!(
        step(json!({"action": "set"})).await,
        FlowStep::Ask { argument, kind: ArgumentKind::Text { max_bytes: 2000 }, .. } if argument == "objective"
    ));
    let FlowStep::Confirm { summary, input } =
        step(json!({"action": "set", "objective": "Draft the memo"})).await
    else {
        panic!("expected a confirmation");
    };
    assert_eq!(summary, "Set the goal \"Draft the memo\"?");
    assert_eq!(
        input,
        json!({"action": "set", "objective": "Draft the memo"})
    );
    let mut call = input.clone();
    call["requestId"] = json!("flow-1");
    session.call_extension(&id, "goal", call).await.unwrap();
    active_tool(&session).await;

    assert_eq!(
        choices(step(json!({})).await),
        vec!["set", "pause", "clear"]
    );
    let FlowStep::Confirm { summary, input } =
        step(json!({"action": "set", "objective": "Draft the letter"})).await
    else {
        panic!("expected a confirmation");
    };
    assert!(
        summary.starts_with("Replace the live goal \"Draft the memo\""),
        "{summary}"
    );
    assert_eq!(input["revision"], json!(1));
    assert!(matches!(
        step(json!({"action": "resume"})).await,
        FlowStep::Unavailable { .. }
    ));
    let FlowStep::Confirm { input: pause, .. } = step(json!({"action": "pause"})).await else {
        panic!("expected a confirmation");
    };
    session.call_extension(&id, "goal", pause).await.unwrap();
    // The confirmed replacement was shown revision 1; the pause made it stale.
    let error = session
        .call_extension(&id, "goal", input)
        .await
        .unwrap_err();
    assert!(error.message.contains("not replaced"), "{}", error.message);
    assert_eq!(
        choices(step(json!({})).await),
        vec!["set", "resume", "clear"]
    );
    s.gate.open_once();
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn a_turn_that_began_before_a_person_paused_is_fenced_out() {
    let s = setup(vec![
        call("gate__wait"),
        Turn::tool_call("goal__complete", json!({})),
        Turn::text("I could not complete it."),
        // A later message from the person: this run saw the paused goal.
        Turn::tool_call("goal__complete", json!({"summary": "It is finished."})),
        Turn::text("Completed."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Label the photos").await;
    active_tool(&session).await;
    let paused = pause_goal(&session).await;
    assert_eq!(paused.pause_cause.unwrap().kind, PauseKind::Person);
    s.gate.open_once();
    until_idle(&session).await;
    let results = tool_results(&transcript(&session).await);
    assert!(
        results[1].contains("changed since this turn began"),
        "{}",
        results[1]
    );
    assert_eq!(
        projection(&session).await.goal.unwrap().status,
        GoalStatus::Paused
    );
    assert_eq!(s.model.calls(), 3, "a person-paused goal does not continue");

    let asked = send(&session, "Are the photos labelled?").await;
    terminal_of(&session, &asked).await;
    let p = projection(&session).await;
    assert_eq!(p.goal.unwrap().status, GoalStatus::Achieved);
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn the_model_cannot_replace_a_live_goal_but_resumes_or_replaces_one_paused_on_its_own() {
    let s = setup(vec![
        // The first continuation tries to replace the live goal: refused.
        Turn::tool_call("goal__create", json!({"objective": "Something easier"})),
        Turn::fail(400),
        // A person's message later: the model resumes it with the same objective...
        Turn::tool_call("goal__create", json!({"objective": "Benchmark the parser"})),
        Turn::fail(400),
        // ...and, after it failed again, replaces it with another objective.
        Turn::tool_call("goal__create", json!({"objective": "Profile the lexer"})),
        Turn::text("Switched goals."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    let first = set_goal(&session, "Benchmark the parser").await;
    paused_with(&session, PauseKind::Failed).await;
    until_idle(&session).await;
    let results = tool_results(&transcript(&session).await);
    assert!(
        results[0].contains("only a person replaces or clears a live goal"),
        "{}",
        results[0]
    );

    let asked = send(&session, "Please pick the benchmark up again").await;
    assert_eq!(
        terminal_of(&session, &asked).await.outcome,
        TerminalOutcome::Failed
    );
    let p = projection(&session).await;
    let goal = p.goal.unwrap();
    assert_eq!(goal.goal_id, first.goal_id, "resumed, not replaced");
    assert_eq!(
        goal.pause_cause.unwrap().kind,
        PauseKind::Failed,
        "then its turn failed"
    );

    let asked = send(&session, "Work on the lexer instead").await;
    terminal_of(&session, &asked).await;
    let p = projection(&session).await;
    let goal = p.goal.unwrap();
    assert_ne!(goal.goal_id, first.goal_id);
    assert_eq!(
        (goal.objective.as_str(), goal.set_by),
        ("Profile the lexer", SetBy::Model)
    );
    assert_eq!(
        goal_lines(&transcript(&session).await),
        vec!["Goal cleared: Benchmark the parser"]
    );
    s.gate.open_once();
    s.agent.close().await.unwrap();
}
