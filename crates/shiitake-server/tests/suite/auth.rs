//! Every route wants the bearer token; without it a caller learns nothing but 401.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;

use crate::support::{Remote, Server, TOKEN};
use shiitake_conformance::{Fixture, TestTools};
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::{AgentApi, ErrorCode, ReadOptions, RequestId, SessionApi};

async fn status_and_body(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn a_missing_or_wrong_token_gets_a_bare_401_on_every_route() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let session_id = fixture
        .agent()
        .create_session(RequestId::new("r-auth").unwrap())
        .await
        .unwrap();
    let base = fixture.server.url();
    let http = reqwest::Client::new();
    let routes = [
        ("GET", "/v1/sessions".to_owned()),
        ("POST", "/v1/sessions".to_owned()),
        ("GET", format!("/v1/sessions/{session_id}/snapshot")),
        ("GET", "/v1/sessions/ses_unknown/snapshot".to_owned()),
        ("GET", format!("/v1/sessions/{session_id}/events")),
        ("DELETE", format!("/v1/sessions/{session_id}")),
        ("GET", "/no/such/route".to_owned()),
    ];
    for (method, path) in routes {
        let url = format!("{base}{path}");
        let method: reqwest::Method = method.parse().unwrap();
        for auth in [None, Some("Bearer wrong-token-0123456789"), Some(TOKEN)] {
            let mut request = http.request(method.clone(), &url);
            match auth {
                Some(TOKEN) => request = request.header("authorization", TOKEN), // no "Bearer "
                Some(value) => request = request.header("authorization", value),
                None => {}
            }
            let (status, body) = status_and_body(request).await;
            assert_eq!(
                (status, body.as_str()),
                (401, ""),
                "{method} {path} with {auth:?}"
            );
        }
    }
    // The Session is still there: the refused DELETE did nothing.
    let session = fixture.agent().session(session_id);
    session.read(ReadOptions::default()).await.unwrap();
}

#[tokio::test]
async fn the_right_token_is_let_through() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let url = format!("{}/v1/sessions", fixture.server.url());
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.text().await.unwrap(), r#"{"sessions":[]}"#);
}

#[tokio::test]
async fn a_client_with_a_wrong_token_gets_not_granted() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let local = support::local_agent(&dir, Arc::new(TestTools::default()), model).await;
    let server = Server::agent(Arc::new(local), "127.0.0.1:0".parse().unwrap()).await;
    let options =
        shiitake_client::ClientOptions::new(server.url()).with_token("not-the-token-at-all");
    let agent = shiitake_client::RemoteAgent::new(options).unwrap();
    let error = agent.list_sessions(None).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::NotGranted);
    let session = agent.session(shiitake_protocol::SessionId::new("ses_x").unwrap());
    let error = session
        .subscribe(Default::default())
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotGranted);
}
