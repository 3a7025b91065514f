//! Failures leave as `ShiitakeError` JSON with a fitting status; bodies and pages are bounded.

#![allow(clippy::unwrap_used)]

use crate::support::{Remote, TOKEN};
use serde_json::{Value, json};
use shiitake_conformance::Fixture;
use shiitake_model::{Script, Turn};
use shiitake_protocol::{AgentApi, ErrorCode, RequestId, ShiitakeError};
use shiitake_server::MAX_BODY_BYTES;

struct Raw {
    http: reqwest::Client,
    base: String,
}

impl Raw {
    fn new(fixture: &Remote) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: fixture.server.url(),
        }
    }

    async fn send(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, String) {
        let method: reqwest::Method = method.parse().unwrap();
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    }

    /// Expects a failure: its status and decoded `ShiitakeError`.
    async fn fail(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, ErrorCode) {
        let (status, text) = self.send(method, path, body).await;
        let error: ShiitakeError = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{method} {path}: not a ShiitakeError: {text}"));
        (status, error.code)
    }
}

async fn session(fixture: &Remote) -> String {
    let id = fixture
        .agent()
        .create_session(RequestId::new(format!("r-{}", std::process::id())).unwrap())
        .await
        .unwrap();
    id.to_string()
}

fn prompt(request_id: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"type": "prompt", "requestId": request_id, "text": text, "delivery": "followUp"}),
    )
    .unwrap()
}

