//! Unit tests of the goal state machine's rules.

use super::*;
use crate::contract::RECHECK_MS;

const NOW: u64 = 1_000;

fn run_settled(
    run: &str,
    outcome: TerminalOutcome,
    correlation: Option<String>,
    tool_calls: u32,
) -> RunSettled {
    RunSettled {
        run: run.into(),
        outcome,
        correlation,
        tool_calls,
        tokens: 0,
    }
}

fn set(book: &mut Book) -> Vec<Effect> {
    book.set(GoalId::new("goal_a"), "Ship it", None, NOW)
        .unwrap()
}

#[test]
fn correlations_round_trip() {
    let id = GoalId::new("goal_01J:odd");
    assert_eq!(parse_correlation(&correlation(&id, 7)), Some((id, 7)));
    assert_eq!(parse_correlation("loop:x:1"), None);
    assert_eq!(parse_correlation("continue:goal:x"), None);
}

#[test]
fn setting_a_goal_admits_one_continuation() {
    let mut book = Book::default();
    let effects = set(&mut book);
    assert_eq!(
        effects,
        vec![Effect::Admit {
            correlation: "continue:goal_a:1".into()
        }]
    );
    let goal = book.goal.clone().unwrap();
    assert_eq!(
        (goal.status, goal.revision, goal.live_since),
        (GoalStatus::Live, 1, Some(NOW))
    );
    // A human turn settling meanwhile does not stack a second continuation.
    let effects = book.settled(
        &run_settled("cmd_h", TerminalOutcome::Completed, None, 0),
        NOW,
    );
    assert_eq!(effects, vec![]);
}

#[test]
fn the_third_tool_less_continuation_stalls_and_a_tool_call_resets_the_count() {
    let mut book = Book::default();
    set(&mut book);
    let settle = |book: &mut Book, calls: u32| {
        let correlation = book.runtime.in_flight.clone();
        book.settled(
            &run_settled("cmd", TerminalOutcome::Completed, correlation, calls),
            NOW,
        )
    };
    settle(&mut book, 0);
    settle(&mut book, 0);
    assert_eq!(book.goal.as_ref().unwrap().stalls, 2);
    settle(&mut book, 1);
    assert_eq!(
        book.goal.as_ref().unwrap().stalls,
        0,
        "a tool call resets it"
    );
    settle(&mut book, 0);
    settle(&mut book, 0);
    assert_eq!(
        book.live().map(|g| g.stalls),
        Some(2),
        "two in a row stay live"
    );
    let effects = settle(&mut book, 0);
    let goal = book.goal.clone().unwrap();
    assert_eq!(goal.status, GoalStatus::Paused);
    assert_eq!(goal.pause_cause.unwrap().kind, PauseKind::Stalled);
    assert_eq!(
        effects,
        vec![Effect::Raise {
            kind: contract::ATTENTION_STALLED,
            text: "Ship it".into()
        }]
    );
}

#[test]
fn a_live_sub_agent_command_makes_a_tool_less_turn_wait_instead() {
    let mut book = Book::default();
    set(&mut book);
    book.agent_sent("child_cmd", "helper", NOW).unwrap();
    let correlation = book.runtime.in_flight.clone();
    let effects = book.settled(
        &run_settled("cmd", TerminalOutcome::Completed, correlation, 0),
        NOW,
    );
    assert_eq!(
        effects,
        vec![
            Effect::Raise {
                kind: ATTENTION_WAITING,
                text: "Waiting on helper".into()
            },
            Effect::SetRecheck {
                goal_id: GoalId::new("goal_a"),
                at: NOW + RECHECK_MS
            },
        ]
    );
    assert_eq!(book.goal.as_ref().unwrap().stalls, 0, "not a stall");
    book.runtime.timer = Some("t1".into());
    // The timer finds the child still working: it looks again later.
    assert_eq!(
        book.recheck("t1", &GoalId::new("goal_a"), NOW + RECHECK_MS),
        vec![Effect::SetRecheck {
            goal_id: GoalId::new("goal_a"),
            at: NOW + 2 * RECHECK_MS
        }]
    );
    book.runtime.timer = Some("t2".into());
    // The child replies: the goal continues.
    let effects = book.agent_update("child_cmd", AgentCommandState::Replied);
    assert_eq!(
        effects,
        vec![
            Effect::ClearTimer("t2".into()),
            Effect::Clear(ATTENTION_WAITING),
            Effect::Admit {
                correlation: "continue:goal_a:2".into()
            },
        ]
    );
}

