//! Who may call a route: a bearer token the server's [`Credentials`] know, or the web
//! page's session cookie with the CSRF rule on writes. Either way the request is then
//! a [`Caller`]: the operator or one tenant.
//!
//! - A request with an `Authorization` header is judged by it alone: a token the
//!   credentials know passes as its caller, anything else is `401`.
//! - Without one, a cookie named [`cookie_name`] holding a live browser session
//!   ([`WebLogins`]) passes a safe method (`GET`, `HEAD`, `OPTIONS`) as its session's
//!   caller. At most [`MAX_COOKIE_VALUES`] values of that cookie are tried.
//! - A cookie-authenticated write (any other method) must also carry
//!   [`CSRF_HEADER`]`: 1`, which a cross-site form cannot send and a cross-site
//!   script cannot add without a CORS preflight this server never grants; its
//!   `Origin`, when sent, must be this server's own (`http://` + `Host`), and its
//!   `Sec-Fetch-Site`, when sent, `same-origin`. A failing write is `403
//!   not_granted` with the reason; it never reaches the route.
//!
//! The cookie is `SameSite=Strict` too, so a browser does not attach it to a
//! request another site starts; the header rule holds even where that is not
//! enforced.
//!
//! When the credentials or the logins cannot answer (a Hub's database is down), the
//! request is `503 unavailable`: neither let in nor taken for a stranger.

use axum::http::{HeaderMap, Method, header};
use shiitake_protocol::ShiitakeError;

use crate::caller::{Caller, Credentials};
use crate::web_logins::{LoginSecret, WebLogins};

/// The header a cookie-authenticated write must carry, with the value `1`.
pub const CSRF_HEADER: &str = "x-shiitake-csrf";

/// Most values of the session cookie one request may carry that are checked (a
/// browser sends one; each check may be a database read for a Hub).
pub(crate) const MAX_COOKIE_VALUES: usize = 4;

/// Prefix of the session cookie's name; the port of `Host` follows, so two
/// servers on one host (cookies ignore ports) keep separate cookies.
pub const COOKIE_PREFIX: &str = "shiitake_web_";

/// How a request was let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// The bearer token.
    Bearer,
    /// A browser session cookie.
    Cookie,
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// No valid token or session: a bare `401`.
    Unauthenticated,
    /// A cookie-authenticated write that breaks the CSRF rule: `403` with the reason.
    Csrf(&'static str),
    /// The credentials or the logins could not be checked: `503` with the reason.
    Unavailable(ShiitakeError),
}

/// A failed check as the `503` it is answered with.
fn unavailable(error: &ShiitakeError) -> Denied {
    Denied::Unavailable(crate::caller::check_failed(error))
}

/// The session cookie's name for a request to `Host: host`.
pub(crate) fn cookie_name(headers: &HeaderMap) -> String {
    let port = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .and_then(|host| host.rsplit_once(':'))
        .map(|(_, port)| port)
        .filter(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or("80");
    format!("{COOKIE_PREFIX}{port}")
}

/// Every value of cookie `name` in the request's `Cookie` headers.
fn cookie_values<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(move |pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then_some(value.trim_matches('"'))
        })
}

/// The live browser session the request's cookie names, if any, with its caller.
pub(crate) async fn session_of(
    headers: &HeaderMap,
    web: &dyn WebLogins,
) -> Result<Option<(LoginSecret, Caller)>, ShiitakeError> {
    let name = cookie_name(headers);
    let presented: Vec<LoginSecret> = cookie_values(headers, &name)
        .filter_map(LoginSecret::new)
        .take(MAX_COOKIE_VALUES)
        .collect();
    for credential in presented {
        if let Some(caller) = web.check(&credential).await? {
            return Ok(Some((credential, caller)));
        }
    }
    Ok(None)
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The CSRF rule for a cookie-authenticated write.
pub(crate) fn csrf_check(headers: &HeaderMap) -> Result<(), Denied> {
    let text = |name: &str| headers.get(name).map(|value| value.to_str().unwrap_or(""));
    if text(CSRF_HEADER) != Some("1") {
        return Err(Denied::Csrf(
            "a write authenticated by the session cookie needs the header X-Shiitake-CSRF: 1",
        ));
    }
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let own = text(header::HOST.as_str()).map(|host| format!("http://{host}"));
        if own.as_deref() != Some(origin) {
            return Err(Denied::Csrf("the request comes from another origin"));
        }
    }
    if let Some(site) = text("sec-fetch-site")
        && site != "same-origin"
    {
        return Err(Denied::Csrf("the request comes from another site"));
    }
    Ok(())
}

