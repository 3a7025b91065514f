//! Serving a directory of Agents: every route of one Agent under an Agent segment,
//! `GET /v1/agents` listing them, and the routes without a segment serving the
//! caller's default Agent.
//!
//! Every request is a [`Caller`] (the gate decided it); the directory answers which
//! Agents that caller reaches. A tenant's request for another tenant's Agent finds
//! nothing (`not_found`, the same answer as for a name nobody uses), over every route:
//! the JSON routes, both SSE routes, extension commands and the browser bridge.

mod cache;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use knapsack::ui::UiBridge;
use shiitake_protocol::{AgentApi, AgentEntry, AgentList, AgentName, ShiitakeError};
use tower::ServiceExt;

use crate::caller::Caller;
use crate::error::HttpError;
use crate::{ServerConfig, limits};

use cache::{MAX_CACHED_ROUTERS, RouterCache};

/// A host's Agents by name, for [`directory_router`], as each caller may reach them.
///
/// Agents may appear while serving (one Agent creates another), and a host may open
/// an Agent on first use and close it when idle: the router asks per request and
/// serves the Agent it is handed, never one it kept from before.
#[async_trait]
pub trait AgentDirectoryApi: Send + Sync + 'static {
    /// The Agent type served.
    type Agent: AgentApi + 'static;

    /// The Agent named `name` if `caller` may reach it: `not_found` for a name the host
    /// does not serve and, the same, for an Agent of another tenant; `unavailable` when
    /// it cannot be opened now.
    async fn agent(
        &self,
        name: &AgentName,
        caller: &Caller,
    ) -> Result<Arc<Self::Agent>, ShiitakeError>;

    /// The names of the Agents `caller` reaches, in the host's order.
    async fn names(&self, caller: &Caller) -> Result<Vec<AgentName>, ShiitakeError>;

    /// The Agent `caller`'s routes without an Agent segment serve (a tenant's first
    /// Agent); `None` makes those routes `not_found`.
    fn default_name(&self, caller: &Caller) -> Option<AgentName>;
}

/// What the dispatcher shares: the directory and the routers of the Agents it served.
struct Directory<D: AgentDirectoryApi> {
    directory: Arc<D>,
    keep_alive: Duration,
    subscribers: limits::Subscribers,
    routers: Mutex<RouterCache<D::Agent>>,
    /// The browser App bridge, for the operator's default Agent (named here).
    browser: Option<(UiBridge, AgentName)>,
    browser_routers: Mutex<RouterCache<D::Agent>>,
}

impl<D: AgentDirectoryApi> Directory<D> {
    /// The routes of `agent`, built once per Agent handed out.
    fn router(&self, name: &AgentName, agent: Arc<D::Agent>) -> Router {
        let mut routers = self.routers.lock().unwrap_or_else(PoisonError::into_inner);
        routers.get_or_build(name, agent, |agent| {
            crate::agent_routes(agent, Some(name), self.keep_alive, self.subscribers.clone())
        })
    }

    /// The bridge's routes over `agent`, built once per Agent handed out.
    fn browser_router(&self, bridge: &UiBridge, name: &AgentName, agent: Arc<D::Agent>) -> Router {
        let mut routers = self
            .browser_routers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        routers.get_or_build(name, agent, |agent| {
            crate::browser_routes(agent, bridge.clone(), self.keep_alive)
                .fallback(crate::error::no_route)
        })
    }
}

/// The routes of `docs/http.md` for every Agent of `directory`, behind the same gate,
/// limits and page as [`crate::router`]:
///
/// - `GET /v1/agents` lists the caller's Agents ([`AgentList`]);
/// - `/v1/agents/{agent}/<route>` is `/v1/<route>` of that Agent (an unknown Agent, or
///   another tenant's, is `404 not_found`);
/// - `/v1/<route>` without an Agent segment serves the caller's default Agent, so
///   clients of a single-Agent server (and the web page) keep working;
/// - the browser App bridge of `config`, if any, serves the operator's default Agent,
///   to the callers that reach it;
/// - the operator's routes of `config` (`/v1/hub/nodes`, `/v1/hub/tenants`).
pub fn directory_router<D: AgentDirectoryApi>(directory: Arc<D>, config: ServerConfig) -> Router {
    let browser = config.browser.clone().and_then(|bridge| {
        let name = directory.default_name(&Caller::Operator)?;
        Some((bridge, name))
    });
    let shared = Arc::new(Directory {
        directory,
        keep_alive: config.keep_alive,
        subscribers: limits::Subscribers::new(config.max_subscribers),
        routers: Mutex::new(RouterCache::new(MAX_CACHED_ROUTERS)),
        browser,
        browser_routers: Mutex::new(RouterCache::new(1)),
    });
    let app =
        crate::hub::routes(&config).merge(Router::new().fallback(dispatch::<D>).with_state(shared));
    crate::guarded(app, config)
}

