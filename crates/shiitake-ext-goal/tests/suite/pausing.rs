//! A live goal pauses with the right cause: a failed turn (the person's own too),
//! Esc, a prompt cancelled before it ran, a turn that cannot resume, a block, and
//! three tool-less continuations. Only blocked and stalled goals raise attention,
//! out of the inbox; pausing stops continuation, not work already accepted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_ext_goal::contract::{
    ATTENTION_BLOCKED, ATTENTION_STALLED, Footer, Goal, GoalChange, GoalContract, GoalStatus,
    PauseCause, PauseKind, ResumeGoal,
};
use shiitake_model::{Step, Turn};
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

fn paused(kind: PauseKind) -> impl Fn(&shiitake_ext_goal::contract::GoalProjection) -> bool {
    move |p| {
        p.goal
            .as_ref()
            .and_then(|g| g.pause_cause.as_ref())
            .is_some_and(|c| c.kind == kind)
    }
}

fn cause(goal: &Goal) -> PauseCause {
    goal.pause_cause.clone().unwrap()
}

#[tokio::test]
async fn a_failed_goal_turn_pauses_the_goal_without_attention() {
    let s = setup(vec![Turn::fail(400)]).await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Publish the report").await;
    let p = until(&session, paused(PauseKind::Failed)).await;
    let goal = p.goal.unwrap();
    assert_eq!(
        cause(&goal),
        PauseCause {
            kind: PauseKind::Failed,
            detail: Some("The last turn failed".into())
        }
    );
    assert_eq!(goal.live_since, None);
    assert_eq!(p.footer, Some(Footer::Paused));
    assert_eq!(p.footer.unwrap().text(0), "Goal paused (/goal resume)");
    until_idle(&session).await;
    assert_eq!(attention(&s.store, session.session_id()).await, vec![]);
    assert_eq!(s.model.calls(), 1, "a paused goal admits no continuation");
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn the_persons_own_failed_turn_pauses_it_and_accepted_work_still_runs() {
    let s = setup(vec![
        call("gate__wait"),
        Turn::text("First step taken."),
        // The person's message, queued while the first continuation worked, fails.
        Turn::fail(400),
        // The second continuation was accepted before the pause: it still runs.
        Turn::text("Second continuation ran."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Publish the report").await;
    active_tool(&session).await;
    let asked = send(&session, "Also check the figures").await;
    s.gate.open_once();
    assert_eq!(
        terminal_of(&session, &asked).await.outcome,
        TerminalOutcome::Failed
    );
    until_idle(&session).await;
    let p = projection(&session).await;
    let goal = p.goal.unwrap();
    assert_eq!(cause(&goal).kind, PauseKind::Failed);
    assert_eq!(goal.continuations, 2);
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    let outcomes: Vec<_> = snapshot.terminals.iter().map(|t| t.outcome).collect();
    assert_eq!(
        outcomes,
        vec![
            TerminalOutcome::Completed,
            TerminalOutcome::Failed,
            TerminalOutcome::Completed
        ]
    );
    assert_eq!(s.model.calls(), 4, "no continuation after the pause");
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn esc_pauses_it_and_then_the_model_may_only_complete_it() {
    let s = setup(vec![
        call("test__slow"),
        // A later message from the person: block is refused, complete is accepted.
        Turn::tool_call("goal__block", json!({"reason": "Need a key"})),
        Turn::tool_call("goal__create", json!({"objective": "Something else"})),
        Turn::tool_call("goal__complete", json!({"summary": "It was done already."})),
        Turn::text("Marked it done."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Archive old branches").await;
    active_tool(&session).await;
    session.abort().await.unwrap();
    let p = until(&session, paused(PauseKind::Cancelled)).await;
    assert_eq!(
        cause(&p.goal.unwrap()).detail.as_deref(),
        Some("A person stopped the last turn")
    );
    until_idle(&session).await;
    assert_eq!(attention(&s.store, session.session_id()).await, vec![]);

    let asked = send(&session, "Did you finish archiving?").await;
    terminal_of(&session, &asked).await;
    let results = tool_results(&transcript(&session).await);
    assert!(
        results[1].contains("only goal.complete is accepted"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("only goal.complete is accepted"),
        "{}",
        results[2]
    );
    let p = projection(&session).await;
    let goal = p.goal.unwrap();
    assert_eq!(goal.status, GoalStatus::Achieved);
    assert_eq!(
        goal_lines(&transcript(&session).await),
        vec!["Goal achieved: Archive old branches\nIt was done already."]
    );
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn cancelling_the_queued_continuation_pauses_it() {
    let s = setup(vec![call("gate__wait"), Turn::text("Person's work done.")]).await;
    let session = new_session(&s.agent).await;
    // The person's own work runs first; the continuation queues behind it.
    let first = send(&session, "Do this first").await;
    active_tool(&session).await;
    set_goal(&session, "Then keep going").await;
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    let queued = snapshot.pending.prompts[0].command_id.clone();
    assert_eq!(
        projection(&session).await.turns,
        vec![queued.as_str().to_owned()]
    );
    let outcome = session
        .cancel(CancelInput {
            command_id: queued,
            only_if_pending: Some(true),
        })
        .await
        .unwrap();
    assert!(matches!(outcome, CancelResult::Accepted(_)));
    let p = projection(&session).await;
    assert_eq!(cause(p.goal.as_ref().unwrap()).kind, PauseKind::Cancelled);
    s.gate.open_once();
    terminal_of(&session, &first).await;
    until_idle(&session).await;
    assert_eq!(s.model.calls(), 2, "nothing continues a cancelled goal");
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn three_tool_less_continuations_stall_it_and_resuming_clears_the_attention() {
    let s = setup(vec![
        Turn::text("Thinking about it."),
        Turn::text("Still thinking."),
        Turn::text("Hmm."),
        Turn::tool_call("goal__complete", json!({})),
        Turn::text("Done."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Plan the offsite").await;
    let p = until(&session, paused(PauseKind::Stalled)).await;
    let goal = p.goal.unwrap();
    assert_eq!((goal.continuations, goal.stalls), (3, 3));
    assert_eq!(
        cause(&goal).detail.as_deref(),
        Some("3 turns in a row made no tool call")
    );
    until_idle(&session).await;
    assert_eq!(s.model.calls(), 3);
    assert_eq!(
        attention(&s.store, session.session_id()).await,
        vec![(
            ATTENTION_STALLED.to_owned(),
            false,
            "Plan the offsite".to_owned()
        )]
    );
    assert_ne!(
        inbox_state(&s.agent, session.session_id()).await,
        SessionInboxState::NeedsYou,
        "goal attention stays out of the inbox"
    );

    let resumed = bind_session_extension::<_, GoalContract>(&session)
        .call(&ResumeGoal(GoalChange {
            revision: Some(goal.revision),
            request_id: None,
        }))
        .await
        .unwrap();
    assert_eq!((resumed.status, resumed.stalls), (GoalStatus::Live, 0));
    assert_eq!(attention(&s.store, session.session_id()).await, vec![]);
    until(&session, |p| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Achieved)
    })
    .await;
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn a_block_pauses_it_with_attention_once_the_turn_succeeds() {
    let s = setup(vec![
        Turn::tool_call(
            "goal__block",
            json!({"reason": "Needs the production API key"}),
        ),
        Turn::text("Blocked until someone adds the key."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Deploy the service").await;
    let p = until(&session, paused(PauseKind::Blocked)).await;
    assert_eq!(
        cause(&p.goal.unwrap()).detail.as_deref(),
        Some("Needs the production API key")
    );
    until_idle(&session).await;
    assert_eq!(
        attention(&s.store, session.session_id()).await,
        vec![(
            ATTENTION_BLOCKED.to_owned(),
            false,
            "Deploy the service".to_owned()
        )]
    );
    assert_ne!(
        inbox_state(&s.agent, session.session_id()).await,
        SessionInboxState::NeedsYou
    );
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn a_block_in_a_turn_that_fails_is_dropped_and_the_failure_pauses_it() {
    let s = setup(vec![
        Turn::new(vec![Step::tool_call(
            "goal__block",
            json!({"reason": "Needs a key"}),
        )]),
        Turn::fail(400),
    ])
    .await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Deploy the service").await;
    let p = until(&session, paused(PauseKind::Failed)).await;
    let goal = p.goal.unwrap();
    assert_eq!(goal.provisional, None, "the provisional block was dropped");
    until_idle(&session).await;
    assert_eq!(attention(&s.store, session.session_id()).await, vec![]);
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn a_goal_turn_that_cannot_resume_pauses_it_as_no_terminal() {
    let s = setup(vec![call("gate__wait")]).await;
    let session = new_session(&s.agent).await;
    let session_id = session.session_id().clone();
    set_goal(&session, "Index the archive").await;
    active_tool(&session).await;
    s.agent.close().await.unwrap();

    // Reopened with no recovery allowed: the interrupted turn settles without resuming.
    let model = std::sync::Arc::new(shiitake_model::ScriptedModel::new(
        shiitake_model::Script::new(vec![]),
    ));
    let (agent, store) = open_at(
        &s.dir.path().join("agent.db"),
        model.clone(),
        s.clock.clone(),
        &s.gate,
        |config| config.max_recoveries = 0,
    )
    .await;
    let session = agent.session(session_id);
    let p = until(&session, paused(PauseKind::NoTerminal)).await;
    assert_eq!(
        cause(&p.goal.unwrap()).detail.as_deref(),
        Some("The last turn could not resume")
    );
    until_idle(&session).await;
    assert_eq!(model.calls(), 0);
    assert_eq!(attention(&store, session.session_id()).await, vec![]);
    agent.close().await.unwrap();
}
