//! A client driving `answer` over HTTP tells its failures apart: a malformed answer is
//! `invalid` (400), an id the Session never held `not_found` (404), and an answer that
//! lost the race with another one (or with a withdraw) `conflict` (409), each with how
//! the Ask closed. A single-select answer may name its label as a plain string.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::*;
use axum::http::StatusCode;
use serde_json::{Value, json};
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_conformance::support::*;
use shiitake_ext_question::contract::{AskStatus, Delivery, MAX_CLOSED_REMEMBERED, Receipt};
use shiitake_ext_question::extension_id;
use shiitake_model::Turn;
use shiitake_protocol::*;
use shiitake_server::{ServerConfig, Token, router, status_of};

const TOKEN: &str = "question-late-token-0123456789";

async fn serve(agent: Arc<shiitake_core::Agent>) -> RemoteAgent {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(agent, ServerConfig::new(Token::new(TOKEN).unwrap()));
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    RemoteAgent::new(ClientOptions::new(url).with_token(TOKEN)).unwrap()
}

async fn answer(
    session: &impl SessionApi,
    ask_id: &Value,
    request_id: &str,
    selected: Value,
) -> Result<Value, ShiitakeError> {
    session
        .call_extension(
            &extension_id().unwrap(),
            "answer",
            json!({"askId": ask_id, "requestId": request_id, "answers": [{"selected": selected}]}),
        )
        .await
}

#[tokio::test]
async fn unknown_closed_and_malformed_answers_get_their_own_codes() {
    let setup = setup(vec![
        ask_call(json!({"mode": "continue"})),
        Turn::text("Asked."),
        Turn::text("Thanks."),
        ask_call(json!({"mode": "continue"})),
        Turn::text("Asked again."),
    ])
    .await;
    let local = Arc::new(setup.agent);
    let remote = serve(local.clone()).await;
    let session = remote.session(new_session(&remote).await.session_id().clone());
    let sent = send(&session, "Set up the service").await;
    terminal_of(&session, &sent).await;
    let asks = open_asks(&session, 1).await;
    let ask_id = json!(asks[0].ask_id);

    // A single-select answer names its one label as a plain string.
    let receipt = answer(&session, &ask_id, "first", json!("PostgreSQL"))
        .await
        .unwrap();
    let receipt: Receipt = serde_json::from_value(receipt).unwrap();
    assert_eq!(
        (receipt.status, receipt.delivery),
        (AskStatus::Answered, Delivery::FollowUp)
    );
    eventually(|| setup.model.requests().len() >= 3).await;
    let texts = user_texts(&transcript(&session).await);
    assert!(texts[1].contains("PostgreSQL"), "{texts:?}");

    // The same request again is the same receipt (core's idempotency) ...
    let again = answer(&session, &ask_id, "first", json!("PostgreSQL"))
        .await
        .unwrap();
    assert_eq!(serde_json::from_value::<Receipt>(again).unwrap(), receipt);
    // ... another client's answer lost the race: conflict, saying how it closed.
    let late = answer(&session, &ask_id, "second", json!(["SQLite"]))
        .await
        .unwrap_err();
    assert_eq!(late.code, ErrorCode::Conflict, "{late}");
    assert_eq!(status_of(late.code), StatusCode::CONFLICT);
    assert!(late.message.contains("was already answered"), "{late}");
    let decline = session
        .call_extension(
            &extension_id().unwrap(),
            "decline",
            json!({"askId": ask_id, "requestId": "third"}),
        )
        .await
        .unwrap_err();
    assert_eq!(decline.code, ErrorCode::Conflict, "{decline}");

    // An id the Session never held: not_found.
    let unknown = answer(
        &session,
        &json!("ask_01J00000000000000000000000"),
        "fourth",
        json!("SQLite"),
    )
    .await
    .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::NotFound, "{unknown}");
    assert_eq!(status_of(unknown.code), StatusCode::NOT_FOUND);

    // On an open Ask, a malformed answer stays invalid and leaves it open.
    let sent = send(&session, "Add a cache").await;
    terminal_of(&session, &sent).await;
    let open = open_asks(&session, 1).await;
    let open_id = json!(open[0].ask_id);
    for (request, selected) in [
        ("bad-label", json!("Oracle")),
        ("two-labels", json!(["SQLite", "PostgreSQL"])),
        ("a-number", json!(3)),
    ] {
        let refused = answer(&session, &open_id, request, selected.clone())
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Invalid, "{selected}: {refused}");
        assert_eq!(status_of(refused.code), StatusCode::BAD_REQUEST);
    }
    assert_eq!(open_asks(&session, 1).await, open);
}

#[test]
fn a_session_remembers_a_bounded_number_of_closed_asks() {
    use shiitake_ext_question::contract::{AskId, AskInput, AskMode, Question, QuestionOption};
    use shiitake_ext_question::state::{AskError, AskRequest, Book, Closure};

    let mut book = Book::default();
    let input = AskInput {
        questions: vec![Question {
            header: "Pick".into(),
            question: "Which?".into(),
            options: vec![QuestionOption {
                label: "A".into(),
                description: None,
            }],
            multi_select: false,
        }],
        mode: AskMode::Continue,
        on_expire: None,
    };
    let id = |n: usize| AskId::new(format!("ask_{n:04}"));
    // One more closed Ask than the Session remembers: the first is forgotten.
    for n in 0..=MAX_CLOSED_REMEMBERED {
        book.ask(AskRequest {
            ask_id: id(n),
            execution: format!("run:call{n}"),
            run: "run".into(),
            input: input.clone(),
            sender: None,
            now: 0,
        })
        .unwrap();
        book.withdraw(&id(n)).unwrap();
    }
    assert_eq!(book.closed.len(), MAX_CLOSED_REMEMBERED);
    assert_eq!(
        book.withdraw(&id(1)).unwrap_err(),
        AskError::Closed {
            ask_id: id(1),
            how: Closure::Withdrawn
        },
        "the oldest remembered"
    );
    assert_eq!(
        book.withdraw(&id(0)).unwrap_err(),
        AskError::Unknown(id(0)),
        "one past the bound is forgotten"
    );
}
