//! Tenants on one database never see each other, over HTTP: two Agents (two Agent
//! keys) on the same PostgreSQL, each behind its own server; every request one
//! tenant's client makes for the other's Session is `not_found`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use futures::StreamExt;
use shiitake_conformance::TestTools;
use shiitake_conformance::support::{new_session, request, send, terminal_of, text};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::{
    AgentApi, CancelInput, ErrorCode, ReadOptions, SendOptions, SessionApi, SubscribeOptions,
    TerminalOutcome,
};
use support::{Server, agent, client, config, fresh_key};

#[tokio::test]
async fn another_tenants_session_is_not_found_over_http() {
    if !support::ready() {
        return;
    }
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("hello")])));
    let tools = Arc::new(TestTools::default());
    let (key_a, key_b) = (fresh_key(), fresh_key());
    let a = Arc::new(agent(&key_a, tools.clone(), config(model.clone())).await);
    let b = Arc::new(agent(&key_b, tools.clone(), config(model.clone())).await);
    let (server_a, server_b) = (Server::agent(a).await, Server::agent(b).await);
    let (client_a, client_b) = (client(&server_a.url()), client(&server_b.url()));

    let mine = new_session(&client_a).await;
    let command = send(&mine, "hi").await;
    assert_eq!(
        terminal_of(&mine, &command).await.outcome,
        TerminalOutcome::Completed
    );
    let id = mine.session_id().clone();

    // Every door of B refuses A's Session as if it did not exist.
    let theirs = client_b.session(id.clone());
    let code = |result: Result<_, shiitake_protocol::ShiitakeError>| result.err().map(|e| e.code);
    assert_eq!(
        code(theirs.read(ReadOptions::default()).await.map(|_| ())),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(
        code(
            theirs
                .send(text("let me in"), SendOptions::default())
                .await
                .map(|_| ())
        ),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(
        code(
            theirs
                .cancel(CancelInput {
                    command_id: command.clone(),
                    only_if_pending: None,
                })
                .await
                .map(|_| ())
        ),
        Some(ErrorCode::NotFound)
    );
    let subscribed = match theirs.subscribe(SubscribeOptions::default()).await {
        Ok(mut frames) => frames.next().await.and_then(Result::err),
        Err(error) => Some(error),
    };
    assert_eq!(subscribed.map(|e| e.code), Some(ErrorCode::NotFound));
    assert_eq!(
        code(theirs.model_preference().await.map(|_| ())),
        Some(ErrorCode::NotFound)
    );
    assert!(!client_b.delete_session(&id).await.unwrap());
    let page = client_b.list_sessions(None).await.unwrap();
    assert!(page.sessions.is_empty(), "B lists {page:?}");

    // The same create request id is a different Session in each tenant.
    let again_a = client_a.create_session(request("same-key")).await.unwrap();
    let again_b = client_b.create_session(request("same-key")).await.unwrap();
    assert_ne!(again_a, again_b);
    assert_eq!(
        client_a.create_session(request("same-key")).await.unwrap(),
        again_a
    );

    // A still has its Session, untouched by B's attempts.
    let snapshot = mine.read(ReadOptions::default()).await.unwrap();
    assert_eq!(snapshot.messages.len(), 2, "{snapshot:?}");
    let listed = client_a.list_sessions(None).await.unwrap();
    assert_eq!(listed.sessions.len(), 2);
    let listed_b = client_b.list_sessions(None).await.unwrap();
    assert_eq!(listed_b.sessions.len(), 1);
}
