//! `shiitake serve --mcp`: a real rmcp server on 127.0.0.1 becomes `env.mcp.notes` for
//! the Local host's runs, its bearer token taken from the environment; a server that
//! refuses the credential is reported and left out; and the token appears nowhere in
//! what `serve` and `chat` print, with logs at trace level.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use support::{binary, free_port, script, wait_with_timeout};

const TOKEN: &str = "cli-token-5e0b-d2a4";

/// One tool, `create-note {title}`, answering structured content.
#[derive(Clone)]
struct Notes;

impl ServerHandler for Notes {
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
            "properties": { "title": { "type": "string" } },
            "required": ["title"]
        }) else {
            unreachable!()
        };
        let schema: JsonObject = schema;
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "create-note",
            "Creates a note.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let title = request
            .arguments
            .and_then(|a| a.get("title").cloned())
            .unwrap_or(Value::Null);
        Ok(CallToolResult::structured(json!({ "id": 1, "title": title })).into())
    }
}

/// Serves `Notes` at `/mcp` requiring `Bearer <token>`, on a thread of its own.
fn start_server(token: &'static str) -> (String, tokio::sync::oneshot::Sender<()>) {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let service: StreamableHttpService<Notes, LocalSessionManager> =
                StreamableHttpService::new(
                    || Ok(Notes),
                    Default::default(),
                    StreamableHttpServerConfig::default(),
                );
            let expected = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
            let router =
                axum::Router::new()
                    .nest_service("/mcp", service)
                    .layer(axum::middleware::from_fn(
                        move |request: axum::extract::Request, next: axum::middleware::Next| {
                            let expected = expected.clone();
                            async move {
                                if request.headers().get(header::AUTHORIZATION) == Some(&expected) {
                                    next.run(request).await
                                } else {
                                    (StatusCode::UNAUTHORIZED, "no entry").into_response()
                                }
                            }
                        },
                    ));
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

#[test]
fn serve_mcp_makes_a_server_s_tools_available_to_runs() {
    let (notes_url, _stop_notes) = start_server(TOKEN);
    let (locked_url, _stop_locked) = start_server("some-other-token");
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [{"tool_call": {"name": "env__mcp__notes__create_note", "arguments": {"title": "groceries"}}}]},
            {"steps": [{"text": "Noted."}]}
        ]}),
    );
    let port = free_port();
    let mut serve = Command::new(binary())
        .args(["serve", "--port", &port.to_string(), "--model", &model])
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--workspace")
        .arg(dir.path())
        .arg("--mcp")
        .arg(format!(
            "notes={notes_url},header=Authorization:Bearer ${{NOTES_TOKEN}}"
        ))
        .arg("--mcp")
        .arg(format!(
            "locked={locked_url},header=Authorization:Bearer ${{NOTES_TOKEN}}"
        ))
        .env("NOTES_TOKEN", TOKEN)
        .env("SHIITAKE_LOG", "trace")
        .env_remove("SHIITAKE_MODEL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let printed = Arc::new(Mutex::new(String::new()));
    let (listening_tx, listening_rx) = std::sync::mpsc::channel();
    let stdout = serve.stdout.take().unwrap();
    let sink = printed.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(url) = line.strip_prefix("shiitake: listening on ") {
                let _ = listening_tx.send(url.to_owned());
            }
            sink.lock().unwrap().push_str(&line);
            sink.lock().unwrap().push('\n');
        }
    });
    let mut stderr = serve.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let url = listening_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("serve printed its address");

    let mut chat = Command::new(binary())
        .args(["chat", "--url", &url])
        .arg("--data-dir")
        .arg(&data_dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    chat.stdin
        .take()
        .unwrap()
        .write_all(b"write it down\n")
        .unwrap();
    let chat = wait_with_timeout(chat, Duration::from_secs(60));
    let chatted = String::from_utf8_lossy(&chat.stdout).into_owned();
    let _ = serve.kill();
    let _ = serve.wait();
    reader.join().unwrap();
    let logs = logs.join().unwrap();
    let printed = printed.lock().unwrap().clone();

    assert!(
        chatted.lines().any(|line| line
            == r#"[tool result] env__mcp__notes__create_note: {"id":1,"title":"groceries"}"#),
        "{chatted}\n{logs}"
    );
    assert!(chatted.contains("[run completed]"), "{chatted}");
    assert!(
        printed.contains(r#"shiitake: MCP servers connected: ["notes"]"#),
        "{printed}"
    );
    assert!(
        logs.contains(
            "shiitake: MCP server left out: MCP server `locked` refused its credential (HTTP 401)"
        ),
        "{logs}"
    );
    assert!(logs.contains("TRACE"), "trace logging was not on");
    for (what, text) in [
        ("serve stdout", &printed),
        ("serve stderr", &logs),
        ("chat", &chatted),
    ] {
        assert!(!text.contains(TOKEN), "the token appears in {what}");
    }
}
