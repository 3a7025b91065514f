//! The book's transitions, one by one.

use super::*;
use serde_json::json;

fn call(execution: &str, tool: &str) -> Call {
    Call {
        execution: execution.into(),
        run: execution.split(':').next().unwrap_or_default().into(),
        tool: tool.into(),
        arguments: json!({"path": "a.txt"}),
        facts: Default::default(),
        fingerprint: format!("{tool}-a"),
        safe_to_repeat: false,
        command: None,
        now: 5,
    }
}

fn ask_all() -> Policy {
    Policy::new(Ruling::Ask)
}

fn answer(decision: Decision) -> Answer {
    Answer {
        decision,
        reason: None,
    }
}

#[test]
fn a_live_call_takes_its_answer_in_turn_and_the_session_allowance_lasts() {
    let mut book = Book::default();
    let (verdict, effects) = book.call(&ask_all(), call("r1:c1", "files__edit"));
    assert_eq!(verdict, Verdict::Ask);
    assert!(matches!(&effects[..], [Effect::Raise { id, .. }] if id.as_str() == "ap1"));
    assert_eq!(book.recheck("r1:c1"), Verdict::Ask);
    let (delivery, effects) = book
        .answer(&ApprovalId::new("ap1"), answer(Decision::AllowSession))
        .unwrap();
    assert_eq!(delivery, Delivery::InTurn);
    assert_eq!(
        effects,
        [Effect::Clear {
            id: ApprovalId::new("ap1")
        }]
    );
    assert_eq!(book.recheck("r1:c1"), Verdict::Allow);
    assert!(
        book.approvals.is_empty(),
        "an allowed call closes as it starts"
    );
    assert_eq!(
        book.call(&ask_all(), call("r1:c2", "files__edit")).0,
        Verdict::Allow
    );
    assert!(book.settled("r1", false).is_empty());
    assert!(book.approvals.is_empty());
    assert_eq!(
        book.answer(&ApprovalId::new("ap1"), answer(Decision::Deny)),
        Err(Refusal::Conflict(
            "approval ap1 was already answered".into()
        ))
    );
    assert!(matches!(
        book.answer(&ApprovalId::new("ap9"), answer(Decision::Deny)),
        Err(Refusal::NotFound(_))
    ));
}

#[test]
fn a_parked_call_allowed_once_admits_one_follow_up_and_its_next_identical_call_runs_once() {
    let mut book = Book::default();
    book.call(&ask_all(), call("r1:c1", "files__edit"));
    let (verdict, _) = book.let_go("r1:c1", LetGo::Park);
    assert!(matches!(verdict, Verdict::Deny(text) if text.contains("ap1")));
    assert_eq!(
        book.call(&ask_all(), call("r1:c2", "files__edit")).0,
        Verdict::Deny(text::still_waiting(&book.approvals[&1])),
        "the same call again is not asked twice"
    );
    let (delivery, effects) = book
        .answer(&ApprovalId::new("ap1"), answer(Decision::AllowOnce))
        .unwrap();
    assert_eq!(delivery, Delivery::FollowUp);
    assert!(
        matches!(&effects[1], Effect::FollowUp { text, .. } if text.contains("call files__edit again"))
    );
    assert_eq!(
        book.call(&ask_all(), call("r2:c1", "files__edit")).0,
        Verdict::Allow
    );
    assert_eq!(
        book.call(&ask_all(), call("r2:c2", "files__edit")).0,
        Verdict::Ask,
        "once"
    );
}

#[test]
fn a_denial_reaches_the_model_with_its_reason_and_reasons_are_bounded() {
    let mut book = Book::default();
    book.call(&ask_all(), call("r1:c1", "files__edit"));
    assert_eq!(
        book.answer(
            &ApprovalId::new("ap1"),
            Answer {
                decision: Decision::AllowOnce,
                reason: Some("sure".into())
            }
        ),
        Err(Refusal::Invalid("a reason goes with deny only".into()))
    );
    let exact = "x".repeat(MAX_REASON_CHARS);
    let over = "x".repeat(MAX_REASON_CHARS + 1);
    assert!(matches!(
        book.answer(
            &ApprovalId::new("ap1"),
            Answer {
                decision: Decision::Deny,
                reason: Some(over)
            }
        ),
        Err(Refusal::Invalid(_))
    ));
    book.answer(
        &ApprovalId::new("ap1"),
        Answer {
            decision: Decision::Deny,
            reason: Some(exact.clone()),
        },
    )
    .unwrap();
    let Verdict::Deny(said) = book.recheck("r1:c1") else {
        panic!("denied");
    };
    assert!(said.contains(&exact), "{said}");
    assert_eq!(
        book.recheck("r1:c1"),
        Verdict::Deny(said),
        "the same every time"
    );
}

