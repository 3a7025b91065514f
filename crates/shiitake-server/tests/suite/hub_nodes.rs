//! `GET /v1/hub/nodes` over real HTTP: the host's list of Hub processes for the
//! bearer token, refused to a browser's cookie and to no credential, absent from a
//! server that is not a Hub; the client reads it back whole.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::{Server, TOKEN};
use async_trait::async_trait;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, COOKIE, SET_COOKIE};
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::{ErrorCode, HubNode, HubNodeList, ShiitakeError};
use shiitake_server::{HubNodes, ServerConfig, Token, WebLogin, router};

/// A Hub of two processes, one of them draining.
#[derive(Debug)]
struct TwoNodes;

fn listed() -> HubNodeList {
    let node = |holder: &str, draining: bool, sessions: u64| HubNode {
        holder: holder.to_owned(),
        agent: "acme".to_owned(),
        started_at: 1_796_047_320_000,
        heartbeat_age_ms: 120,
        draining,
        connected: true,
        sessions,
        open_runs: 1,
    };
    HubNodeList {
        nodes: vec![
            node("01J0000000000000000000000A", false, 4),
            node("01J0000000000000000000000B", true, 0),
        ],
    }
}

#[async_trait]
impl HubNodes for TwoNodes {
    async fn nodes(&self) -> Result<HubNodeList, ShiitakeError> {
        Ok(listed())
    }
}

async fn server(hub: bool) -> (Server, WebLogin, tempfile::TempDir) {
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    let (agent, dir) = crate::support::page::agent_with(model, |agent| agent).await;
    let login = WebLogin::default();
    let mut config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_web(login.clone());
    if hub {
        config = config.with_hub_nodes(Arc::new(TwoNodes));
    }
    let server = Server::start(router(agent, config), "127.0.0.1:0".parse().unwrap()).await;
    (server, login, dir)
}

#[tokio::test]
async fn the_operator_lists_the_hub_processes_with_the_token_only() {
    let (server, login, _dir) = server(true).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = format!("{}/v1/hub/nodes", server.url());
    let by_token = http
        .get(&url)
        .header(AUTHORIZATION, format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_token.status(), StatusCode::OK);
    assert_eq!(by_token.json::<HubNodeList>().await.unwrap(), listed());

    let link = login.login_url(&server.url()).unwrap();
    let logged_in = http.get(link).send().await.unwrap();
    let cookie = logged_in.headers()[SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let by_cookie = http.get(&url).header(COOKIE, cookie).send().await.unwrap();
    assert_eq!(by_cookie.status(), StatusCode::FORBIDDEN);
    let refused: ShiitakeError = by_cookie.json().await.unwrap();
    assert_eq!(refused.code, ErrorCode::NotGranted);
    let anonymous = http.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);

    let client = RemoteAgent::new(ClientOptions::new(server.url()).with_token(TOKEN)).unwrap();
    assert_eq!(client.hub_nodes().await.unwrap(), listed());
}

#[tokio::test]
async fn a_server_that_is_not_a_hub_has_no_such_route() {
    let (server, _login, _dir) = server(false).await;
    let client = RemoteAgent::new(ClientOptions::new(server.url()).with_token(TOKEN)).unwrap();
    let error = client.hub_nodes().await.unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound, "{error}");
}

/// Credentials whose store is down.
#[derive(Debug)]
struct Down;

#[async_trait]
impl shiitake_server::Credentials for Down {
    async fn verify(&self, _: &str) -> Result<Option<shiitake_server::Caller>, ShiitakeError> {
        Err(ShiitakeError::internal("connection refused"))
    }
}

/// The one Agent of `router` is the operator's: a tenant's token finds no route there,
/// the Hub's processes included; credentials that cannot answer make a request `503`.
#[tokio::test]
async fn a_tenant_finds_nothing_on_a_single_agent_router_and_a_down_store_is_503() {
    use crate::support::tenants::{ACME_TOKEN, FixedCredentials, assert_not_found};
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    let (agent, _dir) = crate::support::page::agent_with(model, |agent| agent).await;
    let config = ServerConfig::new(Token::new(TOKEN).unwrap())
        .with_credentials(Arc::new(FixedCredentials))
        .with_hub_nodes(Arc::new(TwoNodes));
    let server = Server::start(
        router(agent.clone(), config.clone()),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let http = reqwest::Client::new();
    for path in [
        "/v1/hub/nodes",
        "/v1/sessions",
        "/v1/extensions",
        "/v1/nope",
    ] {
        let get = |token: &str| {
            http.get(format!("{}{path}", server.url()))
                .header(AUTHORIZATION, format!("Bearer {token}"))
                .send()
        };
        let response = get(ACME_TOKEN).await.unwrap();
        let answer = (response.status(), response.text().await.unwrap());
        assert_not_found(&answer, path);
        if path != "/v1/nope" {
            assert_eq!(get(TOKEN).await.unwrap().status(), StatusCode::OK, "{path}");
        }
    }

    let down = Server::start(
        router(agent, config.with_credentials(Arc::new(Down))),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let response = http
        .get(format!("{}/v1/sessions", down.url()))
        .header(AUTHORIZATION, format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let error: ShiitakeError = response.json().await.unwrap();
    assert_eq!(error.code, ErrorCode::Unavailable);
    assert!(error.message.contains("connection refused"), "{error:?}");
}
