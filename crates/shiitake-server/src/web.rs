//! The web page (`docs/web.md`): its files, embedded in the binary, and the login
//! routes that turn a one-time link into a session cookie.
//!
//! Public (no credential): `GET /` (the page), `GET /web/{file}` (its ES modules and
//! CSS) and `GET /login?code=` (redeems a link). The page holds no data: everything
//! it shows comes from the API routes, which need the token or the cookie.
//! Authenticated: `POST /logout` (ends the browser session) and
//! `POST /v1/web/login-links` (mints a link of the token's caller; the bearer token
//! only). The logins themselves are the host's [`WebLogins`].

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use shiitake_protocol::ShiitakeError;

use crate::caller::{Caller, check_failed};
use crate::error::HttpError;
use crate::extract::QueryParams;
use crate::web_auth::{Via, cookie_name, session_of};
use crate::web_logins::{LoginSecret, WebLogins};

/// The logins the page's routes share.
type Logins = State<Arc<dyn WebLogins>>;

/// The page's files: (name under `/web/`, content type, bytes).
const FILES: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("web/app.js")),
    ("api.js", JS, include_str!("web/api.js")),
    ("inbox.js", JS, include_str!("web/inbox.js")),
    ("session.js", JS, include_str!("web/session.js")),
    ("command.js", JS, include_str!("web/command.js")),
    ("footer.js", JS, include_str!("web/footer.js")),
    ("flow.js", JS, include_str!("web/flow.js")),
    ("dom.js", JS, include_str!("web/dom.js")),
    ("markdown.js", JS, include_str!("web/markdown.js")),
    // markdown-it's parser, bundled by `cargo xtask web-vendor` (licences beside it).
    (
        "markdown-it.js",
        JS,
        include_str!("web/vendor/markdown-it.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("web/style.css"),
    ),
];

const JS: &str = "text/javascript; charset=utf-8";
const INDEX: &str = include_str!("web/index.html");

/// Everything the page loads comes from this server; nothing runs inline.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

fn page_headers(content_type: &'static str) -> [(header::HeaderName, &'static str); 5] {
    [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, "no-cache"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ]
}

/// `GET /`: the page.
pub(crate) async fn index() -> Response {
    (page_headers("text/html; charset=utf-8"), INDEX).into_response()
}

/// `GET /web/{file}`: one of the page's modules or its style sheet.
pub(crate) async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(file, _, _)| *file == name) {
        Some((_, content_type, body)) => (page_headers(content_type), *body).into_response(),
        None => HttpError(ShiitakeError::not_found(format!("no page file {name}"))).into_response(),
    }
}

/// Query of `GET /login`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoginQuery {
    code: String,
}

const LINK_SPENT: &str = "<!doctype html><meta charset=utf-8><title>Shiitake</title>\
<p>This login link was already used, has expired, or belongs to a server that \
restarted. Ask <code>shiitake serve</code> for a new one.</p>";

/// `GET /login?code=`: spends the code, sets the session cookie and sends the browser to `/`.
pub(crate) async fn login(
    State(web): Logins,
    headers: HeaderMap,
    QueryParams(query): QueryParams<LoginQuery>,
) -> Response {
    let redeemed = match LoginSecret::new(query.code) {
        Some(code) => web.redeem(&code).await,
        None => Ok(None),
    };
    let session = match redeemed {
        Ok(Some((session, _caller))) => session,
        Ok(None) => {
            return (
                StatusCode::UNAUTHORIZED,
                page_headers("text/html; charset=utf-8"),
                LINK_SPENT,
            )
                .into_response();
        }
        Err(error) => return HttpError(check_failed(&error)).into_response(),
    };
    let cookie = format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        cookie_name(&headers),
        session.as_str(),
        web.session_ttl().as_secs()
    );
    let mut response = (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
    )
        .into_response();
    match HeaderValue::from_str(&cookie) {
        Ok(value) => {
            response.headers_mut().insert(header::SET_COOKIE, value);
            response
        }
        Err(error) => HttpError(ShiitakeError::internal(error.to_string())).into_response(),
    }
}

/// `POST /logout`: ends the browser session the cookie names and clears the cookie.
pub(crate) async fn logout(State(web): Logins, headers: HeaderMap) -> Response {
    let ended = match session_of(&headers, web.as_ref()).await {
        Ok(Some((session, _caller))) => web.end(&session).await,
        Ok(None) => Ok(()),
        Err(error) => Err(error),
    };
    if let Err(error) = ended {
        return HttpError(check_failed(&error)).into_response();
    }
    let clear = format!(
        "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
        cookie_name(&headers)
    );
    match HeaderValue::from_str(&clear) {
        Ok(value) => (StatusCode::NO_CONTENT, [(header::SET_COOKIE, value)]).into_response(),
        Err(error) => HttpError(ShiitakeError::internal(error.to_string())).into_response(),
    }
}

/// Answer of `POST /v1/web/login-links`.
#[derive(Debug, Serialize)]
pub(crate) struct LoginLink {
    /// `/login?code=...`, to append to the server's base URL.
    path: String,
}

/// `POST /v1/web/login-links`: a fresh one-time link whose session is the token's
/// caller (a tenant's token mints a tenant's session), for the bearer token only (a
/// browser session cannot mint more of itself).
pub(crate) async fn mint_link(
    State(web): Logins,
    via: Option<axum::Extension<Via>>,
    caller: Option<axum::Extension<Caller>>,
) -> Response {
    let (Some(axum::Extension(Via::Bearer)), Some(axum::Extension(caller))) = (via, caller) else {
        let refused = ShiitakeError::not_granted("only the bearer token can mint login links");
        return HttpError(refused).into_response();
    };
    match web.issue(&caller).await {
        Ok(code) => Json(LoginLink {
            path: crate::web_logins::login_path(&code),
        })
        .into_response(),
        Err(error) => HttpError(check_failed(&error)).into_response(),
    }
}
