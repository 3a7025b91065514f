//! The stall rule next to sub-agent commands. The conversation-agents roster records
//! the commands this Session sends through `shiitake_ext_goal::roster` (here a test
//! double runs those transactions with `LocalSession::host_transaction`). A tool-less
//! goal turn while a recorded command is live waits instead of counting a stall:
//! `goal-waiting` attention, a recheck on a core timer (a paused clock), and the
//! goal continues once the child settles or replies.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::LocalSession;
use shiitake_core::extension::HookError;
use shiitake_ext_goal::contract::{ATTENTION_WAITING, AgentCommandState, GoalStatus, RECHECK_MS};
use shiitake_ext_goal::{extension_id, roster};
use shiitake_model::Turn;
use shiitake_protocol::*;

/// Stands in for the conversation-agents roster: it records what the parent Session
/// sent and how the child's work went, through Goal's host API.
struct FakeRoster {
    parent: LocalSession,
}

impl FakeRoster {
    async fn run(
        &self,
        body: impl Fn(&mut shiitake_core::extension::Tx<'_>) -> Result<serde_json::Value, HookError>
        + Send
        + Sync
        + 'static,
    ) -> serde_json::Value {
        self.parent
            .host_transaction(&extension_id().unwrap(), body)
            .await
            .unwrap()
    }

    async fn sent(&self, command: &'static str, agent: &'static str) {
        self.run(move |tx| roster::command_sent(tx, command, agent))
            .await;
    }

    async fn settled(&self, command: &'static str) {
        self.run(move |tx| roster::command_settled(tx, command))
            .await;
    }

    async fn replied(&self, command: &'static str) {
        self.run(move |tx| roster::command_replied(tx, command))
            .await;
    }
}

async fn next_due(store: &shiitake_store_sqlite::SqliteStore) -> Option<u64> {
    use shiitake_core::store::Store;
    store.next_timer().await.unwrap().map(|timer| timer.due_at)
}

/// Waits (bounded) until the soonest timer is due at `at`: the recheck was re-armed.
async fn until_next_due(store: &shiitake_store_sqlite::SqliteStore, at: u64) {
    for _ in 0..500 {
        if next_due(store).await == Some(at) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the recheck timer was not set again for {at}");
}

fn waiting(p: &shiitake_ext_goal::contract::GoalProjection) -> bool {
    p.goal.as_ref().is_some_and(|g| g.waiting)
}

#[tokio::test]
async fn a_tool_less_goal_turn_waits_on_a_live_sub_agent_command_and_continues_on_its_reply() {
    let s = setup(vec![
        Turn::text("The helper is on it; nothing for me to do yet."),
        Turn::tool_call("test__echo", json!({"read": "helper's reply"})),
        Turn::tool_call(
            "goal__complete",
            json!({"summary": "Merged the helper's work."}),
        ),
        Turn::text("Done."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    let roster = FakeRoster {
        parent: session.clone(),
    };
    roster.sent("cmd_child_1", "helper").await;
    set_goal(&session, "Merge the helper's branch").await;

    let p = until(&session, waiting).await;
    until_idle(&session).await;
    let goal = p.goal.clone().unwrap();
    assert_eq!(
        (goal.status, goal.stalls),
        (GoalStatus::Live, 0),
        "not a stall"
    );
    assert_eq!(p.waiting_on.len(), 1);
    assert_eq!(p.waiting_on[0].agent, "helper");
    assert_eq!(
        attention(&s.store, session.session_id()).await,
        vec![(
            ATTENTION_WAITING.to_owned(),
            false,
            "Waiting on helper".to_owned()
        )]
    );
    assert_eq!(s.model.calls(), 1);

    // The recheck timer fires on the paused clock; the child still works: the goal
    // sets the next recheck and waits on.
    assert_eq!(next_due(&s.store).await, Some(START + RECHECK_MS));
    for n in 2..=3u64 {
        s.clock.advance(Duration::from_millis(RECHECK_MS));
        until_next_due(&s.store, START + n * RECHECK_MS).await;
        until_idle(&session).await;
        assert!(waiting(&projection(&session).await));
        assert_eq!(s.model.calls(), 1, "no continuation while the child works");
    }

    roster.replied("cmd_child_1").await;
    let done = until(&session, |p| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Achieved)
    })
    .await;
    assert!(done.waiting_on.is_empty());
    assert_eq!(attention(&s.store, session.session_id()).await, vec![]);
    assert_eq!(s.model.calls(), 4);
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn without_a_live_sub_agent_command_three_tool_less_turns_stall_it() {
    let s = setup(vec![
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("three"),
    ])
    .await;
    let session = new_session(&s.agent).await;
    let roster = FakeRoster {
        parent: session.clone(),
    };
    // The child settled before the goal turns: nothing live to wait on.
    roster.sent("cmd_child_1", "helper").await;
    roster.settled("cmd_child_1").await;
    set_goal(&session, "Merge the helper's branch").await;
    let p = until(&session, |p| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Paused)
    })
    .await;
    assert_eq!(p.goal.unwrap().stalls, 3);
    assert!(p.waiting_on.is_empty());
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn the_child_settling_continues_a_waiting_goal() {
    let s = setup(vec![
        Turn::text("Waiting for the helper."),
        Turn::tool_call("goal__complete", json!({})),
        Turn::text("Done."),
    ])
    .await;
    let session = new_session(&s.agent).await;
    let roster = FakeRoster {
        parent: session.clone(),
    };
    roster.sent("cmd_child_2", "reviewer").await;
    set_goal(&session, "Get the review done").await;
    until(&session, waiting).await;
    roster.settled("cmd_child_2").await;
    let done = until(&session, |p| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Achieved)
    })
    .await;
    assert_eq!(done.goal.unwrap().continuations, 2);
    s.agent.close().await.unwrap();
}

#[tokio::test]
async fn the_roster_api_records_idempotently_and_reads_back() {
    let s = setup(vec![]).await;
    let session = new_session(&s.agent).await;
    let roster = FakeRoster {
        parent: session.clone(),
    };
    roster.sent("cmd_a", "helper").await;
    roster.sent("cmd_a", "helper").await;
    roster.sent("cmd_b", "reviewer").await;
    let live = roster.run(|tx| Ok(json!(roster::live_commands(tx)?))).await;
    let agents: Vec<&str> = live
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, vec!["helper", "reviewer"]);
    roster.replied("cmd_a").await;
    // A reply for a command never recorded, or a second one, changes nothing.
    roster.replied("cmd_unknown").await;
    roster.settled("cmd_a").await;
    let p = projection(&session).await;
    assert_eq!(p.waiting_on.len(), 1);
    assert_eq!(p.waiting_on[0].command_id, "cmd_b");
    assert_eq!(p.waiting_on[0].state, AgentCommandState::Live);
    s.agent.close().await.unwrap();
}