#[test]
fn provisional_completion_applies_only_on_success() {
    for (outcome, achieved) in [
        (TerminalOutcome::Completed, true),
        (TerminalOutcome::Failed, false),
        (TerminalOutcome::Cancelled, false),
        (TerminalOutcome::Interrupted, false),
    ] {
        let mut book = Book::default();
        set(&mut book);
        let fence = book.fence();
        book.complete(fence, "cmd_run", Some("done")).unwrap();
        assert_eq!(book.live().map(|g| g.status), Some(GoalStatus::Live));
        let correlation = book.runtime.in_flight.clone();
        let effects = book.settled(&run_settled("cmd_run", outcome, correlation, 1), NOW);
        let goal = book.goal.clone().unwrap();
        assert_eq!(goal.status == GoalStatus::Achieved, achieved, "{outcome:?}");
        assert_eq!(goal.provisional, None);
        assert_eq!(
            effects
                .iter()
                .any(|e| e == &Effect::Line("Goal achieved: Ship it\ndone".into())),
            achieved
        );
    }
}

#[test]
fn a_replacement_needs_the_observed_revision() {
    let mut book = Book::default();
    set(&mut book);
    book.pause(None).unwrap();
    let revision = book.goal.as_ref().unwrap().revision;
    assert!(book.set(GoalId::new("goal_b"), "Other", None, NOW).is_err());
    assert!(
        book.set(GoalId::new("goal_b"), "Other", Some(revision - 1), NOW)
            .is_err()
    );
    assert_eq!(book.goal.as_ref().unwrap().goal_id, GoalId::new("goal_a"));
    let effects = book
        .set(GoalId::new("goal_b"), "Other", Some(revision), NOW)
        .unwrap();
    assert!(effects.contains(&Effect::Line("Goal cleared: Ship it".into())));
    assert!(effects.iter().any(
        |e| matches!(e, Effect::Archive(goal) if goal.status == GoalStatus::Cleared && goal.goal_id.as_str() == "goal_a")
    ));
    assert_eq!(book.goal.as_ref().unwrap().revision, revision + 2);
}

#[test]
fn the_marked_turns_keep_the_most_recent_sixty_four() {
    use crate::contract::MAX_MARKED_TURNS;
    let mut runtime = Runtime::default();
    for n in 0..MAX_MARKED_TURNS {
        runtime.mark_turn(format!("cmd_{n}"));
    }
    assert_eq!(runtime.turns.len(), MAX_MARKED_TURNS);
    assert_eq!(runtime.turns[0], "cmd_0");
    runtime.mark_turn("cmd_last".into());
    assert_eq!(runtime.turns.len(), MAX_MARKED_TURNS);
    assert_eq!(runtime.turns[0], "cmd_1");
    assert_eq!(runtime.turns.last().map(String::as_str), Some("cmd_last"));
}

#[test]
fn at_most_thirty_two_sub_agent_commands_are_live_and_finished_ones_are_pruned() {
    use crate::contract::MAX_AGENT_COMMANDS;
    let mut book = Book::default();
    for n in 0..MAX_AGENT_COMMANDS {
        book.agent_sent(&format!("cmd_{n:02}"), "helper", NOW + n as u64)
            .unwrap();
    }
    let refused = book.agent_sent("cmd_over", "helper", NOW).unwrap_err();
    assert!(refused.0.contains("32 sub-agent commands"), "{refused}");
    assert_eq!(
        book.agent_sent("cmd_00", "helper", NOW),
        Ok(Vec::new()),
        "recording one again is no change"
    );
    book.agent_update("cmd_00", AgentCommandState::Settled);
    book.agent_sent("cmd_new", "helper", NOW + 100).unwrap();
    assert_eq!(
        book.agents.len(),
        MAX_AGENT_COMMANDS,
        "the finished one made room"
    );
    assert!(!book.agents.contains_key("cmd_00"));
    assert_eq!(book.live_agents().count(), MAX_AGENT_COMMANDS);
}