#[tokio::test]
async fn malformed_requests_are_400_invalid() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let raw = Raw::new(&fixture);
    let id = session(&fixture).await;
    let commands = format!("/v1/sessions/{id}/commands");
    let cases: Vec<(&str, String, Option<Vec<u8>>)> = vec![
        ("POST", commands.clone(), Some(b"{not json".to_vec())),
        (
            "POST",
            commands.clone(),
            Some(br#"{"type":"dance"}"#.to_vec()),
        ),
        (
            "POST",
            commands.clone(),
            Some(prompt("r 1", "spaces are not allowed in ids")),
        ),
        ("POST", commands.clone(), Some(prompt("r-1", "   "))),
        ("POST", commands.clone(), None),
        (
            "POST",
            "/v1/sessions".to_owned(),
            Some(br#"{"requestId":""}"#.to_vec()),
        ),
        ("GET", format!("/v1/sessions/{id}/snapshot?limit=0"), None),
        ("GET", format!("/v1/sessions/{id}/snapshot?limit=201"), None),
        ("GET", format!("/v1/sessions/{id}/snapshot?limit=ten"), None),
        (
            "GET",
            format!("/v1/sessions/{id}/snapshot?before=nope"),
            None,
        ),
        (
            "GET",
            "/v1/sessions?after=not-a-list-cursor".to_owned(),
            None,
        ),
        ("GET", "/v1/sessions/has%20space/snapshot".to_owned(), None),
        (
            "PUT",
            format!("/v1/sessions/{id}/model-preference"),
            Some(br#"{"model":""}"#.to_vec()),
        ),
    ];
    for (method, path, body) in cases {
        assert_eq!(
            raw.fail(method, &path, body).await,
            (400, ErrorCode::Invalid),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn oversized_bodies_and_values_are_413_too_large() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let raw = Raw::new(&fixture);
    let id = session(&fixture).await;
    let commands = format!("/v1/sessions/{id}/commands");
    // Over the 256 KiB body bound.
    let huge = prompt("r-huge", &"x".repeat(300 * 1024));
    assert_eq!(
        raw.fail("POST", &commands, Some(huge)).await,
        (413, ErrorCode::TooLarge)
    );
    // Within the body bound, over the 128 KiB prompt bound.
    let long = prompt("r-long", &"x".repeat(128 * 1024 + 1));
    assert_eq!(
        raw.fail("POST", &commands, Some(long)).await,
        (413, ErrorCode::TooLarge)
    );
    // An id over 128 bytes.
    let long_id = format!(r#"{{"requestId":"{}"}}"#, "r".repeat(129));
    assert_eq!(
        raw.fail("POST", "/v1/sessions", Some(long_id.into_bytes()))
            .await,
        (413, ErrorCode::TooLarge)
    );
    // Exactly at the prompt bound is accepted.
    let edge = prompt("r-edge", &"x".repeat(128 * 1024));
    let (status, body) = raw.send("POST", &commands, Some(edge)).await;
    assert_eq!(status, 200, "{body}");
}

/// `{"requestId": id}` padded with trailing spaces to `len` bytes.
fn padded_create(id: &str, len: usize) -> Vec<u8> {
    let mut body = format!(r#"{{"requestId":"{id}"}}"#).into_bytes();
    assert!(body.len() <= len);
    body.resize(len, b' ');
    body
}

#[tokio::test]
async fn the_body_bound_holds_at_its_edge() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let raw = Raw::new(&fixture);
    let edge = padded_create("r-pad-edge", MAX_BODY_BYTES);
    let (status, body) = raw.send("POST", "/v1/sessions", Some(edge)).await;
    assert_eq!(status, 200, "{body}");
    let over = padded_create("r-pad-over", MAX_BODY_BYTES + 1);
    assert_eq!(
        raw.fail("POST", "/v1/sessions", Some(over)).await,
        (413, ErrorCode::TooLarge)
    );
}

#[tokio::test]
async fn id_command_and_cursor_bounds_hold_at_their_edge() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let raw = Raw::new(&fixture);
    let id = session(&fixture).await;

    // A requestId of exactly 128 bytes is accepted.
    let (status, body) = raw
        .send(
            "POST",
            "/v1/sessions",
            Some(format!(r#"{{"requestId":"{}"}}"#, "r".repeat(128)).into_bytes()),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // A command name of 128 bytes is decoded (the extension is unknown); 129 is refused.
    let command = |len: usize| format!("/v1/extensions/none/commands/{}", "c".repeat(len));
    assert_eq!(
        raw.fail("POST", &command(128), Some(b"{}".to_vec())).await,
        (404, ErrorCode::NotFound)
    );
    assert_eq!(
        raw.fail("POST", &command(129), Some(b"{}".to_vec())).await,
        (413, ErrorCode::TooLarge)
    );

    // A Last-Event-ID of 256 bytes (the cursor bound) is accepted; 257 is refused.
    let events = |cursor: String| {
        raw.http
            .get(format!("{}/v1/sessions/{id}/events", raw.base))
            .bearer_auth(TOKEN)
            .header("last-event-id", cursor)
            .send()
    };
    let response = events("v".repeat(256)).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    drop(response);
    let response = events("v".repeat(257)).await.unwrap();
    assert_eq!(response.status().as_u16(), 413);
    let error: ShiitakeError = response.json().await.unwrap();
    assert_eq!(error.code, ErrorCode::TooLarge);

    // `limit` of `snapshot` is 1..=200 (0 and 201 are `invalid`, above).
    for limit in [1, 200] {
        let path = format!("/v1/sessions/{id}/snapshot?limit={limit}");
        let (status, body) = raw.send("GET", &path, None).await;
        assert_eq!(status, 200, "limit={limit}: {body}");
    }
}

#[tokio::test]
async fn agent_failures_keep_their_code_and_status() {
    let fixture = Remote::start(Script::new(vec![Turn::text("hi")])).await;
    let raw = Raw::new(&fixture);
    let id = session(&fixture).await;
    let commands = format!("/v1/sessions/{id}/commands");
    assert_eq!(
        raw.fail("GET", "/v1/sessions/ses_missing/snapshot", None)
            .await,
        (404, ErrorCode::NotFound)
    );
    assert_eq!(
        raw.fail("GET", "/v1/nothing/here", None).await,
        (404, ErrorCode::NotFound)
    );
    let (status, first) = raw
        .send("POST", &commands, Some(prompt("r-same", "one")))
        .await;
    assert_eq!(status, 200);
    let (status, again) = raw
        .send("POST", &commands, Some(prompt("r-same", "one")))
        .await;
    assert_eq!((status, again), (200, first));
    assert_eq!(
        raw.fail("POST", &commands, Some(prompt("r-same", "two")))
            .await,
        (409, ErrorCode::Conflict)
    );
    assert_eq!(
        raw.fail("POST", "/v1/extensions/none/resume", None).await,
        (404, ErrorCode::NotFound)
    );
}

#[tokio::test]
async fn answers_follow_the_command_type() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let raw = Raw::new(&fixture);
    let id = session(&fixture).await;
    let commands = format!("/v1/sessions/{id}/commands");
    let operator =
        json!({"type": "operator", "requestId": "r-op", "author": "operator", "text": "note"});
    let (status, body) = raw
        .send(
            "POST",
            &commands,
            Some(serde_json::to_vec(&operator).unwrap()),
        )
        .await;
    assert_eq!((status, body.as_str()), (204, ""));
    let cancel = json!({"type": "cancel", "commandId": "cmd_unknown"});
    let (status, body) = raw
        .send(
            "POST",
            &commands,
            Some(serde_json::to_vec(&cancel).unwrap()),
        )
        .await;
    assert_eq!(status, 200);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        json!({"status": "too_late", "commandId": "cmd_unknown"})
    );
    let (status, body) = raw
        .send("GET", &format!("/v1/sessions/{id}/model-preference"), None)
        .await;
    assert_eq!((status, body.as_str()), (200, "null"));
    // The conformance Agents carry one extension, the tally: a JSON array of its status.
    let (status, body) = raw.send("GET", "/v1/extensions", None).await;
    assert_eq!(status, 200);
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|status| status["extensionId"].as_str())
        .collect();
    assert_eq!(ids, ["conformance-tally"], "{body}");
}
