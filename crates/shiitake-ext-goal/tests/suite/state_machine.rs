//! Property tests of the goal state machine: random sequences of model tools, human
//! commands, runs starting and settling (every outcome), queued prompts cancelled,
//! recheck timers and sub-agent commands. After every step they check the pause
//! rules (the host's bound on goal turns and tokens among them, set small here), the
//! fencing, provisional completion and blocking, the attention, the one continuation
//! in flight and the shape of the row.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proptest::prelude::*;
use shiitake_ext_goal::contract::{
    ATTENTION_BLOCKED, ATTENTION_STALLED, ATTENTION_WAITING, AgentCommandState, Goal, GoalId,
    GoalStatus, PauseKind, ProvisionalAction, STALL_LIMIT,
};
use shiitake_ext_goal::state::{
    Book, Effect, Fence, GoalBounds, Reached, RunSettled, parse_correlation,
};
use shiitake_protocol::TerminalOutcome;

#[derive(Clone, Copy, Debug)]
enum Seen {
    Current,
    Stale,
    Missing,
}

#[derive(Clone, Debug)]
enum Op {
    Prompt,
    Start,
    OtherTool,
    Create(usize),
    Complete,
    Block,
    /// The running run settles, its model having reported these tokens.
    Settle(TerminalOutcome, u64),
    /// The next queued prompt runs and settles `completed` without a tool call.
    QuietTurn(u64),
    CancelQueued,
    Set(usize, Seen),
    Pause(Seen),
    Resume(Seen),
    Clear(Seen),
    FireTimer,
    AgentSent(usize),
    AgentDone(usize, AgentCommandState),
}

const OBJECTIVES: [&str; 3] = ["Ship the release", "Fix the flaky test", "Write the docs"];

/// Small bounds, so random sequences reach both.
const BOUNDS: GoalBounds = GoalBounds {
    max_turns: 5,
    max_tokens: Some(10),
};

fn tokens() -> impl Strategy<Value = u64> {
    0..=4u64
}

fn seen() -> impl Strategy<Value = Seen> {
    prop_oneof![Just(Seen::Current), Just(Seen::Stale), Just(Seen::Missing)]
}

fn outcome() -> impl Strategy<Value = TerminalOutcome> {
    prop_oneof![
        9 => Just(TerminalOutcome::Completed),
        1 => Just(TerminalOutcome::Failed),
        1 => Just(TerminalOutcome::Cancelled),
        1 => Just(TerminalOutcome::Interrupted),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Prompt),
        6 => Just(Op::Start),
        3 => Just(Op::OtherTool),
        2 => (0..OBJECTIVES.len()).prop_map(Op::Create),
        2 => Just(Op::Complete),
        1 => Just(Op::Block),
        6 => (outcome(), tokens()).prop_map(|(o, t)| Op::Settle(o, t)),
        4 => tokens().prop_map(Op::QuietTurn),
        1 => Just(Op::CancelQueued),
        2 => ((0..OBJECTIVES.len()), seen()).prop_map(|(o, s)| Op::Set(o, s)),
        1 => seen().prop_map(Op::Pause),
        2 => seen().prop_map(Op::Resume),
        1 => seen().prop_map(Op::Clear),
        2 => Just(Op::FireTimer),
        1 => (0..3usize).prop_map(Op::AgentSent),
        1 => ((0..3usize), prop_oneof![Just(AgentCommandState::Settled), Just(AgentCommandState::Replied)])
            .prop_map(|(k, s)| Op::AgentDone(k, s)),
    ]
}

#[derive(Clone, Debug)]
struct Queued {
    id: String,
    correlation: Option<String>,
}

#[derive(Clone, Debug)]
struct Running {
    id: String,
    correlation: Option<String>,
    fence: Fence,
    tool_calls: u32,
    tokens: u64,
}

