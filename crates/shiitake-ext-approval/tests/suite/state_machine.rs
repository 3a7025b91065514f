//! The approval state machine under random interleavings of calls, answers, waits
//! that end, steers, cancels, settles, crashes during a wait and crashes during an
//! execution, with the kit's record of held calls and core's recovery rule modelled as
//! they are (`shiitake-core`'s `extension/kit/gate.rs`, `runner/gate.rs`).
//!
//! After every step: no call ran twice, no call a person denied ran, no more than the
//! bound waits. At the end: every accepted answer reached the model exactly once (its
//! call took it in-turn, or one follow-up carried it) unless its run was cancelled
//! first, and an allow-once let at most one later call through.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::json;
use shiitake_ext_approval::contract::{ApprovalId, Decision, Delivery, MAX_OPEN_APPROVALS};
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_ext_approval::state::{Answer, Book, Call, Effect, LetGo, Refusal, Verdict};

/// What the kit keeps per held call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    Waiting,
    Started,
}

/// Where one call of the model is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Where {
    /// Held: the runner waits on the gate.
    Waiting,
    /// Allowed (by the gate or the policy) and running; its result is not committed.
    Running,
    /// Its result is committed.
    Done,
}

#[derive(Clone, Debug)]
enum Step {
    /// The model calls tool `tool` (0..3) with arguments `args` (0..2).
    Call { tool: usize, args: usize },
    /// A person answers the `pick`-th waiting approval (or an id that does not exist).
    Answer {
        pick: usize,
        decision: Decision,
        reason: bool,
    },
    /// The gate's state changed: a waiting call asks again.
    Wake,
    /// The wait ends: it ran out or a steer came.
    Park,
    /// The run is cancelled (a waiting call lets go, then the run settles cancelled).
    Cancel,
    /// A running call finishes: its result is committed.
    Finish,
    /// The run settles (completed) once nothing waits or runs; or, with `abandon`, the
    /// recovery limit settles it with a call still waiting.
    Settle { abandon: bool },
    /// The process dies and the Agent opens again: calls without a result are resumed.
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    let decision = prop_oneof![
        Just(Decision::AllowOnce),
        Just(Decision::AllowSession),
        Just(Decision::Deny)
    ];
    prop_oneof![
        4 => (0usize..3, 0usize..2).prop_map(|(tool, args)| Step::Call { tool, args }),
        4 => (0usize..4, decision, any::<bool>())
            .prop_map(|(pick, decision, reason)| Step::Answer { pick, decision, reason }),
        2 => Just(Step::Wake),
        1 => Just(Step::Park),
        1 => Just(Step::Cancel),
        3 => Just(Step::Finish),
        1 => any::<bool>().prop_map(|abandon| Step::Settle { abandon }),
        1 => Just(Step::Crash),
    ]
}

const TOOLS: [&str; 3] = ["files__edit", "env__mcp__notes__add", "files__read"];

#[derive(Default)]
struct Sim {
    book: Book,
    policy: Policy,
    run: u32,
    calls: u32,
    /// Every call: where it is, and its tool and fingerprint.
    at: BTreeMap<String, (Where, String, String)>,
    held: BTreeMap<String, Held>,
    ran: BTreeMap<String, u32>,
    /// The approval of each held call.
    approval_of: BTreeMap<String, ApprovalId>,
    /// Calls a person denied (their approval was answered deny).
    denied: BTreeSet<String>,
    /// Accepted answers, by approval: how many times each reached the model.
    accepted: BTreeMap<ApprovalId, u32>,
    /// Approvals whose answer reached the model (in-turn or by follow-up).
    taken: BTreeSet<ApprovalId>,
    /// Approvals whose run was cancelled before their answer was taken.
    suppressed: BTreeSet<ApprovalId>,
    /// One-time allowances granted, and calls they let through.
    one_time_granted: u32,
    one_time_used: u32,
}

impl Sim {
    fn new() -> Self {
        Self {
            policy: Policy::parse(Ruling::Ask, ["files__read=allow"]).unwrap(),
            run: 1,
            ..Self::default()
        }
    }

    fn run_id(&self) -> String {
        format!("r{}", self.run)
    }

    fn waiting(&self) -> Option<String> {
        self.at
            .iter()
            .find(|(_, (at, _, _))| *at == Where::Waiting)
            .map(|(execution, _)| execution.clone())
    }

