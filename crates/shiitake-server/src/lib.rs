//! The HTTP and Server-Sent Events surface of a Shiitake Agent.
//!
//! [`router`] turns any [`AgentApi`] into an axum [`Router`]: one JSON route per
//! Agent and Session operation, and two SSE routes (`events` for
//! `subscribe`, `watch` for a snapshot followed by its changes). The server
//! holds no Session state of its own: every request goes to the Agent, which
//! is the one source of truth, so the same router can sit in front of the
//! in-process core Agent or anything else that implements the traits.
//!
//! Every route requires a bearer token the server's [`Credentials`] know (one
//! [`Token`], the operator's, unless the host hands others), or, with
//! [`ServerConfig::with_web`], the web page's session cookie under a CSRF rule (the
//! page itself is public). Each request is then a [`Caller`]: the operator, or a
//! tenant of a Hub that reaches only its own Agents through [`directory_router`]
//! (`docs/security.md`, "Callers"). Failures leave as the canonical
//! `ShiitakeError` JSON with a fitting status ([`status_of`]); request bodies
//! are bounded by [`MAX_BODY_BYTES`]; request time and open event streams are
//! bounded per process ([`ServerConfig`]), and every request gets a request id
//! (`x-request-id`) and a tracing span. `docs/http.md` documents every route.
//! [`serve`] runs the router on a listener with each connection bounded too (a
//! header-read timeout, a connection cap that fits the open-file limit:
//! [`ConnectionLimits`]); `axum::serve` bounds neither.
//!
//! ```no_run
//! # async fn host(agent: std::sync::Arc<impl shiitake_protocol::AgentApi + 'static>) -> std::io::Result<()> {
//! use shiitake_server::{ConnectionLimits, ServerConfig, Token, router, serve};
//!
//! let token = Token::generate().map_err(std::io::Error::other)?;
//! let app = router(agent, ServerConfig::new(token));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! serve(listener, app, ConnectionLimits::default().within_file_limit()).await
//! # }
//! ```

mod auth;
mod browser;
mod caller;
mod connections;
mod directory;
mod error;
mod extract;
mod hub;
mod limits;
mod routes;
mod sse;
pub mod telemetry;
mod web;
mod web_auth;
mod web_login;
mod web_logins;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::middleware::from_fn;
use axum::routing::{get, post};
use knapsack::ui::UiBridge;
use shiitake_protocol::AgentApi;
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

pub use auth::{Token, TokenError, load_or_create_token, token_path};
pub use caller::{Caller, Credentials};
pub use connections::{
    ConnectionLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, RESERVED_DESCRIPTORS, serve,
};
pub use directory::{AgentDirectoryApi, directory_router};
pub use error::{HttpError, status_of};
pub use extract::MAX_BODY_BYTES;
pub use hub::{HubNodes, HubTenants};
pub use telemetry::MetricsText;
pub use web_auth::{COOKIE_PREFIX, CSRF_HEADER};
pub use web_login::{
    DEFAULT_CODE_TTL, DEFAULT_MAX_CODES, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_TTL, WebLogin,
    WebLoginLimits,
};
pub use web_logins::{LoginSecret, MAX_LOGIN_SECRET_BYTES, WebLogins, login_path};

/// How a server behaves besides the Agent it serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// What the bearer token of every request is checked against, and who it is.
    pub credentials: Arc<dyn Credentials>,
    /// How often an idle SSE stream sends a keep-alive comment, so proxies and
    /// clients can tell a quiet stream from a dead one.
    pub keep_alive: Duration,
    /// The browser App bridge whose routes (`/browser/...`) the server mounts,
    /// behind the same token; `None` mounts none.
    pub browser: Option<UiBridge>,
    /// The web page (`/`, `docs/web.md`) and the logins its cookie comes from;
    /// `None` serves no page and accepts no cookie.
    pub web: Option<Arc<dyn WebLogins>>,
    /// Longest time until a response head; a slower request is answered `unavailable`.
    pub request_timeout: Duration,
    /// Most `events` and `watch` streams open at once in this process; one more is `unavailable`.
    pub max_subscribers: usize,
    /// The processes of the Hub this Agent is served by, for `GET /v1/hub/nodes`
    /// (the bearer token only); `None` mounts no such route.
    pub hub_nodes: Option<Arc<dyn HubNodes>>,
    /// The tenants of the Hub and their tokens, for `/v1/hub/tenants` (the bearer
    /// token of the operator only); `None` mounts no such routes.
    pub hub_tenants: Option<Arc<dyn HubTenants>>,
    /// The host's metrics exporter, scraped at `GET /metrics` (the bearer token
    /// only, `docs/operations.md`); `None` mounts no such route.
    pub metrics: Option<Arc<dyn MetricsText>>,
}