#[derive(Debug, Default)]
struct World {
    book: Book,
    queue: VecDeque<Queued>,
    running: Option<Running>,
    attention: BTreeSet<&'static str>,
    timers: BTreeMap<String, GoalId>,
    lines: Vec<String>,
    archived: Vec<Goal>,
    /// The run (or cancelled prompt) the last op settled, with its outcome.
    settled: Option<(TerminalOutcome, Running)>,
    next: u64,
    now: u64,
}

impl World {
    fn mint(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Admit { correlation } => {
                    assert!(
                        self.book.live().is_some_and(|g| !g.waiting),
                        "a continuation is admitted only for a live goal that does not wait"
                    );
                    let id = self.mint("cmd_c");
                    self.book.runtime.mark_turn(id.clone());
                    self.queue.push_back(Queued {
                        id,
                        correlation: Some(correlation),
                    });
                }
                Effect::Raise { kind, .. } => {
                    self.attention.insert(kind);
                }
                Effect::Clear(kind) => {
                    self.attention.remove(kind);
                }
                Effect::SetRecheck { goal_id, .. } => {
                    let id = self.mint("timer_");
                    self.book.runtime.timer = Some(id.clone());
                    self.timers.insert(id, goal_id);
                }
                Effect::ClearTimer(id) => {
                    self.timers.remove(&id);
                }
                Effect::Line(line) => self.lines.push(line),
                Effect::Archive(goal) => self.archived.push(goal),
            }
        }
    }

    /// Runs one op; answers whether a model or person request was accepted.
    fn step(&mut self, op: &Op) -> Option<bool> {
        self.now += 1_000;
        self.settled = None;
        let now = self.now;
        let revision_for = |book: &Book, seen: Seen| match (seen, book.active()) {
            (Seen::Current, Some(goal)) => Some(goal.revision),
            (Seen::Stale, Some(goal)) => Some(goal.revision.saturating_sub(1)),
            (Seen::Stale, None) => Some(0),
            _ => None,
        };
        let result = match op {
            Op::Prompt => {
                let id = self.mint("cmd_p");
                self.queue.push_back(Queued {
                    id,
                    correlation: None,
                });
                return None;
            }
            Op::Start => {
                if self.running.is_none()
                    && let Some(next) = self.queue.pop_front()
                {
                    self.running = Some(Running {
                        id: next.id,
                        correlation: next.correlation,
                        fence: self.book.fence(),
                        tool_calls: 0,
                        tokens: 0,
                    });
                }
                return None;
            }
            Op::OtherTool => {
                if let Some(run) = &mut self.running {
                    run.tool_calls += 1;
                }
                return None;
            }
            Op::Create(objective) => {
                let run = self.running.as_mut()?;
                run.tool_calls += 1;
                let fence = run.fence;
                let id = GoalId::new(format!("goal_{}", self.next + 1));
                self.next += 1;
                let result = self.book.create(fence, id, OBJECTIVES[*objective], now);
                if result.is_ok() {
                    let fence = self.book.fence();
                    self.running.as_mut().unwrap().fence = fence;
                }
                result
            }
            Op::Complete | Op::Block => {
                let run = self.running.as_mut()?;
                run.tool_calls += 1;
                let (fence, id) = (run.fence, run.id.clone());
                let result = match op {
                    Op::Complete => self.book.complete(fence, &id, Some("done")),
                    _ => self.book.block(fence, &id, "needs a key"),
                };
                if result.is_ok() {
                    let fence = self.book.fence();
                    self.running.as_mut().unwrap().fence = fence;
                }
                result
            }
            Op::Settle(outcome, tokens) => {
                let mut run = self.running.take()?;
                run.tokens = *tokens;
                self.settled = Some((*outcome, run.clone()));
                let effects = self.book.settled_within(
                    &RunSettled {
                        run: run.id,
                        outcome: *outcome,
                        correlation: run.correlation,
                        tool_calls: run.tool_calls,
                        tokens: *tokens,
                    },
                    now,
                    &BOUNDS,
                );
                Ok(effects)
            }
            Op::QuietTurn(tokens) => {
                if self.running.is_some() {
                    return None;
                }
                let next = self.queue.pop_front()?;
                let mut run = quiet(&self.book, &next);
                run.tokens = *tokens;
                self.settled = Some((TerminalOutcome::Completed, run));
                Ok(self.book.settled_within(
                    &RunSettled {
                        run: next.id,
                        outcome: TerminalOutcome::Completed,
                        correlation: next.correlation,
                        tool_calls: 0,
                        tokens: *tokens,
                    },
                    now,
                    &BOUNDS,
                ))
            }
            Op::CancelQueued => {
                let queued = self.queue.pop_front()?;
                self.settled = Some((TerminalOutcome::Cancelled, quiet(&self.book, &queued)));
                Ok(self.book.settled_within(
                    &RunSettled {
                        run: queued.id,
                        outcome: TerminalOutcome::Cancelled,
                        correlation: queued.correlation,
                        tool_calls: 0,
                        tokens: 0,
                    },
                    now,
                    &BOUNDS,
                ))
            }
            Op::Set(objective, seen) => {
                let revision = revision_for(&self.book, *seen);
                let id = GoalId::new(format!("goal_{}", self.next + 1));
                self.next += 1;
                self.book.set(id, OBJECTIVES[*objective], revision, now)
            }
            Op::Pause(seen) => {
                let revision = revision_for(&self.book, *seen);
                self.book.pause(revision)
            }
            Op::Resume(seen) => {
                let revision = revision_for(&self.book, *seen);
                self.book.resume(revision, now)
            }
            Op::Clear(seen) => {
                let revision = revision_for(&self.book, *seen);
                self.book.clear(revision, now)
            }
            Op::FireTimer => {
                let (id, goal_id) = self.timers.pop_first()?;
                Ok(self.book.recheck(&id, &goal_id, now))
            }
            Op::AgentSent(k) => self.book.agent_sent(&format!("child_{k}"), "helper", now),
            Op::AgentDone(k, state) => Ok(self.book.agent_update(&format!("child_{k}"), *state)),
        };
        match result {
            Ok(effects) => {
                self.apply(effects);
                Some(true)
            }
            Err(_) => Some(false),
        }
    }
}

