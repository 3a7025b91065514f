//! An Ask raised during work another Agent sent waits on that Agent first: it always
//! parks, reads `waiting on <name>`, and only the sender's Session (or a person) may
//! answer it. It goes to a person when the sender escalates it, when the sender's
//! turn ends, or after fifteen minutes (on a paused clock here).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::extension::Sender;
use shiitake_ext_question::contract::{
    AnswerAsk, AskView, Delivery, QuestionAnswer, QuestionContract, Receipt,
};
use shiitake_ext_question::{QuestionConfig, extension_id, sender};
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

const PARENT: &str = "parent-session";

async fn asked_by_sender(turns: Vec<Turn>) -> (Setup, shiitake_core::LocalSession, AskView) {
    let setup = setup_with(
        turns,
        QuestionConfig {
            waits_on_sender: true,
        },
        |_| {},
    )
    .await;
    let id = new_session(&setup.agent).await.session_id().clone();
    let child = setup.agent.session(id);
    let accepted = child
        .send_from(
            Sender {
                agent: "Planner".into(),
                session_id: SessionId::new(PARENT).unwrap(),
            },
            PromptText::new("Build the thing").unwrap(),
            SendOptions::default(),
        )
        .await
        .unwrap();
    terminal_of(&child, &accepted.command_id).await;
    let asks = open_asks(&child, 1).await;
    let ask = asks[0].clone();
    (setup, child, ask)
}

fn answer_turns() -> Vec<Turn> {
    vec![
        ask_call(json!({})),
        Turn::text("Asked the planner."),
        Turn::text("Continuing with the answer."),
    ]
}

#[tokio::test]
async fn an_ask_waits_on_the_sender_and_only_the_senders_session_answers_it() {
    let (setup, child, ask) = asked_by_sender(answer_turns()).await;
    let results = tool_values(&transcript(&child).await);
    assert_eq!(
        results[0]["status"], "parked",
        "a wait-mode Ask parks when it waits on the sender"
    );
    let waiting = ask.waiting_on.clone().unwrap();
    assert_eq!(
        (waiting.agent.as_str(), waiting.escalated),
        ("Planner", false)
    );
    assert_eq!(ask.status_line(), "waiting on Planner");
    assert!(!ask.needs_person());
    assert_ne!(
        inbox_state(&setup.agent, child.session_id()).await,
        SessionInboxState::NeedsYou,
        "calm until escalated"
    );
    // What rides the child's reply to the sender, and what another Session sees.
    let id = extension_id().unwrap();
    let riding = child
        .host_transaction(&id, |tx| Ok(json!(sender::waiting_on(tx, PARENT)?)))
        .await
        .unwrap();
    assert_eq!(riding, json!([ask]));
    let others = child
        .host_transaction(&id, |tx| Ok(json!(sender::waiting_on(tx, "elsewhere")?)))
        .await
        .unwrap();
    assert_eq!(others, json!([]));

    let answers = vec![QuestionAnswer {
        selected: vec!["SQLite".into()],
        text: None,
    }];
    let ask_id = ask.ask_id.clone();
    let from_elsewhere = {
        let answers = answers.clone();
        let ask_id = ask_id.clone();
        child
            .host_transaction(&id, move |tx| {
                sender::answer(tx, &ask_id, "another-session", answers.clone())
            })
            .await
    };
    assert_eq!(from_elsewhere.unwrap_err().code, ErrorCode::Invalid);
    let receipt = child
        .host_transaction(&id, move |tx| {
            sender::answer(tx, &ask_id, PARENT, answers.clone())
        })
        .await
        .unwrap();
    let receipt: Receipt = serde_json::from_value(receipt).unwrap();
    assert_eq!(receipt.delivery, Delivery::FollowUp);
    eventually(|| setup.model.requests().len() >= 3).await;
    let texts = user_texts(&transcript(&child).await);
    assert!(texts[1].starts_with("Planner answered"), "{texts:?}");
}

