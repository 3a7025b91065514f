//! MCP servers built with rmcp, served over Streamable HTTP on a thread of their own,
//! for the tests that give `serve` an MCP server: one tool, one that never answers
//! `initialize`, a refusal that repeats the credential, a redirect.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, InitializeRequestParams,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

/// One tool that takes one required string argument and answers structured content.
#[derive(Clone)]
pub struct OneTool {
    /// The tool's name.
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// Its one argument.
    pub argument: &'static str,
    /// The structured answer to the argument's value (`null` when it is missing).
    pub answer: Arc<dyn Fn(&Value) -> Value + Send + Sync>,
}

impl ServerHandler for OneTool {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = json!({
            "type": "object",
            "properties": { self.argument: { "type": "string" } },
            "required": [self.argument]
        }) else {
            unreachable!()
        };
        let schema: JsonObject = schema;
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            self.name,
            self.description,
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let value = request
            .arguments
            .and_then(|arguments| arguments.get(self.argument).cloned())
            .unwrap_or(Value::Null);
        Ok(CallToolResult::structured((self.answer)(&value)).into())
    }
}

/// What a server answers a request without the expected `Authorization`.
#[derive(Clone, Copy)]
pub enum Refusal {
    /// `401` with the body `no entry`.
    Plain,
    /// `401` whose body repeats the `Authorization` it came with, as some real
    /// servers do.
    Echoing,
}

/// An MCP server that accepts connections and never answers `initialize`.
#[derive(Clone)]
pub struct Hanging;

impl ServerHandler for Hanging {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn initialize(
        &self,
        _request: InitializeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        std::future::pending().await
    }
}

/// Serves `tool` at `/mcp` (requiring `Bearer <token>` when a token is given) on a
/// thread of its own; returns its URL and the sender that stops it.
pub fn serve(
    tool: OneTool,
    token: Option<&'static str>,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    serve_handler(tool, token, Refusal::Plain)
}

/// [`serve`] for any rmcp handler, refusing a wrong credential as `refusal` says.
pub fn serve_handler<H: ServerHandler + Clone + Send + Sync + 'static>(
    handler: H,
    token: Option<&'static str>,
    refusal: Refusal,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let service = move || {
        let handler = handler.clone();
        StreamableHttpService::<H, LocalSessionManager>::new(
            move || Ok(handler.clone()),
            Default::default(),
            StreamableHttpServerConfig::default(),
        )
    };
    let expected = token.map(|token| HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
    listen(move || {
        axum::Router::new()
            .nest_service("/mcp", service())
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let expected = expected.clone();
                    async move {
                        let given = request.headers().get(header::AUTHORIZATION).cloned();
                        match &expected {
                            Some(expected) if given.as_ref() != Some(expected) => {
                                refuse(refusal, given.as_ref())
                            }
                            _ => next.run(request).await,
                        }
                    }
                },
            ))
    })
}

fn refuse(refusal: Refusal, given: Option<&HeaderValue>) -> axum::response::Response {
    match refusal {
        Refusal::Plain => (StatusCode::UNAUTHORIZED, "no entry").into_response(),
        Refusal::Echoing => {
            let given = given.and_then(|value| value.to_str().ok()).unwrap_or("");
            let body = json!({ "error": format!("credential refused: {given}") });
            (StatusCode::UNAUTHORIZED, body.to_string()).into_response()
        }
    }
}

/// Answers every request at `/mcp` with `307 Temporary Redirect` to `target`.
pub fn redirecting(target: String) -> (String, tokio::sync::oneshot::Sender<()>) {
    listen(move || {
        let target = target.clone();
        axum::Router::new().route(
            "/mcp",
            axum::routing::any(move || {
                let target = target.clone();
                async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, target)]) }
            }),
        )
    })
}

/// Serves the router `make` builds on a thread of its own at a free port; returns the
/// URL of its `/mcp` and the sender that stops it.
fn listen(
    make: impl FnOnce() -> axum::Router + Send + 'static,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let router = make();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/mcp", listener.local_addr().unwrap());
            ready_tx.send(url).unwrap();
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    (ready_rx.recv().unwrap(), stop)
}

/// The file-changing tool `mark {tag}` (not safe to repeat): appends the tag to `file`,
/// one synced line per execution, so a test counts executions on a disk of its own.
/// Served on a thread of its own, it outlives every `serve` it is given to.
pub fn serve_marks(file: std::path::PathBuf) -> (String, tokio::sync::oneshot::Sender<()>) {
    use std::io::Write;
    let file = std::sync::Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .unwrap(),
    );
    serve(
        OneTool {
            name: "mark",
            description: "Appends a tag to the marks file.",
            argument: "tag",
            answer: Arc::new(move |tag| {
                let tag = tag.as_str().unwrap_or_default().to_owned();
                let mut file = file.lock().unwrap();
                // One write a line, so lines of concurrent calls never interleave.
                file.write_all(format!("{tag}\n").as_bytes()).unwrap();
                file.sync_data().unwrap();
                json!({ "marked": tag })
            }),
        },
        None,
    )
}