/// A prompt that settles without having called a tool.
fn quiet(book: &Book, queued: &Queued) -> Running {
    Running {
        id: queued.id.clone(),
        correlation: queued.correlation.clone(),
        fence: book.fence(),
        tool_calls: 0,
        tokens: 0,
    }
}

fn shape(goal: &Goal) {
    assert_eq!(
        goal.status == GoalStatus::Paused,
        goal.pause_cause.is_some(),
        "{goal:?}"
    );
    assert_eq!(
        goal.status == GoalStatus::Live,
        goal.live_since.is_some(),
        "{goal:?}"
    );
    if !goal.status.is_active() {
        assert!(
            goal.ended_at.is_some() && goal.provisional.is_none(),
            "{goal:?}"
        );
    }
    if goal.waiting {
        assert_eq!(goal.status, GoalStatus::Live, "only a live goal waits");
    }
    if goal.status == GoalStatus::Live {
        assert!(goal.stalls < STALL_LIMIT, "{goal:?}");
        assert_eq!(
            BOUNDS.reached(&goal.spent),
            None,
            "a live goal is within the bounds"
        );
    }
}

fn visible(goal: &Goal) -> impl PartialEq + std::fmt::Debug + '_ {
    (
        &goal.goal_id,
        &goal.objective,
        goal.status,
        &goal.pause_cause,
        &goal.provisional,
    )
}

fn kind(goal: Option<&Goal>) -> Option<PauseKind> {
    goal.and_then(|g| g.pause_cause.as_ref()).map(|c| c.kind)
}