impl ServerConfig {
    /// Defaults around `token`, the operator's and the only credential: keep-alive
    /// comments every 15 s, 30 s per request, 256 open event streams.
    pub fn new(token: Token) -> Self {
        Self {
            credentials: Arc::new(token),
            keep_alive: Duration::from_secs(15),
            browser: None,
            web: None,
            request_timeout: Duration::from_secs(30),
            max_subscribers: 256,
            hub_nodes: None,
            hub_tenants: None,
            metrics: None,
        }
    }

    /// Checks bearer tokens with `credentials` instead of the one token: a Hub knows
    /// its tenants' tokens, each standing for its [`Caller`].
    #[must_use]
    pub fn with_credentials(mut self, credentials: Arc<dyn Credentials>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Serves `/v1/hub/tenants` from `tenants` (`docs/http.md`, "The Hub's tenants").
    #[must_use]
    pub fn with_hub_tenants(mut self, tenants: Arc<dyn HubTenants>) -> Self {
        self.hub_tenants = Some(tenants);
        self
    }

    /// Serves `GET /metrics` from `exporter` (`docs/operations.md`).
    #[must_use]
    pub fn with_metrics(mut self, exporter: Arc<dyn MetricsText>) -> Self {
        self.metrics = Some(exporter);
        self
    }

    /// Serves `GET /v1/hub/nodes` from `nodes` (`docs/hub.md`, "The operator's view").
    #[must_use]
    pub fn with_hub_nodes(mut self, nodes: Arc<dyn HubNodes>) -> Self {
        self.hub_nodes = Some(nodes);
        self
    }

    /// Mounts `bridge`'s routes too (`docs/http.md`, "Browser App bridge").
    #[must_use]
    pub fn with_browser(mut self, bridge: UiBridge) -> Self {
        self.browser = Some(bridge);
        self
    }

    /// Serves the web page at `/` and accepts the session cookie its login links
    /// set (`docs/web.md`); mint the first link with [`WebLogin::login_url`].
    #[must_use]
    pub fn with_web(self, login: WebLogin) -> Self {
        self.with_web_logins(Arc::new(login))
    }

    /// [`Self::with_web`] with logins the host keeps elsewhere (a Hub: in its
    /// database, so a link or a cookie works on every process and after a restart).
    #[must_use]
    pub fn with_web_logins(mut self, logins: Arc<dyn WebLogins>) -> Self {
        self.web = Some(logins);
        self
    }
}

/// The routes of `docs/http.md` over `agent`, behind the credentials of `config`
/// (or the web page's cookie), plus the public page when `config.web` is set.
///
/// The one Agent is the operator's: a tenant caller (of credentials that know
/// tenants) finds no route here, only through [`directory_router`].
pub fn router<A: AgentApi + 'static>(agent: Arc<A>, config: ServerConfig) -> Router
where
    A::Session: Send + Sync + 'static,
{
    let subscribers = limits::Subscribers::new(config.max_subscribers);
    let mut app = agent_routes(agent.clone(), None, config.keep_alive, subscribers);
    if let Some(bridge) = config.browser.clone() {
        app = app.merge(browser_routes(agent, bridge, config.keep_alive));
    }
    let app = app
        .layer(from_fn(caller::operator_only))
        .merge(hub::routes(&config));
    guarded(app, config)
}

/// One Agent's `/v1` routes without authentication, for [`router`] and
/// [`directory_router`]; `subscribers` bounds the event streams of every Agent served.
/// `name` is the Agent's directory name (its A2A card's), if it has one.
pub(crate) fn agent_routes<A: AgentApi + 'static>(
    agent: Arc<A>,
    name: Option<&shiitake_protocol::AgentName>,
    keep_alive: Duration,
    subscribers: limits::Subscribers,
) -> Router
where
    A::Session: Send + Sync + 'static,
{
    let interop = interop_routes(agent.clone(), name, keep_alive, subscribers.clone());
    let shared = Arc::new(routes::Shared {
        agent,
        keep_alive,
        subscribers,
    });
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
        .route("/v1/tools", get(routes::tools::<A>))
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
        .merge(interop)
}

