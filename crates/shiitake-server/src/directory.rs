//! Serving a directory of Agents: every route of one Agent under an Agent segment,
//! `GET /v1/agents` listing them, and the routes without a segment serving the
//! default Agent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use shiitake_protocol::{AgentApi, AgentEntry, AgentList, AgentName, ShiitakeError};
use tower::ServiceExt;

use crate::error::HttpError;
use crate::{ServerConfig, limits};

/// A host's Agents by name, for [`directory_router`].
///
/// Agents may appear while serving (one Agent creates another); the router looks each
/// name up per request.
pub trait AgentDirectoryApi: Send + Sync + 'static {
    /// The Agent type served.
    type Agent: AgentApi + 'static;

    /// The Agent named `name`, if the host serves it.
    fn agent(&self, name: &AgentName) -> Option<Arc<Self::Agent>>;

    /// Every Agent's name, in the host's order.
    fn names(&self) -> Vec<AgentName>;

    /// The Agent the routes without an Agent segment serve.
    fn default_name(&self) -> AgentName;
}

/// What the dispatcher shares: the directory and one router per Agent served so far.
struct Directory<D: AgentDirectoryApi> {
    directory: Arc<D>,
    keep_alive: Duration,
    subscribers: limits::Subscribers,
    routers: Mutex<HashMap<AgentName, Router>>,
}

impl<D: AgentDirectoryApi> Directory<D> {
    /// The routes of the Agent `name`, built once per Agent.
    fn router(&self, name: &AgentName) -> Option<Router> {
        let agent = self.directory.agent(name)?;
        let mut routers = self.routers.lock().unwrap_or_else(PoisonError::into_inner);
        Some(
            routers
                .entry(name.clone())
                .or_insert_with(|| {
                    crate::agent_routes(agent, self.keep_alive, self.subscribers.clone())
                })
                .clone(),
        )
    }
}

/// The routes of `docs/http.md` for every Agent of `directory`, behind the same gate,
/// limits and page as [`crate::router`]:
///
/// - `GET /v1/agents` lists the Agents ([`AgentList`]);
/// - `/v1/agents/{agent}/<route>` is `/v1/<route>` of that Agent (an unknown Agent is
///   `404 not_found`);
/// - `/v1/<route>` without an Agent segment serves the default Agent, so clients of a
///   single-Agent server (and the web page) keep working;
/// - the browser App bridge of `config`, if any, serves the default Agent.
pub fn directory_router<D: AgentDirectoryApi>(directory: Arc<D>, config: ServerConfig) -> Router {
    let browser = config.browser.clone().and_then(|bridge| {
        let agent = directory.agent(&directory.default_name())?;
        Some(crate::browser_routes(agent, bridge, config.keep_alive))
    });
    let shared = Arc::new(Directory {
        directory,
        keep_alive: config.keep_alive,
        subscribers: limits::Subscribers::new(config.max_subscribers),
        routers: Mutex::new(HashMap::new()),
    });
    let mut app = Router::new().fallback(dispatch::<D>).with_state(shared);
    if let Some(browser) = browser {
        app = app.merge(browser);
    }
    crate::guarded(app, config)
}

/// Where a request goes: the listing, or one Agent's routes with the path it has there.
enum Target {
    List,
    Agent(AgentName, String),
}

fn target(path: &str, default: AgentName) -> Result<Target, ShiitakeError> {
    if path == "/v1/agents" || path == "/v1/agents/" {
        return Ok(Target::List);
    }
    let Some(tail) = path.strip_prefix("/v1/agents/") else {
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
    let default = shared.directory.default_name();
    let target = match target(request.uri().path(), default.clone()) {
        Ok(target) => target,
        Err(error) => return HttpError(error).into_response(),
    };
    match target {
        Target::List if request.method() == Method::GET => {
            let agents = shared
                .directory
                .names()
                .into_iter()
                .map(|name| AgentEntry {
                    default: name == default,
                    name,
                })
                .collect();
            Json(AgentList { agents }).into_response()
        }
        Target::List => crate::error::no_route().await.into_response(),
        Target::Agent(name, path) => {
            let Some(router) = shared.router(&name) else {
                return HttpError(ShiitakeError::not_found(format!("no Agent named {name}")))
                    .into_response();
            };
            let (mut parts, body) = request.into_parts();
            let path_and_query = match parts.uri.query() {
                Some(query) => format!("{path}?{query}"),
                None => path,
            };
            parts.uri = match Uri::builder().path_and_query(path_and_query).build() {
                Ok(uri) => uri,
                Err(error) => {
                    return HttpError(ShiitakeError::invalid(format!("bad path: {error}")))
                        .into_response();
                }
            };
            let request = Request::from_parts(parts, Body::new(body));
            match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
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
        match target(path, name("main")).ok()? {
            Target::List => None,
            Target::Agent(agent, rest) => Some((agent.to_string(), rest)),
        }
    }

    #[test]
    fn paths_map_to_an_agent_and_its_own_route() {
        assert!(matches!(
            target("/v1/agents", name("main")),
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
        assert!(target("/v1/agents/not%20a%20name/sessions", name("main")).is_err());
    }
}
