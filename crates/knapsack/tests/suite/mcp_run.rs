//! A scripted run calls an MCP server's tools end to end through the core Agent (a
//! tool that fails gives a tool result marked `isError`), and the secret header value
//! shows up nowhere the host can observe: snapshots, frames, the catalog, tool results,
//! unavailability reports, model requests, and every log line at trace level, written
//! through `Redactions` as a host's log is, although one server repeats the credential
//! in its 401 body and another redirects to a URL that holds it.
//!
//! The MCP servers run on their own thread and runtime with logging switched off
//! there: they are the remote party, which legitimately holds the credential. Every
//! log line of the host side (Knapsack, rmcp's client, reqwest, the Agent) is captured.
//!
//! The capture is the process's global subscriber, so in the crate's one test binary it
//! also holds the lines of tests running beside this one; the secret is this test's
//! own, so none of them can hold it. No other test of the binary may install a global
//! subscriber (this one's `try_init` would fail).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::mcp::*;
use futures::StreamExt;
use knapsack::Knapsack;
use knapsack::mcp::{McpHttp, McpServer, McpServersOptions, McpUnavailable, Redactions};
use serde_json::json;
use shiitake_capabilities::{Catalog, SourceId};
use shiitake_conformance::support::*;
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

const SECRET: &str = "zq-7c1f-credential-93ad";