#[test]
fn the_open_approvals_and_the_session_allowances_are_bounded() {
    let mut book = Book::default();
    for n in 0..MAX_OPEN_APPROVALS {
        assert_eq!(
            book.call(&ask_all(), call(&format!("r:{n}"), &format!("t{n}")))
                .0,
            Verdict::Ask
        );
    }
    assert!(matches!(
        book.call(&ask_all(), call("r:x", "tx")).0,
        Verdict::Deny(text) if text.contains("too many calls wait")
    ));
    let mut book = Book {
        allowed: (0..MAX_ALLOWED_TOOLS).map(|n| format!("t{n}")).collect(),
        ..Book::default()
    };
    book.call(&ask_all(), call("r:1", "other"));
    assert!(matches!(
        book.answer(&ApprovalId::new("ap1"), answer(Decision::AllowSession)),
        Err(Refusal::Invalid(_))
    ));
    book.answer(&ApprovalId::new("ap1"), answer(Decision::AllowOnce))
        .unwrap();
}

#[test]
fn a_cancelled_run_withdraws_its_calls_and_a_settled_one_parks_them() {
    let mut book = Book::default();
    book.call(&ask_all(), call("r1:c1", "files__edit"));
    let (verdict, effects) = book.let_go("r1:c1", LetGo::Cancel);
    assert_eq!(verdict, Verdict::Deny(text::GONE.into()));
    assert_eq!(
        effects,
        [Effect::Clear {
            id: ApprovalId::new("ap1")
        }]
    );
    assert!(matches!(
        book.answer(&ApprovalId::new("ap1"), answer(Decision::AllowOnce)),
        Err(Refusal::Conflict(text)) if text.contains("withdrawn")
    ));
    book.call(&ask_all(), call("r2:c1", "files__edit"));
    assert!(book.settled("r2", false).is_empty());
    assert_eq!(book.approvals[&2].stage, Stage::Parked);
    assert_eq!(book.projection().approvals.len(), 1);
}

fn command(execution: &str, line: &str) -> Call {
    Call {
        command: Some(crate::command::Command::Line(line.to_owned())),
        fingerprint: format!("exec-{line}"),
        ..call(execution, "commands__exec")
    }
}

#[test]
fn a_command_a_rule_denies_stays_denied_after_commands_were_allowed_for_the_session() {
    let policy = ask_all()
        .with_command("rm -rf*=deny".parse().unwrap())
        .unwrap();
    let mut book = Book::default();
    assert_eq!(book.call(&policy, command("r1:c1", "make")).0, Verdict::Ask);
    book.answer(&ApprovalId::new("ap1"), answer(Decision::AllowSession))
        .unwrap();
    assert_eq!(book.recheck("r1:c1"), Verdict::Allow);
    assert_eq!(
        book.call(&policy, command("r1:c2", "make")).0,
        Verdict::Allow,
        "allowed for the Session"
    );
    assert!(matches!(
        book.call(&policy, command("r1:c3", "make && rm -rf /")).0,
        Verdict::Deny(_)
    ));
}

