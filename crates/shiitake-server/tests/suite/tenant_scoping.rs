//! A tenant's token reaches its own Agents only: on another tenant's Agent every route
//! is `not_found` (the JSON routes, both SSE routes, extension commands, the browser
//! bridge) and nothing there changes; the operator reaches every Agent; `/v1/agents`
//! lists each caller's own; the router serves an Agent the host re-opened, not the
//! closed one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use reqwest::StatusCode;
use serde_json::{Value, json};
use shiitake_conformance::support::new_session;
use shiitake_protocol::{AgentApi, AgentList, SessionApi};

use crate::support::TOKEN;
use crate::support::tenants::{ACME_TOKEN, GLOBEX_TOKEN, Hub, assert_not_found, state_of};

/// Every route of one Agent and one of its Sessions, under `prefix` (`/v1/agents/NAME`
/// or `/v1`), each with a valid request.
fn agent_routes(prefix: &str, session: &str) -> Vec<(&'static str, String, Option<Value>)> {
    let s = format!("{prefix}/sessions/{session}");
    let prompt = json!({"type": "prompt", "requestId": "tenant-prompt", "text": "hi",
        "delivery": "followUp"});
    vec![
        ("GET", format!("{prefix}/sessions"), None),
        (
            "POST",
            format!("{prefix}/sessions"),
            Some(json!({"requestId": "tenant-create"})),
        ),
        ("DELETE", s.clone(), None),
        ("POST", format!("{s}/commands"), Some(prompt)),
        ("GET", format!("{s}/snapshot"), None),
        ("GET", format!("{s}/events"), None),
        ("GET", format!("{s}/watch"), None),
        ("GET", format!("{s}/model-preference"), None),
        (
            "PUT",
            format!("{s}/model-preference"),
            Some(json!({"model": "scripted:test"})),
        ),
        (
            "POST",
            format!("{s}/extensions/conformance-tally/add"),
            Some(json!({"by": 5})),
        ),
        ("GET", format!("{prefix}/extensions"), None),
        ("GET", format!("{prefix}/catalogs"), None),
        ("GET", format!("{prefix}/tools"), None),
        (
            "POST",
            format!("{prefix}/extensions/conformance-tally/resume"),
            None,
        ),
        (
            "POST",
            format!("{prefix}/extensions/conformance-tally/commands/add"),
            Some(json!({"by": 1})),
        ),
    ]
}

/// The browser bridge's routes for `session`.
fn browser_routes(session: &str) -> Vec<(&'static str, String, Option<Value>)> {
    let s = format!("/browser/sessions/{session}/browser");
    vec![
        ("GET", "/browser/knapsack-ui.js".to_owned(), None),
        ("GET", format!("{s}/events"), None),
        (
            "POST",
            format!("{s}/claims"),
            Some(json!({"connectionId": "c", "requestId": "r"})),
        ),
        (
            "POST",
            format!("{s}/results"),
            Some(json!({"connectionId": "c", "requestId": "r", "result": {}})),
        ),
    ]
}

#[tokio::test]
async fn a_tenant_token_finds_nothing_of_another_tenant_on_any_route_and_changes_nothing() {
    let hub = Hub::start().await;
    let globex = hub.tenants.local("globex");
    let acme = hub.tenants.local("acme");
    let theirs = new_session(&*globex).await.session_id().to_string();
    let ours = new_session(&*acme).await.session_id().to_string();
    let before = state_of(&globex).await;
    let acme_before = state_of(&acme).await;

    // acme's token on globex's Agent, by name.
    for (method, path, body) in agent_routes("/v1/agents/globex", &theirs) {
        let answer = hub.call(ACME_TOKEN, method, &path, body.as_ref()).await;
        assert_not_found(&answer, &format!("acme: {method} {path}"));
    }
    // On globex's Session through acme's own default Agent (no Agent segment), the
    // answer is the one for a Session id nobody has, word for word.
    let nobodys = "ses_01M8TFFTY6EC4EB7SDF1SY78W7";
    let session_routes = agent_routes("/v1", &theirs).into_iter();
    for (method, path, body) in session_routes.filter(|(_, path, _)| path.contains(&theirs)) {
        let theirs_answer = hub.call(ACME_TOKEN, method, &path, body.as_ref()).await;
        let unknown_path = path.replace(&theirs, nobodys);
        let unknown = hub
            .call(ACME_TOKEN, method, &unknown_path, body.as_ref())
            .await;
        assert_eq!(
            (theirs_answer.0, theirs_answer.1.replace(&theirs, nobodys)),
            unknown,
            "acme: {method} {path}"
        );
        assert!(
            !theirs_answer.0.is_success() || method == "DELETE",
            "{method} {path}"
        );
    }
    // The same answer as for an Agent nobody has.
    let unknown = hub
        .call(ACME_TOKEN, "GET", "/v1/agents/nobody/sessions", None)
        .await;
    let other = hub
        .call(ACME_TOKEN, "GET", "/v1/agents/globex/sessions", None)
        .await;
    assert_not_found(&unknown, "an unknown Agent");
    assert_eq!(
        other.1.replace("globex", "NAME"),
        unknown.1.replace("nobody", "NAME"),
        "another tenant's Agent looks like one that does not exist"
    );
    // The bridge serves the operator's default Agent, acme's: globex finds nothing there.
    for (method, path, body) in browser_routes(&ours) {
        let answer = hub.call(GLOBEX_TOKEN, method, &path, body.as_ref()).await;
        assert_not_found(&answer, &format!("globex: {method} {path}"));
    }
    assert_eq!(
        state_of(&globex).await,
        before,
        "globex's Agent is unchanged"
    );
    assert_eq!(state_of(&acme).await, acme_before, "acme's too");

    // The same requests reach the owner's Agent: the routes exist and would change it.
    let tally = format!("/v1/agents/acme/sessions/{ours}/extensions/conformance-tally/add");
    let added = hub
        .call(ACME_TOKEN, "POST", &tally, Some(&json!({"by": 5})))
        .await;
    assert_eq!(added, (StatusCode::OK, "5".to_owned()));
    for (method, path, body) in browser_routes(&ours).into_iter().take(2) {
        let answer = hub.call(ACME_TOKEN, method, &path, body.as_ref()).await;
        assert_eq!(
            answer.0,
            StatusCode::OK,
            "acme: {method} {path}: {}",
            answer.1
        );
    }
}

