//! Per-process bounds of the server: request time, concurrent SSE subscribers, queued
//! prompts per Session; and the request id every response carries.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use crate::support::{Server, TOKEN};
use serde_json::json;
use shiitake_conformance::TestTools;
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{AgentApi, ErrorCode, RequestId, ShiitakeError};
use shiitake_server::{ServerConfig, Token, router};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Limited {
    server: Server,
    agent: Arc<shiitake_core::Agent>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn limited(script: Script, queued: usize, edit: impl FnOnce(&mut ServerConfig)) -> Limited {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(script));
    let mut agent_config = support::config(model);
    agent_config.max_queued_prompts = queued;
    let agent = Arc::new(
        support::harness_open(
            &dir.path().join("agent.db"),
            Arc::new(TestTools::default()),
            agent_config,
        )
        .await,
    );
    let mut config = ServerConfig::new(Token::new(TOKEN).unwrap());
    edit(&mut config);
    let server = Server::start(
        router(agent.clone(), config),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    Limited {
        server,
        agent,
        http: reqwest::Client::new(),
        _dir: dir,
    }
}

impl Limited {
    async fn session(&self) -> String {
        self.agent
            .create_session(RequestId::new("r-session").unwrap())
            .await
            .unwrap()
            .to_string()
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.server.url()))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
    }

    async fn prompt(&self, session: &str, request_id: &str) -> (u16, String) {
        let response = self
            .http
            .post(format!(
                "{}/v1/sessions/{session}/commands",
                self.server.url()
            ))
            .bearer_auth(TOKEN)
            .json(&json!({"type": "prompt", "requestId": request_id, "text": "go", "delivery": "followUp"}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    }
}

fn error_of(text: &str) -> ShiitakeError {
    serde_json::from_str(text).unwrap_or_else(|_| panic!("not a ShiitakeError: {text}"))
}

#[tokio::test]
async fn sse_subscribers_are_bounded_per_process_at_the_edge() {
    let server = limited(Script::new(vec![]), 100, |config| {
        config.max_subscribers = 2;
    })
    .await;
    let session = server.session().await;
    let events = format!("/v1/sessions/{session}/events");
    let first = server.get(&events).await;
    let second = server.get(&format!("/v1/sessions/{session}/watch")).await;
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );

    // One past the bound.
    let third = server.get(&events).await;
    assert_eq!(third.status(), 503);
    let error = error_of(&third.text().await.unwrap());
    assert_eq!(error.code, ErrorCode::Unavailable);
    assert!(
        error.message.contains("2 open event streams"),
        "{}",
        error.message
    );

    // Closing one frees its place.
    drop(first);
    let mut reopened = None;
    for _ in 0..100 {
        let response = server.get(&events).await;
        if response.status() == 200 {
            reopened = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reopened.is_some(), "a closed stream gives its place back");
}

#[tokio::test]
async fn queued_prompts_per_session_are_bounded_at_the_edge() {
    // The first prompt runs for a long time, so the others wait in the queue.
    let slow = Turn::new(vec![Step::DelayMs(60_000), Step::Text("late".into())]);
    let server = limited(Script::new(vec![slow]).cycle(true), 2, |_| {}).await;
    let session = server.session().await;
    let (status, body) = server.prompt(&session, "p-running").await;
    assert_eq!(status, 200, "{body}");
    // Wait until it leaves the queue for the run.
    let mut running = false;
    for _ in 0..200 {
        let snapshot = server
            .get(&format!("/v1/sessions/{session}/snapshot"))
            .await
            .text()
            .await
            .unwrap();
        if snapshot.contains(r#""state":"running""#) {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(running);
    for queued in ["p-1", "p-2"] {
        let (status, body) = server.prompt(&session, queued).await;
        assert_eq!(status, 200, "{queued}: {body}");
    }
    // One past the bound.
    let (status, body) = server.prompt(&session, "p-3").await;
    assert_eq!(status, 413, "{body}");
    let error = error_of(&body);
    assert_eq!(error.code, ErrorCode::TooLarge);
    assert!(
        error.message.contains("2 queued prompts"),
        "{}",
        error.message
    );
    // An exact retry of an accepted prompt is still its original answer.
    let (status, body) = server.prompt(&session, "p-2").await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_request_that_takes_too_long_is_answered_unavailable() {
    let server = limited(Script::new(vec![]), 100, |config| {
        config.request_timeout = Duration::from_millis(300);
    })
    .await;
    // A body promised but never sent keeps the handler waiting.
    let mut stream = tokio::net::TcpStream::connect(server.server.addr)
        .await
        .unwrap();
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"requ"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buffer = [0u8; 4096];
        loop {
            let n = stream.read(&mut buffer).await.unwrap();
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buffer[..n]);
            if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
                break;
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "no answer: {}",
        String::from_utf8_lossy(&answer)
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    assert_eq!(error_of(body).code, ErrorCode::Unavailable);
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let server = limited(Script::new(vec![]), 100, |_| {}).await;
    let first = server.get("/v1/sessions").await;
    let second = server.get("/v1/sessions").await;
    let id = |response: &reqwest::Response| {
        response
            .headers()
            .get("x-request-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let (one, two) = (id(&first), id(&second));
    assert!(
        one.is_some() && two.is_some() && one != two,
        "{one:?} {two:?}"
    );
    // A caller's own id is kept.
    let given = server
        .http
        .get(format!("{}/v1/sessions", server.server.url()))
        .bearer_auth(TOKEN)
        .header("x-request-id", "caller-42")
        .send()
        .await
        .unwrap();
    assert_eq!(id(&given).as_deref(), Some("caller-42"));
}

/// The MCP endpoint's calls and A2A's streams take their places from the same bound as
/// the event streams: with every place held, an MCP call is `503` with a JSON-RPC error
/// and an A2A stream a JSON-RPC error; a place given back admits them again.
#[tokio::test]
async fn mcp_calls_and_a2a_streams_share_the_bound_of_event_streams() {
    let server = limited(Script::new(vec![]), 100, |config| {
        config.max_subscribers = 1;
    })
    .await;
    let session = server.session().await;
    let (status, accepted) = server.prompt(&session, "p-task").await;
    assert_eq!(status, 200, "{accepted}");
    let command: serde_json::Value = serde_json::from_str(&accepted).unwrap();
    let task = format!("{session}.{}", command["commandId"].as_str().unwrap());
    let held = server.get(&format!("/v1/sessions/{session}/events")).await;
    assert_eq!(held.status(), 200);

    let mcp = |server: &Limited| {
        server
            .http
            .post(format!("{}/mcp", server.server.url()))
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
    };
    let refused = mcp(&server).await.unwrap();
    assert_eq!(refused.status(), 503);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 open event streams")
    );

    let stream = json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask",
        "params": {"id": task}});
    let a2a = server
        .http
        .post(format!("{}/v1/a2a", server.server.url()))
        .bearer_auth(TOKEN)
        .json(&stream)
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = a2a.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 open event streams"),
        "{body}"
    );

    drop(held);
    let mut admitted = false;
    for _ in 0..100 {
        if mcp(&server).await.unwrap().status() == 200 {
            admitted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        admitted,
        "a closed stream gives its place back to MCP calls"
    );
}