/// Settles the continuation in flight with a tool call and `tokens` under `bounds`.
fn settle_goal_turn(book: &mut Book, tokens: u64, bounds: &GoalBounds) -> Vec<Effect> {
    let correlation = book.runtime.in_flight.clone();
    let mut settled = run_settled("cmd", TerminalOutcome::Completed, correlation, 1);
    settled.tokens = tokens;
    book.settled_within(&settled, NOW, bounds)
}

fn stalled_detail(book: &Book) -> String {
    let goal = book.goal.clone().unwrap();
    assert_eq!(goal.status, GoalStatus::Paused);
    let cause = goal.pause_cause.unwrap();
    assert_eq!(cause.kind, PauseKind::Stalled);
    cause.detail.unwrap()
}

#[test]
fn goal_turns_pause_at_the_hosts_turn_bound_and_resuming_starts_a_fresh_count() {
    let bounds = GoalBounds {
        max_turns: 3,
        max_tokens: None,
    };
    let mut book = Book::default();
    set(&mut book);
    for turn in 1..3 {
        let effects = settle_goal_turn(&mut book, 1_000_000, &bounds);
        assert!(
            matches!(effects.as_slice(), [Effect::Admit { .. }]),
            "turn {turn} of 3 continues: {effects:?}"
        );
    }
    // A person's turn does not count against the goal's bound.
    book.settled(
        &run_settled("cmd_h", TerminalOutcome::Completed, None, 2),
        NOW,
    );
    assert_eq!(book.live().unwrap().spent.turns, 2);
    let effects = settle_goal_turn(&mut book, 0, &bounds);
    assert_eq!(
        effects,
        vec![Effect::Raise {
            kind: contract::ATTENTION_STALLED,
            text: "Ship it".into()
        }],
        "the third turn pauses; no fourth is admitted"
    );
    assert_eq!(
        stalled_detail(&book),
        "Reached the host's bound of 3 goal turns since the goal went live; resuming allows 3 more"
    );
    let effects = book.resume(None, NOW).unwrap();
    assert!(effects.iter().any(|e| matches!(e, Effect::Admit { .. })));
    assert_eq!(book.live().unwrap().spent, Spent::default());
}

#[test]
fn goal_turns_pause_at_the_hosts_token_bound_not_one_token_before() {
    let bounds = GoalBounds {
        max_turns: 50,
        max_tokens: Some(100),
    };
    let mut book = Book::default();
    set(&mut book);
    settle_goal_turn(&mut book, 99, &bounds);
    assert_eq!(
        book.live().map(|g| g.spent),
        Some(Spent {
            turns: 1,
            tokens: 99
        }),
        "one token below the bound stays live"
    );
    settle_goal_turn(&mut book, 1, &bounds);
    assert_eq!(
        stalled_detail(&book),
        "Reached the host's bound of 100 tokens used by goal turns since the goal went live; \
         resuming allows 100 more"
    );
    // Without a token bound (a provider that reports none) only turns count.
    let mut book = Book::default();
    set(&mut book);
    let unbounded = GoalBounds {
        max_turns: 2,
        max_tokens: None,
    };
    settle_goal_turn(&mut book, u64::MAX, &unbounded);
    assert!(book.live().is_some());
    // A bound of 0 turns counts as 1.
    let zero = GoalBounds {
        max_turns: 0,
        max_tokens: None,
    };
    assert_eq!(
        zero.reached(&Spent {
            turns: 1,
            tokens: 0
        }),
        Some(Reached::Turns(1))
    );
    assert_eq!(zero.reached(&Spent::default()), None);
}
