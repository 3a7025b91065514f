//! The web page's login over real HTTP: a one-time link sets an HttpOnly,
//! SameSite=Strict cookie holding a session credential (not the token); the cookie
//! authenticates every API route; cookie-authenticated writes obey the CSRF rule;
//! the bearer token keeps working without it; only the token mints new links.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::{Server, TOKEN};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use shiitake_core::Agent;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::AgentApi;
use shiitake_server::{CSRF_HEADER, ServerConfig, Token, WebLogin, router};

struct Web {
    server: Server,
    agent: Arc<Agent>,
    login: WebLogin,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn agent() -> (Arc<Agent>, tempfile::TempDir) {
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    crate::support::page::agent_with(model, |agent| agent).await
}

async fn web() -> Web {
    let (agent, dir) = agent().await;
    let login = WebLogin::default();
    let config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_web(login.clone());
    let server = Server::start(
        router(agent.clone(), config),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Web {
        server,
        agent,
        login,
        http,
        _dir: dir,
    }
}

impl Web {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url())
    }

    /// Opens a fresh login link; the `Cookie` header line it set.
    async fn log_in(&self) -> String {
        let link = self.login.login_url(&self.server.url()).unwrap();
        let response = self.http.get(link).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let set = response.headers()[SET_COOKIE].to_str().unwrap();
        set.split(';').next().unwrap().to_owned()
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: Value) -> reqwest::Response {
        let mut request = self.http.post(self.url(path)).json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap()
    }

    async fn session_count(&self) -> usize {
        self.agent.list_sessions(None).await.unwrap().sessions.len()
    }
}

