//! A goal whose model keeps calling tools without finishing stops at the host's
//! bound: after exactly the bounded number of goal turns (or once their reported
//! tokens reach the bound) it pauses as `stalled`, the detail naming the bound, with
//! the stalled attention; a person's resume gives it a fresh count.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_ext_goal::GoalBounds;
use shiitake_ext_goal::contract::{
    ATTENTION_STALLED, GoalChange, GoalContract, PauseKind, ResumeGoal, Spent,
};
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::{AgentApi, SessionApi};

fn stalled(p: &shiitake_ext_goal::contract::GoalProjection) -> bool {
    p.goal
        .as_ref()
        .and_then(|g| g.pause_cause.as_ref())
        .is_some_and(|c| c.kind == PauseKind::Stalled)
}

/// Every goal turn calls a tool, then says it is still working: it never finishes.
fn endless() -> Vec<Turn> {
    (0..20)
        .flat_map(|n| {
            [
                Turn::tool_call("test__echo", json!({"step": n})),
                Turn::text("Still working."),
            ]
        })
        .collect()
}

/// A never-finishing goal under `bounds`, run until it stalls: the fixture, its
/// Session and the stalled goal.
async fn run_to_the_bound(
    bounds: GoalBounds,
) -> (
    Setup,
    shiitake_core::LocalSession,
    shiitake_ext_goal::contract::Goal,
) {
    let s = setup_bounded(endless(), bounds).await;
    let session = new_session(&s.agent).await;
    set_goal(&session, "Refactor everything").await;
    let p = until(&session, stalled).await;
    until_idle(&session).await;
    (s, session, p.goal.unwrap())
}

#[tokio::test]
async fn a_goal_that_never_finishes_pauses_after_the_bounded_number_of_goal_turns() {
    let (s, session, goal) = run_to_the_bound(GoalBounds {
        max_turns: 3,
        max_tokens: None,
    })
    .await;
    assert_eq!(
        goal.pause_cause.unwrap().detail.as_deref(),
        Some(
            "Reached the host's bound of 3 goal turns since the goal went live; resuming allows \
             3 more"
        )
    );
    assert_eq!(goal.spent.turns, 3);
    assert_eq!(goal.continuations, 3, "no fourth continuation");
    assert_eq!(s.model.calls(), 6, "three goal turns of two calls each");
    let raised = attention(&s.store, session.session_id()).await;
    assert_eq!(
        raised,
        vec![(
            ATTENTION_STALLED.to_owned(),
            false,
            "Refactor everything".to_owned()
        )],
        "stalled attention, out of the inbox"
    );

    // A person resumes it: a fresh count, three more turns, then the bound again.
    let resumed = bind_session_extension::<_, GoalContract>(&session)
        .call(&ResumeGoal(GoalChange::default()))
        .await
        .unwrap();
    assert_eq!(resumed.spent, Spent::default());
    until(&session, |p| {
        stalled(p) && p.goal.as_ref().is_some_and(|g| g.continuations == 6)
    })
    .await;
    until_idle(&session).await;
    assert_eq!(s.model.calls(), 12);
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn goal_turns_pause_once_their_reported_tokens_reach_the_bound() {
    // The scripted model reports usage (an estimate of the context and the answer):
    // any goal turn reaches a bound of one token.
    let (s, _session, goal) = run_to_the_bound(GoalBounds {
        max_turns: 50,
        max_tokens: Some(1),
    })
    .await;
    assert_eq!(
        goal.pause_cause.unwrap().detail.as_deref(),
        Some(
            "Reached the host's bound of 1 tokens used by goal turns since the goal went live; \
             resuming allows 1 more"
        )
    );
    assert_eq!(goal.spent.turns, 1);
    assert!(goal.spent.tokens >= 1, "{:?}", goal.spent);
    assert_eq!(s.model.calls(), 2, "one goal turn ran");
    s.agent.close().await.unwrap();
}
