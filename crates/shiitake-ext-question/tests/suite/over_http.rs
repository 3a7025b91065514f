//! End to end over the real server: the model asks, and a person answers through the
//! contract bound on a `RemoteSession` (wait mode, then continue mode with its
//! follow-up), then an Ask expires on a paused clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use serde_json::json;
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_conformance::support::*;
use shiitake_ext_question::contract::{
    AnswerAsk, AskStatus, Delivery, QuestionAnswer, QuestionContract,
};
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;
use shiitake_server::{ServerConfig, Token, router};

const TOKEN: &str = "question-test-token-0123456789";

async fn serve(agent: Arc<shiitake_core::Agent>) -> (RemoteAgent, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(agent, ServerConfig::new(Token::new(TOKEN).unwrap()));
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    let client = RemoteAgent::new(ClientOptions::new(url).with_token(TOKEN)).unwrap();
    (client, task)
}

#[tokio::test]
async fn a_person_answers_over_http_in_turn_then_by_follow_up_then_an_ask_expires() {
    let setup = setup(vec![
        // 1. wait mode, answered in-turn
        ask_call(json!({})),
        Turn::text("Going with PostgreSQL."),
        // 2. continue mode, answered by follow-up
        ask_call(json!({"mode": "continue"})),
        Turn::text("Asked; carrying on."),
        Turn::text("Follow-up received."),
        // 3. continue mode with an expiry that stops the model
        ask_call(json!({"mode": "continue", "onExpire": {"afterMinutes": 30, "action": "stop"}})),
        Turn::text("Asked with a deadline."),
        Turn::text("Stopping as told."),
    ])
    .await;
    let local = Arc::new(setup.agent);
    let (remote, _server) = serve(local.clone()).await;
    let session = remote.session(new_session(&remote).await.session_id().clone());
    let contract = bind_session_extension::<_, QuestionContract>(&session);

    // 1. Wait mode: the call waits in-turn while the person answers over HTTP.
    let first = send(&session, "Set up the service").await;
    let asks = open_asks(&session, 1).await;
    let receipt = contract
        .call(&AnswerAsk {
            ask_id: asks[0].ask_id.clone(),
            request_id: "http-1".into(),
            answers: vec![QuestionAnswer {
                selected: vec!["PostgreSQL".into()],
                text: None,
            }],
        })
        .await
        .unwrap();
    assert_eq!(
        (receipt.status, receipt.delivery),
        (AskStatus::Answered, Delivery::InTurn)
    );
    assert_eq!(
        terminal_of(&session, &first).await.outcome,
        TerminalOutcome::Completed
    );
    let results = tool_values(&transcript(&session).await);
    assert_eq!(results[0]["answers"][0]["selected"], json!(["PostgreSQL"]));

    // 2. Continue mode: parked at once; the answer admits one follow-up.
    let second = send(&session, "Add a cache").await;
    terminal_of(&session, &second).await;
    let asks = open_asks(&session, 1).await;
    let receipt = contract
        .call(&AnswerAsk {
            ask_id: asks[0].ask_id.clone(),
            request_id: "http-2".into(),
            answers: vec![QuestionAnswer {
                selected: Vec::new(),
                text: Some("Redis, please".into()),
            }],
        })
        .await
        .unwrap();
    assert_eq!(receipt.delivery, Delivery::FollowUp);
    let follow_up = wait_for(
        &session,
        |snapshot| (snapshot.terminals.len() == 3).then_some(()),
        |frame| match frame {
            SessionFrame::Update(update) => (!update.terminals.is_empty()).then_some(()),
            _ => None,
        },
    );
    follow_up.await;
    eventually(|| setup.model.requests().len() >= 5).await;
    let texts = user_texts(&transcript(&session).await);
    assert!(texts[2].contains("Answer: \"Redis, please\""), "{texts:?}");

    // 3. An expiry on the paused clock: 30 minutes pass, one follow-up says stop.
    let third = send(&session, "Deploy it").await;
    terminal_of(&session, &third).await;
    let asks = open_asks(&session, 1).await;
    assert_eq!(asks[0].expires_at, Some(START + 30 * 60_000));
    setup.clock.advance(Duration::from_secs(29 * 60));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(open_asks(&session, 1).await.len(), 1, "not yet due");
    setup.clock.advance(Duration::from_secs(60));
    open_asks(&session, 0).await;
    eventually(|| setup.model.requests().len() >= 8).await;
    let texts = user_texts(&transcript(&session).await);
    let expired = texts.last().unwrap();
    assert!(
        expired.contains("within 30 minutes, and it expired"),
        "{expired}"
    );
    assert!(expired.contains("Do not proceed"), "{expired}");
    assert_eq!(
        texts.iter().filter(|t| t.contains("expired")).count(),
        1,
        "one delivery"
    );
}
