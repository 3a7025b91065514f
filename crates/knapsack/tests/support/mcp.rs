//! Real rmcp servers for the MCP tests, served by axum on 127.0.0.1.
//!
//! `Notes` is one configurable MCP server (a tool list it can change and announce,
//! tools that answer with structured content, plain content, a tool error, or that
//! wait until cancelled). `serve` nests it in axum behind an optional bearer check;
//! `redirecting` answers every request with a 307 to another URL.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// An object schema from JSON.
pub fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        other => panic!("not an object schema: {other}"),
    }
}

/// `create-note {title, body?}`: answers structured content; not read-only.
pub fn create_note() -> Tool {
    Tool::new(
        "create-note",
        "Creates a note.",
        schema(json!({
            "type": "object",
            "properties": {
                "title": { "type": "string", "minLength": 1 },
                "body": { "type": "string" }
            },
            "required": ["title"]
        })),
    )
}

/// `listNotes {}`: answers text content only; read-only.
pub fn list_notes() -> Tool {
    Tool::new(
        "listNotes",
        "Lists the notes.",
        schema(json!({ "type": "object" })),
    )
    .annotate(ToolAnnotations::new().read_only(true))
}

/// `fail-note {}`: always a tool error.
pub fn fail_note() -> Tool {
    Tool::new(
        "fail-note",
        "Always fails.",
        schema(json!({ "type": "object" })),
    )
}

/// `wait {}`: waits until the client cancels it.
pub fn wait() -> Tool {
    Tool::new(
        "wait",
        "Waits until cancelled.",
        schema(json!({ "type": "object" })),
    )
}

/// `tag-note {id: string | integer}`: its schema is outside the subset (`oneOf`); the
/// server itself refuses an `id` of another type.
pub fn tag_note() -> Tool {
    Tool::new(
        "tag-note",
        "Tags a note by id.",
        schema(json!({
            "type": "object",
            "properties": { "id": { "oneOf": [ { "type": "string" }, { "type": "integer" } ] } },
            "required": ["id"]
        })),
    )
}

/// One MCP server, cheap to clone (every clone shares its state).
#[derive(Clone, Default)]
pub struct Notes {
    tools: Arc<Mutex<Vec<Tool>>>,
    peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    cancelled: Arc<AtomicUsize>,
    waiting: Arc<tokio::sync::Notify>,
    hang_initialize: bool,
    initialize_started: Arc<Mutex<Vec<std::time::Instant>>>,
}

impl Notes {
    /// A server advertising `tools`.
    pub fn new(tools: Vec<Tool>) -> Self {
        Self {
            tools: Arc::new(Mutex::new(tools)),
            ..Self::default()
        }
    }

    /// A server that never answers `initialize`.
    pub fn hanging() -> Self {
        Self {
            hang_initialize: true,
            ..Self::new(vec![create_note()])
        }
    }

    /// Replaces the tool list and announces it to every connected client.
    pub async fn set_tools(&self, tools: Vec<Tool>) {
        *self.tools.lock().unwrap() = tools;
        let peers = self.peers.lock().unwrap().clone();
        for peer in peers {
            peer.notify_tool_list_changed().await.unwrap();
        }
    }

    /// Every call received: (tool name, arguments).
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }

    /// When each `initialize` arrived, in order.
    pub fn initialize_started(&self) -> Vec<std::time::Instant> {
        self.initialize_started.lock().unwrap().clone()
    }

    /// How many calls the client cancelled.
    pub fn cancelled(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Resolves once a `wait` call has started.
    pub fn waiting(&self) -> impl Future<Output = ()> + '_ {
        self.waiting.notified()
    }
}

impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("notes", "1.0.0"))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.initialize_started
            .lock()
            .unwrap()
            .push(std::time::Instant::now());
        if self.hang_initialize {
            std::future::pending::<()>().await;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.peers.lock().unwrap().push(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools.lock().unwrap().clone(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        self.calls
            .lock()
            .unwrap()
            .push((request.name.to_string(), arguments.clone()));
        let result = match request.name.as_ref() {
            "create-note" => CallToolResult::structured(json!({
                "id": 1,
                "title": arguments["title"],
            })),
            "listNotes" => CallToolResult::success(vec![ContentBlock::text("one note")]),
            "fail-note" => CallToolResult::error(vec![ContentBlock::text("the shelf is full")]),
            "wait" => {
                self.waiting.notify_one();
                context.ct.cancelled().await;
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                return Err(ErrorData::internal_error("cancelled", None));
            }
            "tag-note" => match &arguments["id"] {
                Value::String(_) | Value::Number(_) => {
                    CallToolResult::structured(json!({ "tagged": arguments["id"] }))
                }
                _ => {
                    return Err(ErrorData::invalid_params(
                        "id must be a string or an integer",
                        None,
                    ));
                }
            },
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(result.into())
    }
}

/// A running HTTP server; dropping it stops it.
pub struct Running {
    /// The MCP endpoint.
    pub url: String,
    stop: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves `router` on 127.0.0.1 (a free port).
pub async fn listen(router: axum::Router, path: &str) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(stopped.cancelled_owned())
            .await
            .unwrap();
    });
    Running {
        url: format!("http://{address}{path}"),
        stop,
    }
}

/// The rmcp Streamable HTTP service of `notes`, as an axum router at `/mcp`.
pub fn mcp_router(notes: Notes) -> axum::Router {
    let service: StreamableHttpService<Notes, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(notes.clone()),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", service)
}

/// Serves `notes` at `/mcp`; with `bearer`, every request must carry
/// `Authorization: Bearer <bearer>` or gets a 401 with a challenge.
pub async fn serve(notes: Notes, bearer: Option<&str>) -> Running {
    serve_with(notes, bearer, true).await
}

/// [`serve`], choosing whether a 401 carries a `WWW-Authenticate` challenge.
pub async fn serve_with(notes: Notes, bearer: Option<&str>, challenge: bool) -> Running {
    let mut router = mcp_router(notes);
    if let Some(token) = bearer {
        let expected = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        router = router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let expected = expected.clone();
                async move {
                    if request.headers().get(header::AUTHORIZATION) == Some(&expected) {
                        next.run(request).await
                    } else if !challenge {
                        (StatusCode::UNAUTHORIZED, "no entry").into_response()
                    } else {
                        (
                            StatusCode::UNAUTHORIZED,
                            [(header::WWW_AUTHENTICATE, "Bearer realm=\"notes\"")],
                        )
                            .into_response()
                    }
                }
            },
        ));
    }
    listen(router, "/mcp").await
}

/// Serves `notes` at `/mcp` behind `Bearer <bearer>`; a request without it gets a 401
/// whose body repeats the `Authorization` it came with, as some real servers do.
pub async fn serve_echoing_refusals(notes: Notes, bearer: &str) -> Running {
    let expected = HeaderValue::from_str(&format!("Bearer {bearer}")).unwrap();
    let router = mcp_router(notes).layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let expected = expected.clone();
            async move {
                let given = request.headers().get(header::AUTHORIZATION).cloned();
                if given.as_ref() == Some(&expected) {
                    return next.run(request).await;
                }
                let given = given
                    .as_ref()
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                let body = json!({ "error": format!("credential refused: {given}") });
                (StatusCode::UNAUTHORIZED, body.to_string()).into_response()
            }
        },
    ));
    listen(router, "/mcp").await
}

/// Answers every request at `/mcp` with `307 Temporary Redirect` to `target`.
pub async fn redirecting(target: &str) -> Running {
    let target = target.to_owned();
    let router = axum::Router::new().route(
        "/mcp",
        axum::routing::any(move || {
            let target = target.clone();
            async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, target)]) }
        }),
    );
    listen(router, "/mcp").await
}