    fn running(&self) -> Option<String> {
        self.at
            .iter()
            .find(|(_, (at, _, _))| *at == Where::Running)
            .map(|(execution, _)| execution.clone())
    }

    fn effects(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            if let Effect::FollowUp { id, text } = effect {
                *self.accepted.entry(id).or_default() += 1;
                if text.contains("runs without asking") {
                    self.one_time_granted += 1;
                }
            }
        }
    }

    /// The kit's gate over the book (`kit/gate.rs`), and what the runner does with it.
    fn gate(
        &mut self,
        execution: &str,
        verdict: impl FnOnce(&mut Book) -> (Verdict, Vec<Effect>),
        resumed: bool,
    ) {
        let held = self.held.get(execution).copied();
        if resumed && held != Some(Held::Waiting) {
            // Pass: an unsafe call is "outcome unknown"; a safe one runs again (ours are
            // all treated as unsafe, the strictest case).
            self.finish(execution);
            return;
        }
        let (verdict, effects) = verdict(&mut self.book);
        self.effects(effects);
        let delivered = held.is_some()
            && matches!(verdict, Verdict::Allow | Verdict::Deny(_))
            && self.approval_of.contains_key(execution);
        if delivered {
            let id = self.approval_of[execution].clone();
            if self.accepted.contains_key(&id) && !self.took(&id) {
                *self.accepted.entry(id.clone()).or_default() += 1;
                self.taken.insert(id);
            }
        }
        match verdict {
            Verdict::Allow | Verdict::Pass => {
                if held.is_some() {
                    self.held.insert(execution.to_owned(), Held::Started);
                }
                *self.ran.entry(execution.to_owned()).or_default() += 1;
                self.set(execution, Where::Running);
            }
            Verdict::Deny(_) => self.finish(execution),
            Verdict::Ask => {
                self.held
                    .entry(execution.to_owned())
                    .or_insert(Held::Waiting);
                self.set(execution, Where::Waiting);
            }
        }
    }

    fn took(&self, id: &ApprovalId) -> bool {
        self.taken.contains(id)
    }

    fn set(&mut self, execution: &str, at: Where) {
        if let Some(entry) = self.at.get_mut(execution) {
            entry.0 = at;
        }
    }

    fn finish(&mut self, execution: &str) {
        self.set(execution, Where::Done);
    }

    fn apply(&mut self, step: Step) {
        match step {
            Step::Call { tool, args } => {
                if self.waiting().is_some() || self.running().is_some() {
                    return; // calls of one run go one at a time
                }
                self.calls += 1;
                let execution = format!("{}:c{}", self.run_id(), self.calls);
                let tool = TOOLS[tool].to_owned();
                let fingerprint = format!("{tool}#{args}");
                self.at.insert(
                    execution.clone(),
                    (Where::Waiting, tool.clone(), fingerprint.clone()),
                );
                let call = Call {
                    execution: execution.clone(),
                    run: self.run_id(),
                    tool: tool.clone(),
                    arguments: json!({"n": args}),
                    facts: Default::default(),
                    fingerprint: fingerprint.clone(),
                    safe_to_repeat: false,
                    command: None,
                    now: 0,
                };
                let allowances = self.book.one_time.len();
                let policy = self.policy.clone();
                self.gate(&execution, |book| book.call(&policy, call), false);
                if self.book.one_time.len() < allowances {
                    self.one_time_used += 1;
                }
                if let Some(approval) = self
                    .book
                    .approvals
                    .values()
                    .find(|a| a.execution == execution)
                {
                    self.approval_of.insert(execution, approval.id());
                }
            }
            Step::Answer {
                pick,
                decision,
                reason,
            } => {
                let waiting: Vec<ApprovalId> = self.book.waiting().map(|a| a.id()).collect();
                let id = waiting
                    .get(pick)
                    .cloned()
                    .unwrap_or_else(|| ApprovalId::numbered(1000 + pick as u64));
                let answer = Answer {
                    decision,
                    reason: (reason && decision == Decision::Deny).then(|| "no".to_owned()),
                };
                match self.book.answer(&id, answer) {
                    Ok((delivery, effects)) => {
                        assert!(
                            waiting.contains(&id),
                            "only a waiting approval takes an answer"
                        );
                        self.accepted.entry(id.clone()).or_insert(0);
                        if decision == Decision::Deny
                            && let Some((execution, _)) =
                                self.approval_of.iter().find(|(_, a)| **a == id)
                        {
                            self.denied.insert(execution.clone());
                        }
                        if delivery == Delivery::FollowUp {
                            self.taken.insert(id.clone());
                        }
                        self.effects(effects);
                    }
                    Err(Refusal::NotFound(_) | Refusal::Conflict(_)) => {
                        assert!(
                            !waiting.contains(&id),
                            "a waiting approval is never refused as gone"
                        );
                    }
                    Err(Refusal::Invalid(reason)) => panic!("a valid answer was refused: {reason}"),
                }
            }
            Step::Wake => {
                if let Some(execution) = self.waiting() {
                    self.gate(
                        &execution.clone(),
                        |book| (book.recheck(&execution), Vec::new()),
                        false,
                    );
                }
            }
            Step::Park => {
                if let Some(execution) = self.waiting() {
                    self.gate(
                        &execution.clone(),
                        |book| book.let_go(&execution, LetGo::Park),
                        false,
                    );
                }
            }
            Step::Cancel => {
                if let Some(execution) = self.waiting() {
                    // An answer that lands as the run is cancelled never reaches the model.
                    if let Some(id) = self.approval_of.get(&execution).cloned()
                        && self.accepted.contains_key(&id)
                        && !self.taken.contains(&id)
                    {
                        self.suppressed.insert(id);
                    }
                    let (_, effects) = self.book.let_go(&execution, LetGo::Cancel);
                    self.effects(effects);
                    self.finish(&execution);
                }
                if let Some(execution) = self.running() {
                    self.finish(&execution); // answered "aborted"
                }
                self.settle(true);
            }
            Step::Finish => {
                if let Some(execution) = self.running() {
                    self.finish(&execution);
                }
            }
            Step::Settle { abandon } => {
                let busy = self.waiting().is_some() || self.running().is_some();
                if busy && !abandon {
                    return;
                }
                for execution in self.waiting().into_iter().chain(self.running()) {
                    self.finish(&execution);
                }
                self.settle(false);
            }
            Step::Crash => {
                // What was committed stays; the runner resumes calls without a result.
                for execution in self.running().into_iter().chain(self.waiting()) {
                    self.gate(
                        &execution.clone(),
                        |book| (book.recheck(&execution), Vec::new()),
                        true,
                    );
                }
            }
        }
    }

    fn settle(&mut self, cancelled: bool) {
        let run = self.run_id();
        let before: BTreeSet<ApprovalId> = self
            .book
            .approvals
            .values()
            .filter(|a| a.run == run)
            .map(|a| a.id())
            .collect();
        let effects = self.book.settled(&run, cancelled);
        if cancelled {
            for id in before {
                if self.accepted.contains_key(&id) && !self.taken.contains(&id) {
                    self.suppressed.insert(id);
                }
            }
        }
        for effect in &effects {
            if let Effect::FollowUp { id, .. } = effect {
                self.taken.insert(id.clone());
            }
        }
        self.effects(effects);
        self.held
            .retain(|execution, _| !execution.starts_with(&format!("{run}:")));
        self.run += 1;
    }

    fn check(&self) {
        for (execution, runs) in &self.ran {
            assert!(*runs <= 1, "{execution} ran {runs} times");
            assert!(
                !self.denied.contains(execution),
                "{execution} ran though denied"
            );
        }
        let open = self.book.waiting().count();
        assert!(open <= MAX_OPEN_APPROVALS, "{open} approvals wait");
    }

    fn check_end(&self) {
        for (id, deliveries) in &self.accepted {
            if self.suppressed.contains(id) {
                assert!(
                    *deliveries <= 1,
                    "{id} reached the model {deliveries} times"
                );
            } else {
                assert_eq!(*deliveries, 1, "{id} reached the model {deliveries} times");
            }
        }
        assert!(
            self.one_time_used <= self.one_time_granted,
            "{} one-time allowances let {} calls through",
            self.one_time_granted,
            self.one_time_used
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_twice_never_denied_never_lost(steps in proptest::collection::vec(step(), 1..60)) {
        let mut sim = Sim::new();
        for step in steps {
            sim.apply(step);
            sim.check();
        }
        // Drain: whatever waits is parked when its run settles; nothing is lost.
        sim.apply(Step::Settle { abandon: true });
        sim.check();
        sim.check_end();
    }
}