#[tokio::test]
async fn the_login_link_works_once_and_sets_a_strict_http_only_cookie_that_is_not_the_token() {
    let web = web().await;
    let link = web.login.login_url(&web.server.url()).unwrap();
    assert!(link.starts_with(&format!("{}/login?code=", web.server.url())));
    assert!(!link.contains(TOKEN));

    let response = web.http.get(&link).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/");
    assert_eq!(response.headers()["cache-control"], "no-store");
    let set = response.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    let port = web.server.addr.port();
    let attributes: Vec<&str> = set.split("; ").collect();
    let (name, value) = attributes[0].split_once('=').unwrap();
    assert_eq!(name, format!("shiitake_web_{port}"));
    assert!(!value.contains(TOKEN) && value.len() > 64, "{value}");
    assert_eq!(
        &attributes[1..],
        ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=604800"]
    );

    let again = web.http.get(&link).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED, "a spent link");
    assert!(again.headers().get(SET_COOKIE).is_none());
    let forged = link.replace("code=", "code=0");
    let forged = web.http.get(&forged).send().await.unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    let missing = web.http.get(web.url("/login")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_page_is_public_and_the_api_is_not() {
    let web = web().await;
    let page = web.http.get(web.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(page.text().await.unwrap().contains("/web/app.js"));
    for file in [
        "app.js",
        "api.js",
        "inbox.js",
        "session.js",
        "command.js",
        "footer.js",
        "flow.js",
        "dom.js",
    ] {
        let response = web
            .http
            .get(web.url(&format!("/web/{file}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{file}");
        assert_eq!(
            response.headers()["content-type"],
            "text/javascript; charset=utf-8"
        );
    }
    let css = web
        .http
        .get(web.url("/web/style.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(css.headers()["content-type"], "text/css; charset=utf-8");
    let missing = web
        .http
        .get(web.url("/web/nosuch.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    for path in ["/v1/sessions", "/v1/catalogs", "/nosuch"] {
        let response = web.http.get(web.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
}

#[tokio::test]
async fn cookie_writes_need_the_csrf_header_and_the_own_origin() {
    let web = web().await;
    let cookie = web.log_in().await;
    let cookie = cookie.as_str();

    let list = web
        .http
        .get(web.url("/v1/sessions"))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), StatusCode::OK, "a read needs no header");

    let create = |n: u32| json!({"requestId": format!("web-{n}")});
    let bare = web
        .post("/v1/sessions", &[("cookie", cookie)], create(1))
        .await;
    assert_eq!(bare.status(), StatusCode::FORBIDDEN);
    let error: Value = bare.json().await.unwrap();
    assert_eq!(error["code"], "not_granted");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("X-Shiitake-CSRF"),
        "{error}"
    );
    let cross = web
        .post(
            "/v1/sessions",
            &[
                ("cookie", cookie),
                (CSRF_HEADER, "1"),
                ("origin", "http://evil.example"),
            ],
            create(2),
        )
        .await;
    assert_eq!(cross.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        web.session_count().await,
        0,
        "refused writes changed nothing"
    );

    let own_origin = web.server.url();
    let ok = web
        .post(
            "/v1/sessions",
            &[
                ("cookie", cookie),
                (CSRF_HEADER, "1"),
                ("origin", own_origin.as_str()),
            ],
            create(3),
        )
        .await;
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(web.session_count().await, 1);

    let bearer = format!("Bearer {TOKEN}");
    let with_token = web
        .post(
            "/v1/sessions",
            &[("authorization", bearer.as_str())],
            create(4),
        )
        .await;
    assert_eq!(
        with_token.status(),
        StatusCode::OK,
        "the token needs no CSRF header"
    );
    assert_eq!(web.session_count().await, 2);

    // A wrong token is not rescued by a good cookie.
    let wrong = web
        .post(
            "/v1/sessions",
            &[
                ("authorization", "Bearer wrong-token-0123456789"),
                ("cookie", cookie),
                (CSRF_HEADER, "1"),
            ],
            create(5),
        )
        .await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_cookie_streams_events_and_logout_ends_it() {
    let web = web().await;
    let cookie = web.log_in().await;
    let session = web
        .agent
        .create_session(shiitake_protocol::RequestId::new("web-s").unwrap())
        .await
        .unwrap();
    let watch = web
        .http
        .get(web.url(&format!("/v1/sessions/{}/watch", session.as_str())))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), StatusCode::OK);
    assert_eq!(watch.headers()["content-type"], "text/event-stream");
    drop(watch);

    let no_header = web
        .post("/logout", &[("cookie", cookie.as_str())], json!({}))
        .await;
    assert_eq!(
        no_header.status(),
        StatusCode::FORBIDDEN,
        "logout is a write too"
    );
    let out = web
        .post(
            "/logout",
            &[("cookie", cookie.as_str()), (CSRF_HEADER, "1")],
            json!({}),
        )
        .await;
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    let cleared = out.headers()[SET_COOKIE].to_str().unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    let after = web
        .http
        .get(web.url("/v1/sessions"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn only_the_token_mints_login_links() {
    let web = web().await;
    let cookie = web.log_in().await;
    let by_cookie = web
        .post(
            "/v1/web/login-links",
            &[("cookie", cookie.as_str()), (CSRF_HEADER, "1")],
            json!({}),
        )
        .await;
    assert_eq!(by_cookie.status(), StatusCode::FORBIDDEN);

    let bearer = format!("Bearer {TOKEN}");
    let minted = web
        .post(
            "/v1/web/login-links",
            &[("authorization", bearer.as_str())],
            json!({}),
        )
        .await;
    assert_eq!(minted.status(), StatusCode::OK);
    let minted: Value = minted.json().await.unwrap();
    let path = minted["path"].as_str().unwrap();
    assert!(path.starts_with("/login?code="), "{path}");
    let used = web.http.get(web.url(path)).send().await.unwrap();
    assert_eq!(used.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn without_the_page_there_is_no_page_and_no_cookie_login() {
    let (agent, _dir) = agent().await;
    let login = WebLogin::default();
    // The logins exist but the server was not given them.
    let config = ServerConfig::new(Token::new(TOKEN).unwrap());
    let server = Server::start(router(agent, config), "127.0.0.1:0".parse().unwrap()).await;
    let http = reqwest::Client::new();
    for path in ["/", "/web/app.js", "/login?code=ab.cd"] {
        let response = http
            .get(format!("{}{path}", server.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let link = login.login_url(&server.url()).unwrap();
    let response = http.get(link).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}