fn check(world: &World, before: &Book, op: &Op, running: Option<&Running>, accepted: Option<bool>) {
    let after = &world.book;
    if let Some(goal) = &after.goal {
        shape(goal);
    }
    // A goal that (again) went live starts a fresh count against the bound.
    if let Some(a) = after.live()
        && before
            .live()
            .is_none_or(|b| b.goal_id != a.goal_id || b.live_since != a.live_since)
    {
        assert_eq!(a.spent, Default::default(), "{op:?}: a fresh count");
    }
    // Revisions only go up, and every visible change moves them.
    if let (Some(b), Some(a)) = (&before.goal, &after.goal) {
        assert!(a.revision >= b.revision, "{op:?}: revision went down");
        if visible(a) != visible(b) {
            assert!(
                a.revision > b.revision,
                "{op:?}: a change kept revision {}",
                a.revision
            );
        }
    }
    // Attention follows the goal exactly, and never asks for the inbox.
    let mut expected = BTreeSet::new();
    match kind(after.active()) {
        Some(PauseKind::Blocked) => {
            expected.insert(ATTENTION_BLOCKED);
        }
        Some(PauseKind::Stalled) => {
            expected.insert(ATTENTION_STALLED);
        }
        _ => {}
    }
    if after.live().is_some_and(|g| g.waiting) {
        expected.insert(ATTENTION_WAITING);
    }
    assert_eq!(world.attention, expected, "{op:?}: attention");
    // A waiting goal holds exactly one recheck timer.
    assert_eq!(
        after.live().is_some_and(|g| g.waiting),
        !world.timers.is_empty() && after.runtime.timer.is_some(),
        "{op:?}: timers {:?}",
        world.timers
    );
    // At most one continuation is queued or running, and it is the one in flight.
    let continuations: Vec<&String> = world
        .queue
        .iter()
        .filter_map(|q| q.correlation.as_ref())
        .chain(world.running.iter().filter_map(|r| r.correlation.as_ref()))
        .collect();
    assert!(continuations.len() <= 1, "{op:?}: {continuations:?}");
    assert_eq!(
        continuations.first().copied(),
        after.runtime.in_flight.as_ref(),
        "{op:?}"
    );

    let before_active = before.active();
    let same_goal = match (before_active, after.goal.as_ref()) {
        (Some(b), Some(a)) => (b.goal_id == a.goal_id).then_some((b, a)),
        _ => None,
    };
    let person = matches!(
        op,
        Op::Set(..) | Op::Pause(_) | Op::Resume(_) | Op::Clear(_)
    );
    let model = matches!(op, Op::Create(_) | Op::Complete | Op::Block);

    // Fencing: a model tool is accepted only with the revision its run saw.
    if model && let (Some(run), Some(accepted)) = (running, accepted) {
        if run.fence != before.fence() {
            assert!(!accepted, "{op:?}: accepted past the fence");
        }
        if accepted {
            assert_eq!(run.fence, before.fence());
        }
        // A goal a person paused or stopped accepts only completion from the model.
        if kind(before_active).is_some_and(PauseKind::by_person) && !matches!(op, Op::Complete) {
            assert!(!accepted, "{op:?} accepted on a person-paused goal");
        }
        // Only a person clears (or replaces) a live goal.
        if before.live().is_some() && matches!(op, Op::Create(_)) {
            assert!(!accepted, "the model replaced a live goal");
        }
    }
    // Person requests with a stale revision, or a replacement without one, change nothing.
    if person && accepted == Some(false) {
        assert_eq!(before, after, "{op:?}: a refused request changed the goal");
    }
    if let Op::Set(_, seen) = op {
        match (seen, before_active) {
            (Seen::Stale, Some(_)) | (Seen::Missing, Some(_)) => {
                assert_eq!(
                    accepted,
                    Some(false),
                    "{op:?} replaced without the current revision"
                )
            }
            _ => {}
        }
    }
    if let Some((b, a)) = same_goal {
        // A goal becomes cleared only by a person; achieved only through its provisional completion.
        if a.status == GoalStatus::Cleared {
            assert!(
                person || matches!(op, Op::Create(_)),
                "{op:?} cleared the goal"
            );
            if b.status == GoalStatus::Live {
                assert!(person, "{op:?}: only a person clears a live goal");
            }
        }
        if a.status == GoalStatus::Achieved {
            let (outcome, run) = world.settled.as_ref().expect("achieved by a settled run");
            assert_eq!(*outcome, TerminalOutcome::Completed, "{op:?} achieved it");
            let provisional = b.provisional.as_ref().expect("it was provisional");
            assert_eq!(
                (provisional.action, provisional.run.as_str()),
                (ProvisionalAction::Complete, run.id.as_str())
            );
        }
        if kind(Some(a)) == Some(PauseKind::Blocked) && kind(Some(b)) != Some(PauseKind::Blocked) {
            let (outcome, run) = world.settled.as_ref().expect("blocked by a settled run");
            assert_eq!(*outcome, TerminalOutcome::Completed, "{op:?} blocked it");
            let provisional = b.provisional.as_ref().expect("it was provisional");
            assert_eq!(
                (provisional.action, provisional.run.as_str()),
                (ProvisionalAction::Block, run.id.as_str())
            );
        }
    }
    // Settling runs: the pause rules, the stall rule, provisional outcomes dropped.
    if let Some((outcome, run)) = world.settled.clone() {
        if let Some(goal) = after.active() {
            assert!(
                goal.provisional.as_ref().is_none_or(|p| p.run != run.id),
                "a settled run's provisional outcome is applied or dropped"
            );
        }
        let own_provisional = before_active
            .and_then(|g| g.provisional.as_ref())
            .is_some_and(|p| p.run == run.id);
        if let Some(b) = before.live()
            && outcome == TerminalOutcome::Completed
            && !own_provisional
        {
            let goal_turn = run
                .correlation
                .as_deref()
                .and_then(parse_correlation)
                .is_some_and(|(id, _)| id == b.goal_id);
            let a = after.goal.as_ref().unwrap();
            let mut spent = b.spent;
            spent.turns += 1;
            spent.tokens += run.tokens;
            if !goal_turn {
                assert_eq!(a.stalls, b.stalls, "only continuations count stalls");
                assert_eq!(
                    a.spent, b.spent,
                    "only continuations count against the bound"
                );
                assert_eq!(a.status, GoalStatus::Live);
            } else if let Some(reached) = BOUNDS.reached(&spent) {
                let cause = a.pause_cause.as_ref().expect("paused at the bound");
                assert_eq!(cause.kind, PauseKind::Stalled, "{op:?}");
                let named = match reached {
                    Reached::Turns(max) => format!("{max} goal turns"),
                    Reached::Tokens(max) => format!("{max} tokens"),
                };
                let detail = cause.detail.as_deref().unwrap_or_default();
                assert!(detail.contains(&named), "{detail} names {named}");
            } else if run.tool_calls > 0 {
                assert_eq!((a.stalls, a.status), (0, GoalStatus::Live));
            } else if before.live_agents().next().is_some() {
                assert!(
                    a.waiting && a.stalls == b.stalls,
                    "a live sub-agent command waits"
                );
            } else if b.stalls + 1 >= STALL_LIMIT {
                assert_eq!(kind(Some(a)), Some(PauseKind::Stalled));
            } else {
                assert_eq!((a.stalls, a.status), (b.stalls + 1, GoalStatus::Live));
            }
        }
        if before.live().is_some() && outcome != TerminalOutcome::Completed {
            let expected = match outcome {
                TerminalOutcome::Failed => PauseKind::Failed,
                TerminalOutcome::Cancelled => PauseKind::Cancelled,
                _ => PauseKind::NoTerminal,
            };
            assert_eq!(kind(after.goal.as_ref()), Some(expected), "{op:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn every_rule_holds_over_random_sequences(ops in proptest::collection::vec(op(), 1..80)) {
        let mut world = World::default();
        for op in &ops {
            let before = world.book.clone();
            let running = world.running.clone();
            let accepted = world.step(op);
            check(&world, &before, op, running.as_ref(), accepted);
        }
        // One chat line per finished goal.
        prop_assert_eq!(world.lines.len(), world.archived.len());
    }
}
