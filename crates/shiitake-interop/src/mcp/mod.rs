//! An Agent as an MCP server over Streamable HTTP: tools to give it work, follow and
//! answer that work, read and list its Sessions, cancel and abort (`tools.rs`). Mounted
//! by `shiitake-server` at `/v1/agents/{agent}/mcp` behind the same bearer token as
//! every route, so a Hub's tenant reaches only its own Agents.
//!
//! Every call stands alone (no MCP session in memory): a modern client (2026-07-28)
//! gets a question or an approval as an elicitation inside an input-required result
//! whose answer comes back with the retried call; an older client reads what is
//! needed in the result and answers with the `answer` tool. `docs/interop.md` has the
//! mapping.

mod server;
mod state;
mod tools;

mod body;

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use shiitake_protocol::AgentApi;

pub use server::DelegateServer;
pub use tools::{DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS};

use crate::delegate::Delegate;

/// The MCP endpoint of `agent` at `/v1/mcp` and `/mcp`, bounding request bodies to
/// `max_body_bytes`; a body that is not JSON, or too long, is answered with a JSON-RPC
/// error (`-32700`, `-32600`). Each call holds one of `places` until its response
/// ends. The caller authenticates requests before they reach it.
pub fn router<A>(
    agent: Arc<A>,
    max_body_bytes: usize,
    places: crate::streams::StreamPlaces,
) -> axum::Router
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    let checked = body::Checked::new(service(agent, max_body_bytes), max_body_bytes, places);
    axum::Router::new()
        .route_service("/v1/mcp", checked.clone())
        .route_service("/mcp", checked)
}

/// The MCP endpoint of `agent` as rmcp's tower service, bounding request bodies to
/// `max_body_bytes`. The caller authenticates requests before they reach it.
pub fn service<A>(
    agent: Arc<A>,
    max_body_bytes: usize,
) -> StreamableHttpService<DelegateServer<A>, LocalSessionManager>
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    let server = DelegateServer::new(Delegate::new(agent));
    // Stateless: no MCP session outlives a request. Host checks are off: the bearer
    // token (never sent by a browser on its own) is what admits a request.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(false)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(max_body_bytes);
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
