//! The client refuses what seed 001's grammar refuses, from a real server on
//! 127.0.0.1 that answers it: a terminal without its `diagnostic` key, and an inbox
//! page whose `next` is `null`. Each is a clear `internal` error naming the key.

#![allow(clippy::unwrap_used)]

use axum::Router;
use axum::routing::get;
use shiitake_protocol::*;

use crate::support::{Server, client};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shiitake-protocol/tests/fixtures"
);

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{path}")).unwrap()
}

/// A server that answers the inbox and one snapshot with what the grammar refuses.
async fn refusing_server() -> Server {
    let page = fixture("session_summary_page/refused/next_null.json");
    let snapshot = fixture("session_snapshot/refused/terminal_without_diagnostic.json");
    let json = |body: String| {
        move || {
            let body = body.clone();
            async move { ([("content-type", "application/json")], body) }
        }
    };
    let app = Router::new()
        .route("/v1/sessions", get(json(page)))
        .route("/v1/sessions/ses_1/snapshot", get(json(snapshot)));
    Server::start(app, "127.0.0.1:0".parse().unwrap()).await
}

#[tokio::test]
async fn the_client_refuses_a_null_next_and_a_terminal_without_diagnostic() {
    let server = refusing_server().await;
    let agent = client(&server.url());

    let listed = agent.list_sessions(None).await.unwrap_err();
    assert_eq!(listed.code, ErrorCode::Internal, "{listed:?}");
    assert!(
        listed.message.contains("`next` is null"),
        "{}",
        listed.message
    );

    let session = agent.session(SessionId::new("ses_1").unwrap());
    let read = session.read(ReadOptions::default()).await.unwrap_err();
    assert_eq!(read.code, ErrorCode::Internal, "{read:?}");
    assert!(
        read.message.contains("missing field `diagnostic`"),
        "{}",
        read.message
    );
}
