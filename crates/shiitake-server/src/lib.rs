//! The HTTP and Server-Sent Events surface of a Shiitake Agent.
//!
//! [`router`] turns any [`AgentApi`] into an axum [`Router`]: one JSON route per
//! Agent and Session operation, and two SSE routes (`events` for
//! `subscribe`, `watch` for a snapshot followed by its changes). The server
//! holds no Session state of its own: every request goes to the Agent, which
//! is the one source of truth, so the same router can sit in front of the
//! in-process core Agent or anything else that implements the traits.
//!
//! Every route requires a bearer [`Token`]; failures leave as the canonical
//! `ShiitakeError` JSON with a fitting status ([`status_of`]); request bodies
//! are bounded by [`MAX_BODY_BYTES`]. `docs/http.md` documents every route.
//!
//! ```no_run
//! # async fn host(agent: std::sync::Arc<impl shiitake_protocol::AgentApi + 'static>) -> std::io::Result<()> {
//! use shiitake_server::{ServerConfig, Token, router};
//!
//! let token = Token::generate().map_err(std::io::Error::other)?;
//! let app = router(agent, ServerConfig::new(token));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! axum::serve(listener, app).await
//! # }
//! ```

mod auth;
mod directory;
mod error;
mod extract;
mod routes;
mod sse;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use shiitake_protocol::AgentApi;

pub use auth::{Token, TokenError, load_or_create_token, token_path};
pub use directory::{AgentDirectoryApi, directory_router};
pub use error::{HttpError, status_of};
pub use extract::MAX_BODY_BYTES;

/// How a server behaves besides the Agent it serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The bearer token every request must present.
    pub token: Token,
    /// How often an idle SSE stream sends a keep-alive comment, so proxies and
    /// clients can tell a quiet stream from a dead one.
    pub keep_alive: Duration,
}

impl ServerConfig {
    /// Defaults around `token`: keep-alive comments every 15 s.
    pub fn new(token: Token) -> Self {
        Self {
            token,
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// The routes of `docs/http.md` over `agent`, behind the bearer token of `config`.
pub fn router<A: AgentApi + 'static>(agent: Arc<A>, config: ServerConfig) -> Router {
    agent_routes(agent, config.keep_alive).layer(axum::middleware::from_fn_with_state(
        config.token,
        auth::require_token,
    ))
}

/// One Agent's routes without authentication, for [`router`] and [`directory_router`].
pub(crate) fn agent_routes<A: AgentApi + 'static>(agent: Arc<A>, keep_alive: Duration) -> Router {
    let shared = Arc::new(routes::Shared { agent, keep_alive });
    Router::new()
        .route(
            "/v1/sessions",
            post(routes::create_session::<A>).get(routes::list_sessions::<A>),
        )
        .route(
            "/v1/sessions/{session}",
            axum::routing::delete(routes::delete_session::<A>),
        )
        .route(
            "/v1/sessions/{session}/commands",
            post(routes::command::<A>),
        )
        .route(
            "/v1/sessions/{session}/snapshot",
            get(routes::snapshot::<A>),
        )
        .route("/v1/sessions/{session}/events", get(routes::events::<A>))
        .route("/v1/sessions/{session}/watch", get(routes::watch::<A>))
        .route(
            "/v1/sessions/{session}/model-preference",
            get(routes::model_preference::<A>).put(routes::set_model_preference::<A>),
        )
        .route(
            "/v1/sessions/{session}/extensions/{extension}/{command}",
            post(routes::session_extension::<A>),
        )
        .route("/v1/extensions", get(routes::list_extensions::<A>))
        .route("/v1/catalogs", get(routes::catalogs::<A>))
        .route(
            "/v1/extensions/{extension}/resume",
            post(routes::resume_extension::<A>),
        )
        .route(
            "/v1/extensions/{extension}/commands/{command}",
            post(routes::agent_extension::<A>),
        )
        .fallback(error::no_route)
        .with_state(shared)
}
