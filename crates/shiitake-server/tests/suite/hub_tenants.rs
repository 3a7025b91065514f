//! The operator's `/v1/hub/tenants` over real HTTP and through the client: create
//! (`201`), list, issue a token (`201`, with and without `revokeOthers`), revoke and
//! delete (`204`); the routes do not exist for a tenant's token (`not_found`, before
//! the body is read) and the operator's own cookie is `not_granted`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use reqwest::StatusCode;
use serde_json::{Value, json};
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_protocol::{ErrorCode, IssueToken, IssuedToken, ShiitakeError, TenantList};

use crate::support::TOKEN;
use crate::support::tenants::{ACME_TOKEN, GLOBEX_TOKEN, Hub, assert_not_found, tenant};

/// Every operator route, with a valid request.
fn operator_routes() -> Vec<(&'static str, &'static str, Option<Value>)> {
    vec![
        ("POST", "/v1/hub/tenants", Some(json!({"name": "initech"}))),
        ("GET", "/v1/hub/tenants", None),
        (
            "POST",
            "/v1/hub/tenants/initech/tokens",
            Some(json!({"revokeOthers": true})),
        ),
        (
            "DELETE",
            "/v1/hub/tenants/initech/tokens/0000000000000001",
            None,
        ),
        ("DELETE", "/v1/hub/tenants/initech", None),
    ]
}

#[tokio::test]
async fn the_operator_manages_tenants_and_their_tokens() {
    let hub = Hub::start().await;
    let (status, body) = hub
        .call(
            TOKEN,
            "POST",
            "/v1/hub/tenants",
            Some(&json!({"name": "initech"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let first: IssuedToken = serde_json::from_str(&body).unwrap();
    assert_eq!(first.tenant, tenant("initech"));

    let client = RemoteAgent::new(ClientOptions::new(hub.server.url()).with_token(TOKEN)).unwrap();
    let issued = client
        .issue_token(&tenant("initech"), IssueToken::default())
        .await
        .unwrap();
    let list = client.tenants().await.unwrap();
    let ids: Vec<_> = list.tenants[0]
        .tokens
        .iter()
        .map(|t| t.id.clone())
        .collect();
    assert_eq!(ids, [first.id.clone(), issued.id.clone()]);
    client
        .revoke_token(&tenant("initech"), &first.id)
        .await
        .unwrap();
    let rotated = client
        .issue_token(
            &tenant("initech"),
            IssueToken {
                revoke_others: true,
            },
        )
        .await
        .unwrap();
    let list = client.tenants().await.unwrap();
    let ids: Vec<_> = list.tenants[0]
        .tokens
        .iter()
        .map(|t| t.id.clone())
        .collect();
    assert_eq!(ids, [rotated.id]);

    let second = client.create_tenant(tenant("hooli")).await.unwrap();
    assert_eq!(second.tenant, tenant("hooli"));
    let again = client.create_tenant(tenant("hooli")).await.unwrap_err();
    assert_eq!(again.code, ErrorCode::Conflict, "{again}");
    let (status, body) = hub
        .call(TOKEN, "DELETE", "/v1/hub/tenants/hooli", None)
        .await;
    assert_eq!((status, body.as_str()), (StatusCode::NO_CONTENT, ""));
    client.delete_tenant(&tenant("initech")).await.unwrap();
    let gone = client.delete_tenant(&tenant("initech")).await.unwrap_err();
    assert_eq!(gone.code, ErrorCode::NotFound, "{gone}");
    assert_eq!(
        client.tenants().await.unwrap(),
        TenantList {
            tenants: Vec::new()
        }
    );
    // A bad name is refused before the host sees it.
    let (status, _) = hub
        .call(
            TOKEN,
            "POST",
            "/v1/hub/tenants",
            Some(&json!({"name": "a b"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_operator_routes_do_not_exist_for_a_tenant_and_refuse_a_cookie() {
    let hub = Hub::start().await;
    let operator =
        RemoteAgent::new(ClientOptions::new(hub.server.url()).with_token(TOKEN)).unwrap();
    operator.create_tenant(tenant("initech")).await.unwrap();
    let before = operator.tenants().await.unwrap();

    for token in [ACME_TOKEN, GLOBEX_TOKEN] {
        for (method, path, body) in operator_routes() {
            let answer = hub.call(token, method, path, body.as_ref()).await;
            assert_not_found(&answer, &format!("{method} {path}"));
        }
        // Refused before the body is read: a malformed one is not_found too.
        let answer = hub
            .call(token, "POST", "/v1/hub/tenants", Some(&json!({"bad": 1})))
            .await;
        assert_not_found(&answer, "a malformed body");
        let tenant_client =
            RemoteAgent::new(ClientOptions::new(hub.server.url()).with_token(token)).unwrap();
        let error = tenant_client.tenants().await.unwrap_err();
        assert_eq!(error.code, ErrorCode::NotFound, "{error}");
    }
    assert_eq!(operator.tenants().await.unwrap(), before, "nothing changed");

    let cookie = hub.operator_cookie().await;
    let headers = [
        ("cookie", cookie.as_str()),
        (shiitake_server::CSRF_HEADER, "1"),
    ];
    for (method, path, body) in operator_routes() {
        let response = hub.send(None, &headers, method, path, body.as_ref()).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{method} {path}");
        let error: ShiitakeError = response.json().await.unwrap();
        assert_eq!(error.code, ErrorCode::NotGranted, "{method} {path}");
    }
    assert_eq!(operator.tenants().await.unwrap(), before, "nothing changed");
}