/// Decides whether a request may pass, how, and as whom.
pub(crate) async fn authorize(
    credentials: &dyn Credentials,
    web: Option<&dyn WebLogins>,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(Via, Caller), Denied> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let given = value
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer "))
            .ok_or(Denied::Unauthenticated)?;
        return match credentials.verify(given).await {
            Ok(Some(caller)) => Ok((Via::Bearer, caller)),
            Ok(None) => Err(Denied::Unauthenticated),
            Err(error) => Err(unavailable(&error)),
        };
    }
    let web = web.ok_or(Denied::Unauthenticated)?;
    let (_, caller) = session_of(headers, web)
        .await
        .map_err(|error| unavailable(&error))?
        .ok_or(Denied::Unauthenticated)?;
    if !is_safe(method) {
        csrf_check(headers)?;
    }
    Ok((Via::Cookie, caller))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::auth::Token;
    use crate::web_login::WebLogin;
    use axum::http::HeaderValue;
    use std::time::Instant;

    const TOKEN: &str = "web-auth-token-0123456789";

    /// A server's logins with one browser session; its cookie header line.
    fn logged_in() -> (WebLogin, String) {
        let web = WebLogin::default();
        let now = Instant::now();
        let code = web.lock().issue_code(now).unwrap();
        let session = web.lock().redeem(&code, now).unwrap().unwrap();
        (
            web,
            format!("other=1; {COOKIE_PREFIX}8080={}", session.text()),
        )
    }

    /// Runs `authorize` to its end: the in-memory logins and the token never wait.
    fn decide(
        token: &Token,
        web: Option<&WebLogin>,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<Via, Denied> {
        use futures::FutureExt;
        let web = web.map(|web| web as &dyn WebLogins);
        authorize(token, web, method, headers)
            .now_or_never()
            .expect("the in-memory check completes at once")
            .map(|(via, _)| via)
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        for (name, value) in pairs {
            map.insert(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn check(web: &WebLogin, method: Method, pairs: &[(&str, &str)]) -> Result<Via, Denied> {
        let token = Token::new(TOKEN).unwrap();
        decide(&token, Some(web), &method, &headers(pairs))
    }

    #[test]
    fn the_cookie_lets_reads_in_and_writes_only_with_the_header() {
        let (web, cookie) = logged_in();
        let cookie = cookie.as_str();
        assert_eq!(
            check(&web, Method::GET, &[("cookie", cookie)]),
            Ok(Via::Cookie)
        );
        assert!(matches!(
            check(&web, Method::POST, &[("cookie", cookie)]),
            Err(Denied::Csrf(_))
        ));
        assert!(matches!(
            check(
                &web,
                Method::POST,
                &[("cookie", cookie), (CSRF_HEADER, "0")]
            ),
            Err(Denied::Csrf(_))
        ));
        let csrf = (CSRF_HEADER, "1");
        for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            assert_eq!(
                check(&web, method, &[("cookie", cookie), csrf]),
                Ok(Via::Cookie)
            );
        }
        let same = ("origin", "http://127.0.0.1:8080");
        let fetch = ("sec-fetch-site", "same-origin");
        assert_eq!(
            check(&web, Method::POST, &[("cookie", cookie), csrf, same, fetch]),
            Ok(Via::Cookie)
        );
        for other in [
            ("origin", "http://127.0.0.1:8081"),
            ("origin", "http://evil.example"),
            ("origin", "null"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-site", "same-site"),
        ] {
            assert!(
                matches!(
                    check(&web, Method::POST, &[("cookie", cookie), csrf, other]),
                    Err(Denied::Csrf(_))
                ),
                "{other:?}"
            );
        }
    }

    #[test]
    fn the_bearer_token_needs_no_csrf_header_and_a_wrong_one_is_not_rescued() {
        let (web, cookie) = logged_in();
        let bearer = format!("Bearer {TOKEN}");
        assert_eq!(
            check(&web, Method::POST, &[("authorization", &bearer)]),
            Ok(Via::Bearer)
        );
        let wrong = format!("Bearer {TOKEN}x");
        assert_eq!(
            check(
                &web,
                Method::GET,
                &[("authorization", &wrong), ("cookie", &cookie)]
            ),
            Err(Denied::Unauthenticated)
        );
    }

    #[test]
    fn a_cookie_for_another_port_an_unknown_session_or_no_web_login_is_refused() {
        let (web, cookie) = logged_in();
        let elsewhere = cookie.replace("8080=", "9090=");
        assert_eq!(
            check(&web, Method::GET, &[("cookie", &elsewhere)]),
            Err(Denied::Unauthenticated)
        );
        let (other_server, _) = logged_in();
        assert_eq!(
            check(&other_server, Method::GET, &[("cookie", &cookie)]),
            Err(Denied::Unauthenticated)
        );
        let token = Token::new(TOKEN).unwrap();
        let headers = headers(&[("cookie", &cookie)]);
        assert_eq!(
            decide(&token, None, &Method::GET, &headers),
            Err(Denied::Unauthenticated)
        );
        assert_eq!(check(&web, Method::GET, &[]), Err(Denied::Unauthenticated));
    }

    #[test]
    fn at_most_four_values_of_the_cookie_are_tried() {
        let (web, cookie) = logged_in();
        let name = format!("{COOKIE_PREFIX}8080=");
        let live = cookie.split_once(name.as_str()).unwrap().1.to_owned();
        let line = |stale: usize| {
            let mut values: Vec<String> = (0..stale).map(|n| format!("{name}00{n}.00")).collect();
            values.push(format!("{name}{live}"));
            values.join("; ")
        };
        let at_bound = line(MAX_COOKIE_VALUES - 1);
        assert_eq!(
            check(&web, Method::GET, &[("cookie", &at_bound)]),
            Ok(Via::Cookie)
        );
        let past = line(MAX_COOKIE_VALUES);
        assert_eq!(
            check(&web, Method::GET, &[("cookie", &past)]),
            Err(Denied::Unauthenticated)
        );
    }

    /// Credentials whose store is down.
    #[derive(Debug)]
    struct Down;

    #[async_trait::async_trait]
    impl Credentials for Down {
        async fn verify(&self, _: &str) -> Result<Option<Caller>, ShiitakeError> {
            Err(ShiitakeError::internal("connection refused"))
        }
    }

    #[tokio::test]
    async fn credentials_that_cannot_answer_make_the_request_unavailable() {
        let bearer = format!("Bearer {TOKEN}");
        let decided = authorize(
            &Down,
            None,
            &Method::GET,
            &headers(&[("authorization", &bearer)]),
        )
        .await;
        let Err(Denied::Unavailable(error)) = decided else {
            panic!("{decided:?}");
        };
        assert_eq!(error.code, shiitake_protocol::ErrorCode::Unavailable);
        assert!(error.message.contains("connection refused"), "{error:?}");
    }

    #[test]
    fn the_cookie_name_follows_the_port_of_host() {
        let name = |host: &str| {
            let mut map = HeaderMap::new();
            map.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            cookie_name(&map)
        };
        assert_eq!(name("127.0.0.1:8080"), "shiitake_web_8080");
        assert_eq!(name("localhost"), "shiitake_web_80");
        assert_eq!(name("[::1]:7000"), "shiitake_web_7000");
        assert_eq!(name("[::1]"), "shiitake_web_80");
        assert_eq!(cookie_name(&HeaderMap::new()), "shiitake_web_80");
    }
}
