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

#[test]
fn a_command_a_rule_denies_stays_denied_after_commands_were_allowed_for_the_session() {
    let policy = ask_all()
        .with_command("rm -rf*=deny".parse().unwrap())
        .unwrap();
    let command = |execution: &str, line: &str| Call {
        command: Some(crate::command::Command::Line(line.to_owned())),
        fingerprint: format!("exec-{line}"),
        ..call(execution, "commands__exec")
    };
    let mut book = Book::default();
    assert_eq!(book.call(&policy, command("r1:c1", "make")).0, Verdict::Ask);
    book.answer(&ApprovalId::new("ap1"), answer(Decision::AllowSession))
        .unwrap();
    assert_eq!(book.recheck("r1:c1"), Verdict::Allow);
    assert_eq!(
        book.call(&policy, command("r1:c2", "make install")).0,
        Verdict::Allow,
        "allowed for the Session"
    );
    assert!(matches!(
        book.call(&policy, command("r1:c3", "make && rm -rf /")).0,
        Verdict::Deny(_)
    ));
}