/// Every log line of this process's host side, as written at trace level.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// The servers, on a thread of their own whose log lines go nowhere.
struct Servers {
    notes: Notes,
    good: String,
    wrong_credential: String,
    redirect: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Servers {
    fn start() -> Self {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let _quiet =
                tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let notes = Notes::new(vec![create_note(), list_notes(), tag_note(), fail_note()]);
                let good = serve(notes.clone(), Some(SECRET)).await;
                let wrong =
                    serve_echoing_refusals(Notes::new(vec![create_note()]), "a-different-one")
                        .await;
                let redirect =
                    redirecting(&format!("{}?credential=Bearer%20{SECRET}", good.url)).await;
                ready_tx
                    .send((
                        notes,
                        good.url.clone(),
                        wrong.url.clone(),
                        redirect.url.clone(),
                    ))
                    .unwrap();
                let _ = stopped.await;
                drop((good, wrong, redirect));
            });
        });
        let (notes, good, wrong_credential, redirect) = ready_rx.recv().unwrap();
        Self {
            notes,
            good,
            wrong_credential,
            redirect,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn server(name: &str, url: &str) -> McpServer {
    McpServer::new(name, url)
        .unwrap()
        .with_header("Authorization", &format!("Bearer {SECRET}"))
        .unwrap()
}

fn config(model: Arc<ScriptedModel>) -> AgentConfig {
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 3,
        initial_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
    };
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_run_calls_mcp_tools_and_the_secret_is_never_observed() {
    let logs = Captured::default();
    let writer = logs.clone();
    let redactions = Redactions::new();
    let scrubbing = redactions.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || scrubbing.writer(writer.clone()))
        .try_init()
        .unwrap();

    let servers = Servers::start();
    let reports: Arc<Mutex<Vec<McpUnavailable>>> = Arc::default();
    let sink = reports.clone();
    let mut options = McpServersOptions::new(McpHttp::new().unwrap());
    options.on_unavailable = Arc::new(move |report| {
        // The host logs what it is told, as a host would.
        tracing::error!(?report, %report.error, "MCP server unavailable");
        sink.lock().unwrap().push(report);
    });
    let configured = vec![
        server("notes", &servers.good),
        server("locked", &servers.wrong_credential),
        server("moved", &servers.redirect),
    ];
    for server in &configured {
        redactions.add(server.headers());
    }
    let source = Knapsack::mcp_servers(SourceId::new("mcp"), configured, options);
    let catalog = Arc::new(Catalog::new());
    let diff = catalog.add_source(Arc::new(source)).await.unwrap();
    assert_eq!(
        diff.added
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["env.mcp.notes"]
    );

    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call(
            "env__mcp__notes__create_note",
            json!({ "title": "groceries" }),
        ),
        Turn::tool_call("env__mcp__notes__list_notes", json!({})),
        Turn::tool_call("env__mcp__notes__tag_note", json!({ "id": true })),
        Turn::tool_call("env__mcp__notes__fail_note", json!({})),
        Turn::text("noted"),
    ])));
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let agent = Agent::open(Arc::new(store), catalog.clone(), config(model.clone()))
        .await
        .unwrap();
    let session = new_session(&agent).await;

    // Every frame from before the prompt until the run settles.
    let watch = session.watch(ReadOptions::default()).await.unwrap();
    let first_snapshot = watch.snapshot.clone();
    let collector = tokio::spawn(async move {
        let mut frames = Vec::new();
        let mut changes = watch.changes;
        while let Some(frame) = changes.next().await {
            let frame = frame.unwrap();
            let settled =
                matches!(&frame, SessionFrame::Update(update) if !update.terminals.is_empty());
            frames.push(frame);
            if settled {
                break;
            }
        }
        frames
    });

    let command = send(&session, "write it down").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Completed);
    let frames = tokio::time::timeout(Duration::from_secs(20), collector)
        .await
        .unwrap()
        .unwrap();

    let messages = transcript(&session).await;
    assert_eq!(
        outline(&messages),
        vec![
            "user: write it down".to_owned(),
            "assistant: -> env__mcp__notes__create_note".to_owned(),
            r#"tool env__mcp__notes__create_note: {"id":1,"title":"groceries"}"#.to_owned(),
            "assistant: -> env__mcp__notes__list_notes".to_owned(),
            r#"tool env__mcp__notes__list_notes: {"isError":false,"content":[{"type":"text","text":"one note"}]}"#.to_owned(),
            "assistant: -> env__mcp__notes__tag_note".to_owned(),
            "tool env__mcp__notes__tag_note (error): MCP server `notes` refused `tag-note`: id must be a string or an integer".to_owned(),
            "assistant: -> env__mcp__notes__fail_note".to_owned(),
            "tool env__mcp__notes__fail_note (error): MCP tool `fail-note` of server `notes` failed: the shelf is full".to_owned(),
            "assistant: noted".to_owned(),
        ]
    );
    // The failed tool's message carries the flag and, in its details, the MCP result.
    let failed = messages
        .iter()
        .find_map(|message| match message {
            Message::ToolResult(result) if result.tool_name == "env__mcp__notes__fail_note" => {
                Some(result)
            }
            _ => None,
        })
        .unwrap();
    assert!(failed.is_error);
    assert_eq!(
        failed
            .details
            .as_ref()
            .map(|details| details["details"].clone()),
        Some(
            json!({ "isError": true, "content": [ { "type": "text", "text": "the shelf is full" } ] })
        )
    );
    assert_eq!(
        servers.notes.calls(),
        vec![
            ("create-note".to_owned(), json!({ "title": "groceries" })),
            ("listNotes".to_owned(), json!({})),
            ("tag-note".to_owned(), json!({ "id": true })),
            ("fail-note".to_owned(), json!({})),
        ]
    );
    let mut names: Vec<String> = reports
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["locked", "moved"]);

    // Everything observed, as text.
    let last_snapshot = session.read(ReadOptions::default()).await.unwrap();
    let requests = model.requests();
    let listed = serde_json::to_string(&catalog.list()).unwrap();
    let tools = serde_json::to_string(&catalog.tools()).unwrap();
    let catalog_debug = format!("{catalog:?}");
    agent.close().await.unwrap();
    catalog.close().await;
    drop(servers);
    let mut observed: Vec<(&str, String)> = vec![
        (
            "first snapshot",
            serde_json::to_string(&first_snapshot).unwrap(),
        ),
        (
            "last snapshot",
            serde_json::to_string(&last_snapshot).unwrap(),
        ),
        ("frames", serde_json::to_string(&frames).unwrap()),
        ("frames (debug)", format!("{frames:?}")),
        ("transcript", serde_json::to_string(&messages).unwrap()),
        ("terminal", format!("{terminal:?}")),
        ("model requests", format!("{requests:?}")),
        ("reports", format!("{:?}", reports.lock().unwrap())),
        (
            "reports (display)",
            reports
                .lock()
                .unwrap()
                .iter()
                .map(|r| r.error.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        ("catalog diff", format!("{diff:?}")),
        ("catalog list", listed),
        ("catalog tools", tools),
        ("catalog (debug)", catalog_debug),
    ];
    let logs = logs.text();
    // The capture is not vacuous: it holds rmcp's trace lines and the failures.
    assert!(logs.contains("TRACE"), "no trace lines were captured");
    assert!(logs.contains("refused its credential"), "{logs}");
    assert!(logs.contains("redirect"), "{logs}");
    assert!(logs.contains("env.mcp.notes"), "{logs}");
    if let Ok(path) = std::env::var("MCP_RUN_DUMP_LOGS") {
        std::fs::write(path, &logs).unwrap();
    }
    observed.push(("logs", logs));
    for (what, text) in &observed {
        assert!(!text.is_empty(), "{what} is empty");
        assert!(
            !text.contains(SECRET),
            "the secret header value appears in {what}"
        );
    }
}