#[tokio::test]
async fn escalation_and_the_senders_turn_end_pass_it_to_a_person_who_may_answer() {
    let (setup, child, ask) = asked_by_sender(answer_turns()).await;
    let id = extension_id().unwrap();
    let ask_id = ask.ask_id.clone();
    let wrong = {
        let ask_id = ask_id.clone();
        child
            .host_transaction(&id, move |tx| sender::escalate(tx, &ask_id, "someone-else"))
            .await
    };
    assert_eq!(wrong.unwrap_err().code, ErrorCode::Invalid);
    let escalated = child
        .host_transaction(&id, |tx| sender::sender_turn_ended(tx, PARENT))
        .await
        .unwrap();
    assert_eq!(escalated, json!({"escalated": 1}));
    assert_eq!(
        inbox_state(&setup.agent, child.session_id()).await,
        SessionInboxState::NeedsYou
    );
    let asks = open_asks(&child, 1).await;
    assert!(asks[0].needs_person());
    // A person may always answer.
    let contract = bind_session_extension::<_, QuestionContract>(&child);
    let receipt = contract
        .call(&AnswerAsk {
            ask_id: ask_id.clone(),
            request_id: "person".into(),
            answers: vec![QuestionAnswer {
                selected: Vec::new(),
                text: Some("Use SQLite".into()),
            }],
        })
        .await
        .unwrap();
    assert_eq!(receipt.delivery, Delivery::FollowUp);
    eventually(|| setup.model.requests().len() >= 3).await;
    let texts = user_texts(&transcript(&child).await);
    assert!(texts[1].starts_with("A person answered"), "{texts:?}");
}

#[tokio::test]
async fn after_fifteen_minutes_an_unanswered_ask_goes_to_a_person() {
    let (setup, child, ask) = asked_by_sender(answer_turns()).await;
    setup
        .clock
        .advance(Duration::from_secs(15 * 60) - Duration::from_millis(1));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_ne!(
        inbox_state(&setup.agent, child.session_id()).await,
        SessionInboxState::NeedsYou,
        "not before fifteen minutes"
    );
    setup.clock.advance(Duration::from_millis(1));
    let escalated = wait_for(
        &child,
        |snapshot| {
            let asks = projection(snapshot).asks;
            asks.first()
                .filter(|ask| ask.needs_person())
                .map(|ask| ask.ask_id.clone())
        },
        |frame| match frame {
            SessionFrame::Update(update) => {
                let value: Option<Value> = update
                    .extensions
                    .get(&extension_id().unwrap())
                    .map(|slot| json!(slot));
                value.and_then(|slot| {
                    slot["value"]["asks"][0]["waitingOn"]["escalated"]
                        .as_bool()
                        .filter(|escalated| *escalated)
                        .map(|_| ask.ask_id.clone())
                })
            }
            _ => None,
        },
    )
    .await;
    assert_eq!(escalated, ask.ask_id);
    assert_eq!(
        inbox_state(&setup.agent, child.session_id()).await,
        SessionInboxState::NeedsYou
    );
    // The sender may still pass it on; a second escalation changes nothing.
    let id = extension_id().unwrap();
    let ask_id = ask.ask_id.clone();
    child
        .host_transaction(&id, move |tx| sender::escalate(tx, &ask_id, PARENT))
        .await
        .unwrap();
    assert_eq!(open_asks(&child, 1).await.len(), 1);
}

#[tokio::test]
async fn without_the_host_option_a_sent_run_asks_a_person_directly() {
    let setup = setup(vec![
        ask_call(json!({"mode": "continue"})),
        Turn::text("Asked."),
    ])
    .await;
    let id = new_session(&setup.agent).await.session_id().clone();
    let child = setup.agent.session(id);
    let accepted = child
        .send_from(
            Sender {
                agent: "Planner".into(),
                session_id: SessionId::new(PARENT).unwrap(),
            },
            PromptText::new("Build").unwrap(),
            SendOptions::default(),
        )
        .await
        .unwrap();
    terminal_of(&child, &accepted.command_id).await;
    let asks = open_asks(&child, 1).await;
    assert!(asks[0].waiting_on.is_none());
    assert_eq!(
        inbox_state(&setup.agent, child.session_id()).await,
        SessionInboxState::NeedsYou
    );
}
