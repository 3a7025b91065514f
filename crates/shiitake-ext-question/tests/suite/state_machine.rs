//! Random interleavings of ask, answer, decline, withdraw, expire, steer, crash,
//! replay and cancel over the Ask state machine: never two deliveries of one Ask,
//! never a lost answer, never more than four open Asks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use shiitake_ext_question::contract::{
    AskId, AskInput, AskMode, ExpireAction, MAX_OPEN_ASKS, OnExpire, Question, QuestionAnswer,
    QuestionOption,
};
use shiitake_ext_question::state::{
    AskRequest, Book, Check, Effect, Opened, Responder, TimerPurpose,
};

#[derive(Clone, Debug)]
enum Op {
    Ask { wait: bool, expires: bool },
    Answer(usize),
    Decline(usize),
    Withdraw(usize),
    Expire(usize),
    Steer,
    WaiterLooks,
    CommitResult,
    Crash { replay: bool },
    Cancel,
    Settle,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<bool>(), any::<bool>()).prop_map(|(wait, expires)| Op::Ask { wait, expires }),
        3 => (0..6usize).prop_map(Op::Answer),
        1 => (0..6usize).prop_map(Op::Decline),
        1 => (0..6usize).prop_map(Op::Withdraw),
        1 => (0..6usize).prop_map(Op::Expire),
        1 => Just(Op::Steer),
        3 => Just(Op::WaiterLooks),
        2 => Just(Op::CommitResult),
        1 => any::<bool>().prop_map(|replay| Op::Crash { replay }),
        1 => Just(Op::Cancel),
        2 => Just(Op::Settle),
    ]
}

fn input(wait: bool, expires: bool) -> AskInput {
    AskInput {
        questions: vec![Question {
            header: "Pick".into(),
            question: "Which one?".into(),
            options: vec![
                QuestionOption {
                    label: "A".into(),
                    description: None,
                },
                QuestionOption {
                    label: "B".into(),
                    description: None,
                },
            ],
            multi_select: false,
        }],
        mode: if wait {
            AskMode::Wait
        } else {
            AskMode::Continue
        },
        on_expire: expires.then_some(OnExpire {
            after_minutes: 5,
            action: ExpireAction::ProceedWithRecommended,
        }),
    }
}

/// The world around the book: the run, its waiting tool call, and what reached the model.
#[derive(Default)]
struct World {
    book: Book,
    run: u32,
    calls: u32,
    asked: u32,
    /// A tool call waiting in-turn: (ask, execution).
    waiter: Option<(AskId, String)>,
    /// A result the waiter returned, not yet committed: (ask, execution).
    pending: Option<(AskId, String)>,
    /// The execution a crash interrupted, which recovery may replay.
    interrupted: Option<String>,
    /// Deliveries per Ask (in-turn results committed + follow-ups admitted).
    delivered: BTreeMap<AskId, u32>,
    /// Asks resolved (answered, declined, expired) and not withdrawn.
    resolved: BTreeMap<AskId, ()>,
    /// Asks whose delivery a cancelled run suppressed.
    suppressed: BTreeMap<AskId, ()>,
    withdrawn: BTreeMap<AskId, ()>,
}

impl World {
    fn run_id(&self) -> String {
        format!("run{}", self.run)
    }

