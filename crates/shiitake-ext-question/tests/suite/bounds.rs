//! Every bound of an Ask at its edge and one past it: through the model's tool on a
//! real Agent (a refused call is a tool error result and the run goes on), and
//! through the validation a client can run before sending.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_ext_question::contract::{
    AskInput, AskMode, ExpireAction, MAX_EXPIRE_MINUTES, MAX_HEADER_CHARS, MAX_QUESTIONS,
    MIN_EXPIRE_MINUTES, OnExpire, Question, QuestionAnswer, QuestionOption,
};
use shiitake_ext_question::validate;
use shiitake_model::Turn;
use shiitake_protocol::message::Message;
use shiitake_protocol::*;

fn question(header: &str) -> Value {
    json!({"header": header, "question": "Which?", "options": [{"label": "A"}, {"label": "B"}]})
}

fn call(questions: Vec<Value>, extra: Value) -> Turn {
    let mut input = json!({"questions": questions, "mode": "continue"});
    if let (Some(input), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
        input.extend(extra.clone());
    }
    Turn::tool_call("question__ask", input)
}

/// Runs the calls in one run and returns (is_error, text) of each result.
async fn results_of(calls: Vec<Turn>) -> Vec<(bool, String)> {
    let count = calls.len();
    let mut turns = calls;
    turns.push(Turn::text("Done."));
    let setup = setup(turns).await;
    let session = new_session(&setup.agent).await;
    let sent = send(&session, "Ask away").await;
    let terminal = terminal_of(&session, &sent).await;
    assert_eq!(
        terminal.outcome,
        TerminalOutcome::Completed,
        "the run goes on"
    );
    let results: Vec<(bool, String)> = transcript(&session)
        .await
        .into_iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => Some((
                result.is_error,
                tool_results(&[Message::ToolResult(result)]).remove(0),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), count);
    results
}

#[tokio::test]
async fn four_asks_may_be_open_and_a_fifth_is_refused() {
    let calls = (0..5)
        .map(|n| call(vec![question(&format!("Q{n}"))], json!({})))
        .collect();
    let results = results_of(calls).await;
    for (is_error, text) in &results[..4] {
        assert!(!is_error, "{text}");
        assert!(text.contains("parked"), "{text}");
    }
    let (is_error, text) = &results[4];
    assert!(is_error);
    assert!(text.contains("already holds 4 open questions"), "{text}");
}

#[tokio::test]
async fn one_to_four_questions_with_headers_of_twelve_characters() {
    let twelve = "H".repeat(MAX_HEADER_CHARS);
    let thirteen = "H".repeat(MAX_HEADER_CHARS + 1);
    let results = results_of(vec![
        call(vec![question(&twelve)], json!({})),
        call(vec![question(&thirteen)], json!({})),
        call(vec![question("a"); MAX_QUESTIONS], json!({})),
        call(vec![question("a"); MAX_QUESTIONS + 1], json!({})),
        call(Vec::new(), json!({})),
    ])
    .await;
    let errors: Vec<bool> = results.iter().map(|(is_error, _)| *is_error).collect();
    assert_eq!(errors, [false, true, false, true, true], "{results:?}");
    assert!(results[1].1.contains("maxLength"), "{}", results[1].1);
}

#[tokio::test]
async fn expiry_takes_five_to_ten_thousand_and_eighty_minutes() {
    let expire = |minutes: u32| json!({"onExpire": {"afterMinutes": minutes, "action": "stop"}});
    let results = results_of(vec![
        call(vec![question("a")], expire(MIN_EXPIRE_MINUTES - 1)),
        call(vec![question("a")], expire(MIN_EXPIRE_MINUTES)),
        call(vec![question("a")], expire(MAX_EXPIRE_MINUTES)),
        call(vec![question("a")], expire(MAX_EXPIRE_MINUTES + 1)),
    ])
    .await;
    let errors: Vec<bool> = results.iter().map(|(is_error, _)| *is_error).collect();
    assert_eq!(errors, [true, false, false, true], "{results:?}");
}

fn input(header: &str, questions: usize, minutes: Option<u32>) -> AskInput {
    AskInput {
        questions: (0..questions)
            .map(|_| Question {
                header: header.into(),
                question: "Which?".into(),
                options: vec![QuestionOption {
                    label: "A".into(),
                    description: None,
                }],
                multi_select: false,
            })
            .collect(),
        mode: AskMode::Wait,
        on_expire: minutes.map(|after_minutes| OnExpire {
            after_minutes,
            action: ExpireAction::Stop,
        }),
    }
}

#[test]
fn validation_refuses_one_past_every_edge() {
    let ok = |input: &AskInput| validate::ask_input(input).is_ok();
    assert!(
        ok(&input(&"é".repeat(12), 1, None)),
        "characters, not bytes"
    );
    assert!(!ok(&input(&"é".repeat(13), 1, None)));
    assert!(ok(&input("a", 4, None)) && !ok(&input("a", 5, None)) && !ok(&input("a", 0, None)));
    assert!(ok(&input("a", 1, Some(5))) && !ok(&input("a", 1, Some(4))));
    assert!(ok(&input("a", 1, Some(10_080))) && !ok(&input("a", 1, Some(10_081))));
    assert!(!ok(&input("  ", 1, None)), "a blank header");
    assert!(!ok(&input("a\u{7}", 1, None)), "a control character");
}

#[test]
fn every_question_needs_an_offered_label_or_text() {
    let questions = input("a", 1, None).questions;
    let answer = |selected: &[&str], text: Option<&str>| QuestionAnswer {
        selected: selected.iter().map(|s| (*s).to_owned()).collect(),
        text: text.map(str::to_owned),
    };
    assert!(validate::answers(&questions, &[answer(&["A"], None)]).is_ok());
    assert!(validate::answers(&questions, &[answer(&[], Some("mine"))]).is_ok());
    assert!(validate::answers(&questions, &[answer(&[], Some("   "))]).is_err());
    assert!(validate::answers(&questions, &[answer(&["Z"], None)]).is_err());
    assert!(validate::answers(&questions, &[answer(&["A", "A"], None)]).is_err());
    assert!(
        validate::answers(&questions, &[]).is_err(),
        "one answer per question"
    );
    let long = "x".repeat(4000);
    assert!(validate::answers(&questions, &[answer(&[], Some(&long))]).is_ok());
    let longer = "x".repeat(4001);
    assert!(validate::answers(&questions, &[answer(&[], Some(&longer))]).is_err());
}