#[tokio::test]
async fn the_operator_reaches_every_tenants_agents() {
    let hub = Hub::start().await;
    for name in ["acme", "acme-helper", "globex"] {
        let local = hub.tenants.local(name);
        let id = new_session(&*local).await.session_id().clone();
        let session = id.to_string();
        let prefix = format!("/v1/agents/{name}");
        for (method, path, body) in agent_routes(&prefix, &session) {
            // Every route but the two that end the Session or its work.
            if method == "DELETE" || path.ends_with("/resume") || path.ends_with("/commands/add") {
                continue;
            }
            let answer = hub.call(TOKEN, method, &path, body.as_ref()).await;
            assert!(
                answer.0.is_success(),
                "operator: {method} {path}: {answer:?}"
            );
        }
        let tally = local.session(id).read(Default::default()).await.unwrap();
        let tally = serde_json::to_value(tally).unwrap();
        assert_eq!(
            tally["extensions"]["conformance-tally"]["value"]["count"], 5,
            "{name}: the operator's tally reached the Agent"
        );
    }
}

#[tokio::test]
async fn each_caller_lists_its_own_agents() {
    let hub = Hub::start().await;
    let list = |token: &'static str| {
        let hub = &hub;
        async move {
            let (status, body) = hub.call(token, "GET", "/v1/agents", None).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let list: AgentList = serde_json::from_str(&body).unwrap();
            list.agents
                .into_iter()
                .map(|entry| (entry.name.to_string(), entry.default))
                .collect::<Vec<_>>()
        }
    };
    let own = |names: &[(&str, bool)]| -> Vec<(String, bool)> {
        names
            .iter()
            .map(|(name, d)| ((*name).to_owned(), *d))
            .collect()
    };
    assert_eq!(
        list(TOKEN).await,
        own(&[("acme", true), ("acme-helper", false), ("globex", false)])
    );
    assert_eq!(
        list(ACME_TOKEN).await,
        own(&[("acme", true), ("acme-helper", false)])
    );
    assert_eq!(list(GLOBEX_TOKEN).await, own(&[("globex", true)]));
    // A route without an Agent segment serves the caller's first Agent.
    let globex = hub.tenants.local("globex");
    let session = new_session(&*globex).await.session_id().to_string();
    let path = format!("/v1/sessions/{session}/snapshot");
    assert_eq!(
        hub.call(GLOBEX_TOKEN, "GET", &path, None).await.0,
        StatusCode::OK
    );
    assert_not_found(&hub.call(ACME_TOKEN, "GET", &path, None).await, "acme");
}

#[tokio::test]
async fn the_router_serves_a_reopened_agent_not_the_closed_one() {
    let hub = Hub::start().await;
    let id = new_session(&*hub.tenants.local("globex"))
        .await
        .session_id()
        .clone();
    let session = id.to_string();
    let path = format!("/v1/agents/globex/sessions/{session}/snapshot");
    assert_eq!(
        hub.call(GLOBEX_TOKEN, "GET", &path, None).await.0,
        StatusCode::OK
    );

    let (old, new) = hub.tenants.reopen("globex").await;
    // The closed Agent answers no more: a router kept over it would fail the request.
    let closed = old.list_sessions(None).await.unwrap_err();
    assert_eq!(
        closed.code,
        shiitake_protocol::ErrorCode::Unavailable,
        "{closed}"
    );
    let (status, body) = hub.call(GLOBEX_TOKEN, "GET", &path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let served: Value = serde_json::from_str(&body).unwrap();
    let stored = new.session(id).read(Default::default()).await.unwrap();
    assert_eq!(served, serde_json::to_value(stored).unwrap());
    let created = hub
        .call(
            GLOBEX_TOKEN,
            "POST",
            "/v1/agents/globex/sessions",
            Some(&json!({"requestId": "after-reopen"})),
        )
        .await;
    assert_eq!(created.0, StatusCode::OK, "{}", created.1);
    assert_eq!(new.list_sessions(None).await.unwrap().sessions.len(), 2);
}