/// Where a request goes: the listing, or one Agent's routes with the path it has there.
enum Target {
    List,
    Agent(AgentName, String),
}

/// Where `path` goes for a caller whose default Agent is `default`.
fn target(path: &str, default: Option<AgentName>) -> Result<Target, ShiitakeError> {
    if path == "/v1/agents" || path == "/v1/agents/" {
        return Ok(Target::List);
    }
    let Some(tail) = path.strip_prefix("/v1/agents/") else {
        let default =
            default.ok_or_else(|| ShiitakeError::not_found("no default Agent for this caller"))?;
        return Ok(Target::Agent(default, path.to_owned()));
    };
    let (segment, rest) = tail.split_once('/').unwrap_or((tail, ""));
    let name = AgentName::new(segment)
        .map_err(|_| ShiitakeError::not_found(format!("no Agent named {segment:?}")))?;
    Ok(Target::Agent(name, format!("/v1/{rest}")))
}

async fn dispatch<D: AgentDirectoryApi>(
    State(shared): State<Arc<Directory<D>>>,
    request: Request,
) -> Response {
    match route(&shared, request).await {
        Ok(response) => response,
        Err(error) => HttpError(error).into_response(),
    }
}

async fn route<D: AgentDirectoryApi>(
    shared: &Directory<D>,
    request: Request,
) -> Result<Response, ShiitakeError> {
    // The gate put the caller there; a request without one reaches nothing.
    let caller = request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| ShiitakeError::not_found("no such route; see docs/http.md"))?;
    if let Some((bridge, name)) = &shared.browser
        && request.uri().path().starts_with("/browser/")
    {
        let agent = shared.directory.agent(name, &caller).await?;
        let router = shared.browser_router(bridge, name, agent);
        return forward(router, request, None).await;
    }
    let default = shared.directory.default_name(&caller);
    match target(request.uri().path(), default.clone())? {
        Target::List if request.method() == Method::GET => {
            let agents = shared
                .directory
                .names(&caller)
                .await?
                .into_iter()
                .map(|name| AgentEntry {
                    default: Some(&name) == default.as_ref(),
                    name,
                })
                .collect();
            Ok(Json(AgentList { agents }).into_response())
        }
        Target::List => Ok(crate::error::no_route().await.into_response()),
        Target::Agent(name, path) => {
            let agent = shared.directory.agent(&name, &caller).await?;
            let router = shared.router(&name, agent);
            forward(router, request, Some(path)).await
        }
    }
}

/// Runs `request` through `router`, at `path` (with its query) when given.
async fn forward(
    router: Router,
    request: Request,
    path: Option<String>,
) -> Result<Response, ShiitakeError> {
    let (mut parts, body) = request.into_parts();
    // The path as the client sent it, for what must name it back (an A2A card's URL).
    if parts
        .extensions
        .get::<axum::extract::OriginalUri>()
        .is_none()
    {
        let original = axum::extract::OriginalUri(parts.uri.clone());
        parts.extensions.insert(original);
    }
    if let Some(path) = path {
        let path_and_query = match parts.uri.query() {
            Some(query) => format!("{path}?{query}"),
            None => path,
        };
        parts.uri = Uri::builder()
            .path_and_query(path_and_query)
            .build()
            .map_err(|error| ShiitakeError::invalid(format!("bad path: {error}")))?;
    }
    let request = Request::from_parts(parts, Body::new(body));
    match router.oneshot(request).await {
        Ok(response) => Ok(response),
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn name(value: &str) -> AgentName {
        AgentName::new(value).unwrap()
    }

    fn agent_of(path: &str) -> Option<(String, String)> {
        match target(path, Some(name("main"))).ok()? {
            Target::List => None,
            Target::Agent(agent, rest) => Some((agent.to_string(), rest)),
        }
    }

    #[test]
    fn paths_map_to_an_agent_and_its_own_route() {
        assert!(matches!(
            target("/v1/agents", Some(name("main"))),
            Ok(Target::List)
        ));
        assert_eq!(
            agent_of("/v1/agents/helper/sessions/ses_1/snapshot"),
            Some(("helper".into(), "/v1/sessions/ses_1/snapshot".into()))
        );
        assert_eq!(
            agent_of("/v1/sessions"),
            Some(("main".into(), "/v1/sessions".into()))
        );
        assert_eq!(
            agent_of("/v1/agents/helper"),
            Some(("helper".into(), "/v1/".into()))
        );
        assert!(target("/v1/agents/not%20a%20name/sessions", Some(name("main"))).is_err());
    }

    #[test]
    fn without_a_default_agent_only_named_routes_and_the_list_are_served() {
        let error = target("/v1/sessions", None).err().unwrap();
        assert_eq!(error.code, shiitake_protocol::ErrorCode::NotFound);
        assert!(matches!(target("/v1/agents", None), Ok(Target::List)));
        assert!(matches!(
            target("/v1/agents/acme/sessions", None),
            Ok(Target::Agent(..))
        ));
    }
}