    fn effects(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            if let Effect::Admit { ask_id, .. } = effect {
                *self.delivered.entry(ask_id).or_default() += 1;
            }
        }
    }

    fn open_id(&self, index: usize) -> Option<AskId> {
        let open: Vec<AskId> = self.book.open().map(|row| row.ask_id.clone()).collect();
        (!open.is_empty()).then(|| open[index % open.len()].clone())
    }

    fn ask(&mut self, execution: String, input: AskInput) {
        self.asked += 1;
        let request = AskRequest {
            ask_id: AskId::new(format!("ask_{:04}", self.asked)),
            execution: execution.clone(),
            run: self.run_id(),
            input,
            sender: None,
            now: 0,
        };
        match self.book.ask(request) {
            Ok((Opened::New { ask_id, live } | Opened::Again { ask_id, live }, effects)) => {
                self.effects(effects);
                if live {
                    self.waiter = Some((ask_id, execution));
                } else {
                    // A parked result carries no answer; committing it delivers nothing.
                    self.book.tool_result(&execution, false);
                }
            }
            Err(_) => {}
        }
    }

    /// The waiter lets go: parks, or finds an answer to return in-turn.
    fn let_go(&mut self) {
        if let Some((ask_id, execution)) = self.waiter.take() {
            match self.book.park(&ask_id) {
                Check::Resolved(_) => self.pending = Some((ask_id, execution)),
                Check::Waiting | Check::Gone => self.book.tool_result(&execution, false),
            }
        }
    }

    fn commit_pending(&mut self) {
        if let Some((ask_id, execution)) = self.pending.take() {
            self.book.tool_result(&execution, false);
            *self.delivered.entry(ask_id).or_default() += 1;
        }
    }

    fn settle(&mut self, cancelled: bool) {
        let run = self.run_id();
        let before: Vec<AskId> = self
            .book
            .asks
            .values()
            .filter(|row| row.run == run && !row_is_open(&self.book, &row.ask_id))
            .map(|row| row.ask_id.clone())
            .collect();
        let effects = self.book.settled(&run, cancelled);
        if cancelled {
            for ask_id in before {
                self.suppressed.insert(ask_id, ());
            }
        }
        self.effects(effects);
        self.run += 1;
        self.interrupted = None;
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Ask { wait, expires } => {
                if self.waiter.is_none() && self.pending.is_none() {
                    self.calls += 1;
                    let execution = format!("{}:call{}", self.run_id(), self.calls);
                    self.ask(execution, input(wait, expires));
                }
            }
            Op::Answer(index) => {
                if let Some(ask_id) = self.open_id(index) {
                    let answers = vec![QuestionAnswer {
                        selected: vec!["B".into()],
                        text: None,
                    }];
                    let (_, effects) = self
                        .book
                        .answer(&ask_id, answers, Responder::Person, None)
                        .unwrap();
                    self.resolved.insert(ask_id, ());
                    self.effects(effects);
                }
            }
            Op::Decline(index) => {
                if let Some(ask_id) = self.open_id(index) {
                    let (_, effects) = self.book.decline(&ask_id, None).unwrap();
                    self.resolved.insert(ask_id, ());
                    self.effects(effects);
                }
            }
            Op::Withdraw(index) => {
                if let Some(ask_id) = self.open_id(index) {
                    let effects = self.book.withdraw(&ask_id).unwrap();
                    self.withdrawn.insert(ask_id, ());
                    self.effects(effects);
                }
            }
            Op::Expire(index) => {
                if let Some(ask_id) = self.open_id(index) {
                    let expires = self.book.asks[&ask_id].on_expire.is_some();
                    let effects = self.book.fire(&ask_id, TimerPurpose::Expire);
                    assert_eq!(
                        !effects.is_empty(),
                        expires,
                        "only an Ask with onExpire expires"
                    );
                    if expires {
                        self.resolved.insert(ask_id, ());
                    }
                    self.effects(effects);
                }
            }
            Op::Steer => self.let_go(),
            Op::WaiterLooks => {
                if let Some((ask_id, execution)) = self.waiter.clone()
                    && let Check::Resolved(_) = self.book.check(&ask_id)
                {
                    self.waiter = None;
                    self.pending = Some((ask_id, execution));
                }
            }
            Op::CommitResult => self.commit_pending(),
            Op::Crash { replay } => {
                let lost = self
                    .waiter
                    .take()
                    .map(|(_, execution)| execution)
                    .or_else(|| self.pending.take().map(|(_, execution)| execution));
                self.interrupted = lost.or(self.interrupted.take());
                match (&self.interrupted, replay) {
                    (Some(execution), true) => {
                        // Recovery runs the same call again: it finds its Ask.
                        let execution = execution.clone();
                        self.interrupted = None;
                        self.ask(execution, input(true, false));
                    }
                    (Some(_), false) => self.settle(false),
                    (None, _) => {}
                }
            }
            Op::Cancel => {
                if let Some((ask_id, execution)) = self.waiter.take() {
                    // The cancelled call parks its Ask and commits an `aborted` error result.
                    self.book.park(&ask_id);
                    self.book.tool_result(&execution, true);
                }
                if let Some((_, execution)) = self.pending.take() {
                    self.book.tool_result(&execution, true);
                }
                self.settle(true);
            }
            Op::Settle => {
                if self.waiter.is_none() {
                    self.commit_pending();
                    self.settle(false);
                }
            }
        }
    }

    fn check(&self) {
        assert!(self.book.open().count() <= MAX_OPEN_ASKS);
        for (ask_id, count) in &self.delivered {
            assert!(*count <= 1, "{ask_id} was delivered {count} times");
            assert!(
                !self.withdrawn.contains_key(ask_id),
                "withdrawn {ask_id} was delivered"
            );
        }
    }
}

fn row_is_open(book: &Book, ask_id: &AskId) -> bool {
    book.open().any(|row| &row.ask_id == ask_id)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_resolution_is_delivered_exactly_once(ops in proptest::collection::vec(op(), 1..60)) {
        let mut world = World::default();
        for op in ops {
            world.apply(op);
            world.check();
        }
        // The run ends: the waiter lets go, its result is committed, the run settles.
        world.let_go();
        world.commit_pending();
        world.settle(false);
        world.check();
        for ask_id in world.resolved.keys() {
            let delivered = world.delivered.get(ask_id).copied().unwrap_or(0);
            let suppressed = world.suppressed.contains_key(ask_id);
            let expected = if suppressed { 0 } else { 1 };
            prop_assert_eq!(
                delivered, expected,
                "{} resolved: delivered {} times, suppressed by a cancel: {}",
                ask_id, delivered, suppressed
            );
        }
        // Nothing resolved lingers: every row left is an open Ask.
        prop_assert!(world.book.asks.values().all(|row| row_is_open(&world.book, &row.ask_id)));
    }
}

#[test]
fn one_live_ask_per_run() {
    let mut book = Book::default();
    let request = |n: u32, run: &str| AskRequest {
        ask_id: AskId::new(format!("ask_{n}")),
        execution: format!("{run}:call{n}"),
        run: run.into(),
        input: input(true, false),
        sender: None,
        now: 0,
    };
    let (first, _) = book.ask(request(1, "r1")).unwrap();
    assert_eq!(
        first,
        Opened::New {
            ask_id: AskId::new("ask_1"),
            live: true
        }
    );
    let refused = book.ask(request(2, "r1")).unwrap_err();
    assert!(refused.0.contains("one live question per run"), "{refused}");
    assert!(
        book.ask(request(3, "r2")).is_ok(),
        "another run may wait on its own"
    );
    book.park(&AskId::new("ask_1"));
    assert!(
        book.ask(request(4, "r1")).is_ok(),
        "once parked, the run may ask again"
    );
    // The same call again (a replay) finds its Ask instead of opening another.
    let (again, effects) = book.ask(request(4, "r1")).unwrap();
    assert_eq!(
        again,
        Opened::Again {
            ask_id: AskId::new("ask_4"),
            live: true
        }
    );
    assert!(effects.is_empty());
}
