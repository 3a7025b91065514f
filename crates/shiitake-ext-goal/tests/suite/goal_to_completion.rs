//! A goal runs to completion over several continuations on a real Agent with the
//! scripted model: each continuation is admitted with Goal's correlation and gets
//! the directive, the goal turns are marked in the projection, and the transcript
//! ends with one closing chat line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_ext_goal::contract::{
    CONTEXT_SECTION_BYTES, Footer, GoalStatus, MAX_OBJECTIVE_BYTES, SetBy,
};
use shiitake_model::Turn;
use shiitake_protocol::*;

const DIRECTIVE: &str = "This turn continues the goal on its own";
const CONTEXT: &str = "Session goal (revision";

#[tokio::test]
async fn a_goal_runs_to_completion_over_several_continuations() {
    let s = setup(vec![
        Turn::tool_call("test__echo", json!({"step": 1})),
        Turn::text("Step one is done."),
        Turn::tool_call("test__echo", json!({"step": 2})),
        Turn::text("Step two is done."),
        Turn::tool_call(
            "goal__complete",
            json!({"summary": "The changelog is tidy."}),
        ),
        Turn::text("The goal is achieved."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    let goal = set_goal(&session, "Tidy the changelog").await;
    assert_eq!(
        (goal.status, goal.revision, goal.set_by),
        (GoalStatus::Live, 1, SetBy::Person)
    );
    assert_eq!(Footer::of(&goal), Some(Footer::Pursuing { since: START }));
    assert_eq!(
        Footer::of(&goal).unwrap().text(0),
        "Pursuing goal since 00:00"
    );

    let done = until(&session, |p| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Achieved)
    })
    .await;
    until_idle(&session).await;
    let goal = done.goal.unwrap();
    assert_eq!(goal.continuations, 3, "three continuations did the work");
    assert_eq!(goal.ended_at, Some(START));
    assert_eq!(done.footer, None, "a finished goal leaves the footer");
    assert_eq!(
        s.model.calls(),
        6,
        "nothing ran after the goal was achieved"
    );

    // Every model call was a goal turn: context and directive, both bounded.
    for prompt in system_prompts(&s.model) {
        assert!(
            prompt.contains(CONTEXT) && prompt.contains(DIRECTIVE),
            "{prompt}"
        );
    }

    // The projection marks exactly the goal turns; their messages carry those ids.
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    let projection = decode(&snapshot.extensions).unwrap();
    assert_eq!(projection.turns.len(), 3);
    let commands: Vec<String> = snapshot
        .terminals
        .iter()
        .map(|t| t.command_id.as_str().to_owned())
        .collect();
    assert_eq!(
        commands, projection.turns,
        "each goal turn settled once, in order"
    );
    let marked = snapshot
        .messages
        .iter()
        .filter(|m| {
            m.command_id
                .as_ref()
                .is_some_and(|id| projection.turns.contains(&id.as_str().to_owned()))
        })
        .count();
    assert_eq!(
        marked,
        snapshot.messages.len() - 1,
        "all but the closing line"
    );

    // One closing chat line, after the last work.
    let messages = transcript(&session).await;
    assert_eq!(
        goal_lines(&messages),
        vec!["Goal achieved: Tidy the changelog\nThe changelog is tidy."]
    );
    assert_eq!(
        outline(&messages).last().map(String::as_str),
        Some("user: Goal achieved: Tidy the changelog\nThe changelog is tidy.")
    );
    assert_eq!(snapshot.messages.last().unwrap().command_id, None);
    assert_eq!(
        outline(&messages)[..3],
        [
            "user: Continue working toward the goal.",
            "assistant: -> test__echo",
            "tool test__echo: {\"echo\":{\"step\":1}}",
        ]
    );
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn a_persons_message_gets_the_goal_context_without_the_directive() {
    let s = setup(vec![
        // The first continuation waits at the gate while the person writes.
        call("gate__wait"),
        Turn::text("Waited."),
        Turn::text("Here is the status you asked for."),
        Turn::tool_call("goal__complete", json!({})),
        Turn::text("Done."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Migrate the settings page").await;
    active_tool(&session).await;
    let asked = send(&session, "How far along are you?").await;
    s.gate.open_once();
    terminal_of(&session, &asked).await;
    until(&session, |p| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Achieved)
    })
    .await;
    let prompts = system_prompts(&s.model);
    assert_eq!(prompts.len(), 5);
    let with_directive: Vec<bool> = prompts.iter().map(|p| p.contains(DIRECTIVE)).collect();
    // Calls 1-2: the first continuation; 3: the person's message; 4-5: the next continuation.
    assert_eq!(with_directive, vec![true, true, false, true, true]);
    assert!(prompts.iter().all(|p| p.contains(CONTEXT)));
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn the_goal_context_is_bounded_in_bytes() {
    let s = setup(vec![
        Turn::tool_call("goal__complete", json!({})),
        Turn::text("Done."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    let objective = "é".repeat(MAX_OBJECTIVE_BYTES / 2);
    set_goal(&session, &objective).await;
    until(&session, |p| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Achieved)
    })
    .await;
    let prompt = &system_prompts(&s.model)[0];
    let start = prompt.find(CONTEXT).unwrap();
    let end = prompt.find(DIRECTIVE).unwrap();
    let context = prompt[start..end].trim_end();
    assert!(
        context.len() <= CONTEXT_SECTION_BYTES,
        "{} bytes",
        context.len()
    );
    assert!(context.contains(&objective), "a full objective fits");
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn the_model_creates_a_goal_in_a_persons_turn_and_continuations_follow() {
    let s = setup(vec![
        Turn::tool_call("goal__create", json!({"objective": "Rename the crate"})),
        Turn::text("I set a goal and will keep at it."),
        Turn::tool_call("goal__complete", json!({"summary": "Renamed."})),
        Turn::text("Finished."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    let asked = send(&session, "Please rename the crate, take your time").await;
    terminal_of(&session, &asked).await;
    let done = until(&session, |p| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Achieved)
    })
    .await;
    let goal = done.goal.unwrap();
    assert_eq!((goal.set_by, goal.continuations), (SetBy::Model, 1));
    assert_eq!(done.turns.len(), 1, "the person's turn is not a goal turn");
    assert!(!done.turns.contains(&asked.as_str().to_owned()));
    let prompts = system_prompts(&s.model);
    assert!(
        !prompts[0].contains(CONTEXT),
        "no goal yet when the turn began"
    );
    assert!(prompts[2].contains(DIRECTIVE));
    assert_eq!(
        goal_lines(&transcript(&session).await),
        vec!["Goal achieved: Rename the crate\nRenamed."]
    );
    s.agent.close().await.unwrap();
}