/// The Agent's endpoints for other agents and hosts (`docs/interop.md`): MCP at
/// `/v1/mcp` (and `/mcp`), A2A at `/v1/a2a` with its card.
fn interop_routes<A: AgentApi + 'static>(
    agent: Arc<A>,
    name: Option<&shiitake_protocol::AgentName>,
    keep_alive: Duration,
    places: limits::Subscribers,
) -> Router
where
    A::Session: Send + Sync + 'static,
{
    let identity = shiitake_interop::a2a::AgentIdentity {
        name: name.map_or_else(|| "shiitake".to_owned(), ToString::to_string),
        description: "A Shiitake agent: give it work in words; it runs it with its tools \
            and answers, asking when it needs a person."
            .to_owned(),
    };
    shiitake_interop::mcp::router(agent.clone(), MAX_BODY_BYTES, places.clone()).merge(
        shiitake_interop::a2a::router(agent, identity, keep_alive, places),
    )
}

/// What every server shares around its routes, outermost last: the browser, login
/// and logout routes, the time bound, the gate (token or cookie), the public page, and
/// the request id with its span.
pub(crate) fn guarded(mut app: Router, config: ServerConfig) -> Router {
    if let Some(exporter) = config.metrics.clone() {
        app = app.merge(
            Router::new()
                .route("/metrics", get(telemetry::scrape))
                .route_layer(axum::middleware::from_fn_with_state(
                    "reads the metrics",
                    caller::operator_token,
                ))
                .with_state(exporter),
        );
    }
    if let Some(login) = &config.web {
        app = app.merge(
            Router::new()
                .route("/v1/web/login-links", post(web::mint_link))
                .route("/logout", post(web::logout))
                .with_state(login.clone()),
        );
    }
    let gate = auth::Gate {
        credentials: config.credentials,
        web: config.web.clone(),
    };
    let app = app
        .layer(axum::middleware::from_fn_with_state(
            config.request_timeout,
            limits::time_bound,
        ))
        .layer(axum::middleware::from_fn_with_state(
            gate,
            auth::require_token,
        ));
    let app = match config.web {
        // Merged after the layer: the page and the login route need no credential.
        Some(login) => app.merge(
            Router::new()
                .route("/", get(web::index))
                .route("/web/{file}", get(web::file))
                .route("/login", get(web::login))
                .with_state(login),
        ),
        None => app,
    };
    // Outermost first: the id is set, the span opened with it, and the id echoed.
    app.layer(
        tower::ServiceBuilder::new()
            .layer(SetRequestIdLayer::x_request_id(limits::NextRequestId::new()))
            .layer(TraceLayer::new_for_http().make_span_with(limits::request_span))
            .layer(PropagateRequestIdLayer::x_request_id()),
    )
}

/// The browser App bridge's routes (see [`browser`]).
pub(crate) fn browser_routes<A: AgentApi + 'static>(
    agent: Arc<A>,
    bridge: UiBridge,
    keep_alive: Duration,
) -> Router {
    let shared = Arc::new(browser::BrowserShared {
        agent,
        bridge,
        keep_alive,
    });
    Router::new()
        .route("/browser/knapsack-ui.js", get(browser::script))
        .route(
            "/browser/sessions/{session}/browser/events",
            get(browser::events::<A>),
        )
        .route(
            "/browser/sessions/{session}/browser/claims",
            post(browser::claims::<A>),
        )
        .route(
            "/browser/sessions/{session}/browser/results",
            post(browser::results::<A>),
        )
        .with_state(shared)
}