#[test]
fn allowing_a_command_for_the_session_allows_its_commands_exactly_not_the_tool() {
    let policy = ask_all()
        .with_command("cargo build*=allow".parse().unwrap())
        .unwrap();
    let mut book = Book::default();
    assert_eq!(
        book.call(&policy, command("r1:c1", "cargo test --lib && make"))
            .0,
        Verdict::Ask
    );
    assert_eq!(
        book.approvals[&1].commands,
        ["cargo test --lib", "make"],
        "what allowing it for the Session would allow"
    );
    book.answer(&ApprovalId::new("ap1"), answer(Decision::AllowSession))
        .unwrap();
    assert!(book.allowed.is_empty(), "not the whole tool");
    assert_eq!(
        book.projection().allowed_commands,
        ["cargo test --lib", "make"]
    );
    let verdict = |book: &mut Book, n: u32, line: &str| {
        book.call(&policy, command(&format!("r1:d{n}"), line)).0
    };
    // Each allowed command, in any line with commands a rule allows or that only read.
    assert_eq!(verdict(&mut book, 1, "make"), Verdict::Allow);
    assert_eq!(verdict(&mut book, 2, "'cargo' test  --lib"), Verdict::Allow);
    assert_eq!(
        verdict(&mut book, 3, "cargo build && ls; make"),
        Verdict::Allow
    );
    // Another command, or the same with other arguments, still asks.
    assert_eq!(verdict(&mut book, 4, "make install"), Verdict::Ask);
    assert_eq!(verdict(&mut book, 5, "cargo test --all"), Verdict::Ask);
    assert_eq!(verdict(&mut book, 6, "make; rm x"), Verdict::Ask);
    // A line that cannot be read runs only when it was allowed itself.
    assert_eq!(verdict(&mut book, 7, "make $(cat x)"), Verdict::Ask);
}

#[test]
fn an_unreadable_line_allowed_for_the_session_is_allowed_exactly() {
    let policy = ask_all();
    let mut book = Book::default();
    let line = "echo $HOME";
    assert_eq!(book.call(&policy, command("r1:c1", line)).0, Verdict::Ask);
    assert_eq!(book.approvals[&1].commands, [line]);
    book.answer(&ApprovalId::new("ap1"), answer(Decision::AllowSession))
        .unwrap();
    assert_eq!(book.call(&policy, command("r1:c2", line)).0, Verdict::Allow);
    assert_eq!(
        book.call(&policy, command("r1:c3", "echo $PATH")).0,
        Verdict::Ask
    );
}

#[test]
fn commands_allowed_for_the_session_are_bounded_at_their_edges() {
    use crate::contract::{MAX_ALLOWED_COMMAND_BYTES, MAX_ALLOWED_COMMANDS};
    let policy = ask_all();
    let mut book = Book::default();
    // One past the longest command: allowed once only.
    let long = format!("run {}", "x".repeat(MAX_ALLOWED_COMMAND_BYTES - 3));
    assert_eq!(long.len(), MAX_ALLOWED_COMMAND_BYTES + 1);
    assert_eq!(book.call(&policy, command("r0:c0", &long)).0, Verdict::Ask);
    let refused = book
        .answer(&ApprovalId::new("ap1"), answer(Decision::AllowSession))
        .unwrap_err();
    assert!(matches!(refused, Refusal::Invalid(_)), "{refused:?}");
    book.answer(&ApprovalId::new("ap1"), answer(Decision::AllowOnce))
        .unwrap();
    assert_eq!(book.recheck("r0:c0"), Verdict::Allow);
    // The longest command, then commands up to the bound; one more is refused.
    let longest = format!("run {}", "x".repeat(MAX_ALLOWED_COMMAND_BYTES - 4));
    let mut lines = vec![longest];
    lines.extend((1..MAX_ALLOWED_COMMANDS).map(|n| format!("tool{n}")));
    lines.push("one-past".to_owned());
    for (n, line) in lines.iter().enumerate() {
        let id = book.next;
        assert_eq!(
            book.call(&policy, command(&format!("r1:c{n}"), line)).0,
            Verdict::Ask,
            "{line}"
        );
        let answered = book.answer(&ApprovalId::numbered(id), answer(Decision::AllowSession));
        if n < MAX_ALLOWED_COMMANDS {
            answered.unwrap();
            // The call takes its answer (an open approval counts until then).
            assert_eq!(book.recheck(&format!("r1:c{n}")), Verdict::Allow);
        } else {
            assert!(matches!(answered, Err(Refusal::Invalid(_))), "{answered:?}");
        }
    }
    assert_eq!(book.allowed_commands.len(), MAX_ALLOWED_COMMANDS);
}
