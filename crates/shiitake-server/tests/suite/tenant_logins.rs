//! A login link minted by a tenant's token opens a cookie session of that tenant: the
//! cookie reaches exactly what the token reaches (its own Agents, reads and CSRF-guarded
//! writes), finds nothing of another tenant, cannot mint links, and logging out ends it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use reqwest::StatusCode;
use serde_json::json;
use shiitake_conformance::support::new_session;
use shiitake_protocol::{AgentList, SessionApi, ShiitakeError};
use shiitake_server::CSRF_HEADER;

use crate::support::tenants::{ACME_TOKEN, Hub, assert_not_found, state_of};

/// A request with the cookie line `cookie` (and the CSRF header on writes).
async fn with_cookie(
    hub: &Hub,
    cookie: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (StatusCode, String) {
    let headers = [("cookie", cookie), (CSRF_HEADER, "1")];
    let response = hub.send(None, &headers, method, path, body).await;
    let status = response.status();
    let text = if path.ends_with("/events") || path.ends_with("/watch") {
        String::new()
    } else {
        response.text().await.unwrap()
    };
    (status, text)
}

#[tokio::test]
async fn a_tenant_cookie_reaches_its_own_agents_and_nothing_of_another() {
    let hub = Hub::start().await;
    let acme = hub.tenants.local("acme");
    let globex = hub.tenants.local("globex");
    let ours = new_session(&*acme).await.session_id().to_string();
    let theirs = new_session(&*globex).await.session_id().to_string();
    let globex_before = state_of(&globex).await;
    let cookie = hub.cookie_of(ACME_TOKEN).await;

    let (status, body) = with_cookie(&hub, &cookie, "GET", "/v1/agents", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let list: AgentList = serde_json::from_str(&body).unwrap();
    let names: Vec<String> = list.agents.iter().map(|a| a.name.to_string()).collect();
    assert_eq!(names, ["acme", "acme-helper"]);

    for path in [
        format!("/v1/sessions/{ours}/snapshot"),
        format!("/v1/agents/acme/sessions/{ours}/snapshot"),
        format!("/v1/agents/acme/sessions/{ours}/watch"),
        "/v1/agents/acme-helper/sessions".to_owned(),
    ] {
        let answer = with_cookie(&hub, &cookie, "GET", &path, None).await;
        assert_eq!(answer.0, StatusCode::OK, "{path}: {}", answer.1);
    }
    let tally = json!({"by": 2});
    let own_add = format!("/v1/agents/acme/sessions/{ours}/extensions/conformance-tally/add");
    let added = with_cookie(&hub, &cookie, "POST", &own_add, Some(&tally)).await;
    assert_eq!(added, (StatusCode::OK, "2".to_owned()));

    let their_prefix = format!("/v1/agents/globex/sessions/{theirs}");
    for (method, path, body) in [
        ("GET", "/v1/agents/globex/sessions".to_owned(), None),
        ("GET", format!("{their_prefix}/snapshot"), None),
        ("GET", format!("{their_prefix}/events"), None),
        ("GET", format!("{their_prefix}/watch"), None),
        (
            "POST",
            format!("{their_prefix}/extensions/conformance-tally/add"),
            Some(&tally),
        ),
        ("DELETE", their_prefix.clone(), None),
    ] {
        let answer = with_cookie(&hub, &cookie, method, &path, body).await;
        if path.ends_with("/events") || path.ends_with("/watch") {
            assert_eq!(answer.0, StatusCode::NOT_FOUND, "{method} {path}");
        } else {
            assert_not_found(&answer, &format!("cookie: {method} {path}"));
        }
    }
    assert_eq!(
        state_of(&globex).await,
        globex_before,
        "globex is unchanged"
    );

    // A cookie cannot mint more links; logging out ends the session.
    let minted = with_cookie(&hub, &cookie, "POST", "/v1/web/login-links", None).await;
    assert_eq!(minted.0, StatusCode::FORBIDDEN, "{}", minted.1);
    let error: ShiitakeError = serde_json::from_str(&minted.1).unwrap();
    assert_eq!(error.code, shiitake_protocol::ErrorCode::NotGranted);
    let out = with_cookie(&hub, &cookie, "POST", "/logout", None).await;
    assert_eq!(out.0, StatusCode::NO_CONTENT, "{}", out.1);
    let after = with_cookie(&hub, &cookie, "GET", "/v1/agents", None).await;
    assert_eq!(after.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_operators_cookie_reaches_every_tenant() {
    let hub = Hub::start().await;
    let cookie = hub.operator_cookie().await;
    let (status, body) = with_cookie(&hub, &cookie, "GET", "/v1/agents", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let list: AgentList = serde_json::from_str(&body).unwrap();
    assert_eq!(list.agents.len(), 3);
    for name in ["acme", "globex"] {
        let path = format!("/v1/agents/{name}/sessions");
        let answer = with_cookie(&hub, &cookie, "GET", &path, None).await;
        assert_eq!(answer.0, StatusCode::OK, "{path}: {}", answer.1);
    }
}
