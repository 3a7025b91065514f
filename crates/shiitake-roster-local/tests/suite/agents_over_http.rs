//! The Local roster end to end, through the real server and `RemoteAgent`:
//!
//! 1. A sends B work with `agents.send`; B asks; A's footer shows B `waiting on A`; A
//!    answers with `agents.answer`; B completes; A's footer shows B idle.
//! 2. The same, but A escalates; B's inbox shows `needs_you`; a person answers over
//!    HTTP through the bound question contract.
//! 3. A's turn ends without answering (it sent and moved on before B asked); on a
//!    paused clock, fifteen minutes pass and the Ask goes to a person.
//!
//! Plus: a turn that ends while an Ask waits on it passes the Ask on at once, and the
//! directory routes list the Agents and every extension each runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::clock::{ManualClock, SystemClock};
use shiitake_ext_question::contract::{
    AnswerAsk, AskView, Delivery, QuestionAnswer, QuestionContract,
};
use shiitake_ext_subagents::contract::ChildStatus;
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;
use std::sync::Arc;

fn send_turn(mode: &str) -> Turn {
    Turn::tool_call(
        "agents__send",
        json!({"agent": "B", "text": "Pick a database and build the service.", "mode": mode}),
    )
}

/// Starts A's work and returns A's Session over HTTP.
async fn start_a(served: &Served) -> shiitake_client::RemoteSession {
    let a = served.remote("A");
    let session = new_session(&a).await;
    send(&session, "Have B build the service.").await;
    session
}

fn status_of(footer: &shiitake_ext_subagents::contract::FooterView) -> Option<ChildStatus> {
    footer
        .rows
        .iter()
        .find(|row| row.agent == "B")
        .map(|row| row.status.clone())
}

#[tokio::test]
async fn a_answers_the_question_b_asks_it_and_b_completes() {
    let a_model = Gated::new(
        vec![
            send_turn("wait"),
            Turn::tool_call(
                "agents__answer",
                json!({"agent": "B", "answers": [{"selected": ["SQLite"]}]}),
            ),
            Turn::text("B has the answer."),
            Turn::text("Noted B's reply."),
        ],
        1,
    );
    let b_model = Gated::new(
        vec![
            ask_turn(),
            Turn::text("Asked A."),
            Turn::text("Built it with SQLite."),
        ],
        10,
    );
    let served = Served::start(
        vec![("A", a_model.clone()), ("B", b_model)],
        Arc::new(SystemClock),
    )
    .await;
    let a_session = start_a(&served).await;

    let waiting = footer_until(&a_session, |f| {
        matches!(status_of(f), Some(ChildStatus::WaitingOn { .. }))
    })
    .await;
    assert_eq!(
        status_of(&waiting),
        Some(ChildStatus::WaitingOn { agent: "A".into() })
    );
    assert_eq!(waiting.rows[0].status.label(), "waiting on A");
    assert_eq!(
        (waiting.summary.waiting, waiting.summary.needs_you),
        (1, 0),
        "waiting on an Agent is counted apart and is calm"
    );
    let b = served.remote("B");
    let child = only_session(&b).await;
    assert_ne!(
        inbox_state(&b, &child).await,
        SessionInboxState::NeedsYou,
        "no person is asked"
    );

    a_model.release(3);
    let idle = footer_until(&a_session, |f| status_of(f) == Some(ChildStatus::Idle)).await;
    assert_eq!(idle.summary.idle, 1);
    let b_texts = user_texts(&transcript(&b.session(child.clone())).await);
    assert!(b_texts[1].starts_with("A answered"), "{b_texts:?}");
    eventually(|| a_model.script.calls() >= 4).await;
    let a_texts = user_texts(&transcript(&a_session).await);
    let reply = a_texts.last().unwrap();
    assert!(
        reply.starts_with("Agent B replied") && reply.contains("Built it with SQLite."),
        "{a_texts:?}"
    );
    // What agents.send returned: B's question rode the reply as waiting_on_you.
    let first_result = tool_result_values(&transcript(&a_session).await);
    assert_eq!(first_result[0]["status"], "waiting_on_you");
    assert_eq!(first_result[0]["waitingOnYou"].as_array().unwrap().len(), 1);
    assert_eq!(first_result[1]["status"], "answered");
    served.stop().await;
}

#[tokio::test]
async fn a_escalates_and_a_person_answers_over_http() {
    let a_model = Gated::new(
        vec![
            send_turn("wait"),
            Turn::tool_call("agents__escalate", json!({"agent": "B"})),
            Turn::text("A person decides."),
            Turn::text("Noted."),
        ],
        1,
    );
    let b_model = Gated::new(
        vec![
            ask_turn(),
            Turn::text("Asked A."),
            Turn::text("Built it with PostgreSQL."),
        ],
        10,
    );
    let served = Served::start(
        vec![("A", a_model.clone()), ("B", b_model)],
        Arc::new(SystemClock),
    )
    .await;
    let a_session = start_a(&served).await;
    footer_until(&a_session, |f| {
        matches!(status_of(f), Some(ChildStatus::WaitingOn { .. }))
    })
    .await;
    a_model.release(3);

    let b = served.remote("B");
    let child = only_session(&b).await;
    let needs_you = footer_until(&a_session, |f| {
        matches!(status_of(f), Some(ChildStatus::NeedsYou { .. }))
    })
    .await;
    assert_eq!(
        needs_you.summary.tone,
        shiitake_ext_subagents::contract::Tone::Amber
    );
    assert_eq!(inbox_state(&b, &child).await, SessionInboxState::NeedsYou);
    let Some(ChildStatus::NeedsYou {
        question: Some(question),
        ..
    }) = status_of(&needs_you)
    else {
        panic!("the row carries the question")
    };
    assert_eq!(question.text, "Which database should the service use?");
    assert_eq!(
        (
            question.answer.agent.as_str(),
            question.answer.session_id.as_str()
        ),
        ("B", child.as_str())
    );

    // A person answers through the bound contract, over HTTP, as the Answer action says.
    let b_session = b.session(child.clone());
    let contract = bind_session_extension::<_, QuestionContract>(&b_session);
    let receipt = contract
        .call(&AnswerAsk {
            ask_id: shiitake_ext_question::contract::AskId::new(question.answer.ask_id.clone()),
            request_id: "person-answer-1".into(),
            answers: vec![QuestionAnswer {
                selected: vec!["PostgreSQL".into()],
                text: None,
            }],
        })
        .await
        .unwrap();
    assert_eq!(receipt.delivery, Delivery::FollowUp);
    footer_until(&a_session, |f| status_of(f) == Some(ChildStatus::Idle)).await;
    let b_texts = user_texts(&transcript(&b_session).await);
    assert!(
        b_texts.iter().any(|t| t.starts_with("A person answered")),
        "{b_texts:?}"
    );
    served.stop().await;
}

#[tokio::test]
async fn an_ask_raised_after_the_senders_turn_goes_to_a_person_after_fifteen_minutes() {
    let clock = ManualClock::new(1_764_460_800_000);
    // A sends without waiting and ends its turn; its next turn (B's question arriving
    // as a message) never gets its model call, so no turn of A ends meanwhile.
    let a_model = Gated::new(
        vec![
            send_turn("continue"),
            Turn::text("Sent; moving on."),
            Turn::text("never reached"),
        ],
        2,
    );
    let b_model = Gated::new(vec![ask_turn(), Turn::text("Asked A.")], 0);
    let served = Served::start(
        vec![("A", a_model.clone()), ("B", b_model.clone())],
        clock.clone(),
    )
    .await;
    let a = served.remote("A");
    let a_session = new_session(&a).await;
    let first = send(&a_session, "Have B build the service.").await;
    let ended = terminal_of(&a_session, &first).await;
    assert_eq!(ended.outcome, TerminalOutcome::Completed);

    b_model.release(2);
    let b = served.remote("B");
    let child = only_session(&b).await;
    let b_session = b.session(child.clone());
    let asks = asks_until(&b_session, |asks| (!asks.is_empty()).then_some(asks)).await;
    assert!(!asks[0].needs_person(), "it waits on A first");
    assert_eq!(asks[0].status_line(), "waiting on A");

    clock.advance(Duration::from_secs(15 * 60) - Duration::from_millis(1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_ne!(
        inbox_state(&b, &child).await,
        SessionInboxState::NeedsYou,
        "not before fifteen minutes"
    );
    clock.advance(Duration::from_millis(1));
    let escalated = asks_until(&b_session, |asks| {
        asks.into_iter().next().filter(|ask| ask.needs_person())
    })
    .await;
    assert_eq!(escalated.ask_id, asks[0].ask_id);
    assert_eq!(inbox_state(&b, &child).await, SessionInboxState::NeedsYou);
    served.stop().await;
}

#[tokio::test]
async fn a_turn_that_ends_while_an_ask_waits_on_it_passes_the_ask_on_at_once() {
    let a_model = Gated::new(
        vec![
            send_turn("wait"),
            Turn::text("I leave that to a person."),
            Turn::text("Noted."),
        ],
        10,
    );
    let b_model = Gated::new(vec![ask_turn(), Turn::text("Asked A.")], 10);
    let served = Served::start(vec![("A", a_model), ("B", b_model)], Arc::new(SystemClock)).await;
    start_a(&served).await;
    let b = served.remote("B");
    let child = only_session(&b).await;
    let b_session = b.session(child.clone());
    let asked = asks_until(&b_session, |asks| {
        asks.into_iter().next().filter(|ask| ask.needs_person())
    })
    .await;
    assert!(asked.waiting_on.unwrap().escalated);
    assert_eq!(inbox_state(&b, &child).await, SessionInboxState::NeedsYou);
    served.stop().await;
}

#[tokio::test]
async fn the_directory_lists_its_agents_and_every_extension_each_runs() {
    let served = Served::start(
        vec![("A", Gated::new(vec![], 0)), ("B", Gated::new(vec![], 0))],
        Arc::new(SystemClock),
    )
    .await;
    let client = served.client();
    let list = client.agents().await.unwrap();
    assert_eq!(
        list,
        AgentList {
            agents: vec![
                AgentEntry {
                    name: name("A"),
                    default: true
                },
                AgentEntry {
                    name: name("B"),
                    default: false
                },
            ]
        }
    );
    let mut running: Vec<String> = served
        .remote("B")
        .list_extensions()
        .await
        .unwrap()
        .into_iter()
        .map(|status| {
            assert_eq!(status.state, ExtensionRunState::Running, "{status:?}");
            status.extension_id.as_str().to_owned()
        })
        .collect();
    running.sort();
    assert_eq!(
        running,
        [
            "botanical-agent-almanac",
            "botanical-agent-home",
            "botanical-session-agents",
            "botanical-session-goal",
            "botanical-session-loop",
            "botanical-session-plan",
            "botanical-session-question",
            "botanical-session-skills",
            "botanical-session-subagents",
            "shiitake-session-approval",
        ]
    );
    // Routes without an Agent segment serve the default Agent.
    let created = new_session(&client).await;
    let on_a = served.remote("A").session(created.session_id().clone());
    on_a.read(ReadOptions::default()).await.unwrap();
    let on_b = served.remote("B").session(created.session_id().clone());
    assert_eq!(
        on_b.read(ReadOptions::default()).await.unwrap_err().code,
        ErrorCode::NotFound
    );
    let missing = served.remote("nobody").list_extensions().await.unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound);
    served.stop().await;
}

/// The open Asks in a question slot (of a snapshot or an update frame).
fn question_asks(slots: &SessionExtensionSlots) -> Vec<AskView> {
    match shiitake_protocol::extension::view::<QuestionContract>(slots) {
        Ok(ExtensionViewV0::Running { value }) => value.unwrap_or_default().asks,
        _ => Vec::new(),
    }
}

/// Watches until the Session's open Asks satisfy `pick`: in the watch's baseline, or in
/// any update after it (an Ask raised after the watch began shows only there).
async fn asks_until<T>(
    session: &impl SessionApi,
    pick: impl Fn(Vec<AskView>) -> Option<T> + Clone,
) -> T {
    let again = pick.clone();
    wait_for(
        session,
        move |snapshot| pick(question_asks(&snapshot.extensions)),
        move |frame| match frame {
            SessionFrame::Update(update) => again(question_asks(&update.extensions)),
            _ => None,
        },
    )
    .await
}

/// The tool results of a transcript as JSON values.
fn tool_result_values(messages: &[shiitake_protocol::message::Message]) -> Vec<serde_json::Value> {
    messages
        .iter()
        .filter_map(|message| match message {
            shiitake_protocol::message::Message::ToolResult(result) => {
                let text: String = result
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        shiitake_protocol::message::InputContent::Text(text) => {
                            Some(text.text.clone())
                        }
                        _ => None,
                    })
                    .collect();
                Some(serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
            }
            _ => None,
        })
        .collect()
}
