//! MCP servers over Streamable HTTP against real rmcp servers on 127.0.0.1: concurrent
//! connection under a timeout, the failures that drop a server (timeout, 401, redirect,
//! unusable list, repeated name), descriptors, calls and their results, schemas outside
//! the subset, `tools/list_changed`, cancellation and deadlines reaching the server,
//! and closing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::mcp;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::mcp::*;
use knapsack::Knapsack;
use knapsack::mcp::{McpError, McpHttp, McpServer, McpServersOptions, McpUnavailable};
use serde_json::{Value, json};
use shiitake_capabilities::{
    CapabilitySource, Catalog, ExecutionId, ForModelKind, InvocationContext, OperationPath, Replay,
    SourceId, ToolError,
};
use tokio_util::sync::CancellationToken;

pub(crate) const SECRET: &str = "s3cret-token-7f1c";

pub(crate) type Reports = Arc<Mutex<Vec<McpUnavailable>>>;

pub(crate) fn options(timeout: Duration) -> (McpServersOptions, Reports) {
    let reports: Reports = Arc::default();
    let sink = reports.clone();
    let mut options = McpServersOptions::new(McpHttp::new().unwrap());
    options.timeout = timeout;
    options.on_unavailable = Arc::new(move |report| sink.lock().unwrap().push(report));
    (options, reports)
}

pub(crate) fn server(name: &str, url: &str) -> McpServer {
    McpServer::new(name, url)
        .unwrap()
        .with_header("Authorization", &format!("Bearer {SECRET}"))
        .unwrap()
}

pub(crate) fn ctx() -> InvocationContext {
    InvocationContext::new(ExecutionId::generate(), CancellationToken::new())
}

pub(crate) fn path(text: &str) -> OperationPath {
    OperationPath::parse(text).unwrap()
}

/// A catalog over one good server `notes` (bearer required).
async fn notes_catalog(notes: Notes) -> (Catalog, mcp::Running, Reports) {
    let running = serve(notes, Some(SECRET)).await;
    let (options, reports) = options(Duration::from_secs(10));
    let source = Knapsack::mcp_servers(
        SourceId::new("mcp"),
        vec![server("notes", &running.url)],
        options,
    );
    let catalog = Catalog::new();
    let diff = catalog.add_source(Arc::new(source)).await.unwrap();
    assert_eq!(diff.problems, vec![]);
    assert_eq!(*reports.lock().unwrap(), vec![]);
    (catalog, running, reports)
}

pub(crate) fn good_tools() -> Vec<rmcp::model::Tool> {
    vec![create_note(), list_notes(), fail_note(), wait()]
}

#[tokio::test]
async fn servers_connect_concurrently_and_each_failure_drops_only_its_server() {
    let good = serve(Notes::new(good_tools()), Some(SECRET)).await;
    let slow = serve(Notes::hanging(), None).await;
    let wrong_credential = serve(Notes::new(good_tools()), Some("another-token")).await;
    let no_challenge = serve_with(Notes::new(good_tools()), Some("another-token"), false).await;
    // The redirect points at a server that counts requests: none may arrive.
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let target = listen(
        axum::Router::new().route(
            "/mcp",
            axum::routing::any(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { "never" }
            }),
        ),
        "/mcp",
    )
    .await;
    let redirect = redirecting(&target.url).await;
    let opaque = serve(Notes::new(vec![tag_note()]), None).await;
    let colliding = serve(
        Notes::new(vec![create_note(), {
            let mut twin = create_note();
            twin.name = "create_note".into();
            twin
        }]),
        None,
    )
    .await;

    let timeout = Duration::from_secs(2);
    let (options, reports) = options(timeout);
    let servers = vec![
        server("good", &good.url),
        server("slow", &slow.url),
        server("unauthorized", &wrong_credential.url),
        server("unauthorized_plain", &no_challenge.url),
        server("redirect", &redirect.url),
        server("opaque", &opaque.url),
        server("collide", &colliding.url),
        server("good", &opaque.url),
        server(
            "unreachable",
            &format!("http://127.0.0.1:{}/mcp", free_port()),
        ),
    ];
    let source = Knapsack::mcp_servers(SourceId::new("mcp"), servers, options);
    let catalog = Catalog::new();
    let started = Instant::now();
    let diff = catalog.add_source(Arc::new(source)).await.unwrap();
    let elapsed = started.elapsed();

    let modules: Vec<String> = catalog.list().iter().map(|m| m.path.to_string()).collect();
    assert_eq!(modules, ["env.mcp.good", "env.mcp.opaque"]);
    assert_eq!(diff.problems, vec![]);
    let mut reports = reports.lock().unwrap().clone();
    reports.sort_by(|a, b| a.name.cmp(&b.name));
    // Nothing listens there: a rejection whose message says what failed.
    let unreachable = reports.pop().unwrap();
    let McpError::Rejected { name, message } = &unreachable.error else {
        panic!("expected a rejection, got {unreachable:?}")
    };
    assert_eq!(name, "unreachable");
    assert!(message.contains("error sending request"), "{message}");
    assert!(!message.contains(SECRET), "{message}");
    assert_eq!(
        reports,
        vec![
            McpUnavailable {
                name: "collide".into(),
                error: McpError::Unusable {
                    name: "collide".into(),
                    tool: "create_note".into(),
                    reason: "`create-note` and `create_note` both map to `create_note`".into(),
                },
            },
            McpUnavailable {
                name: "good".into(),
                error: McpError::DuplicateName {
                    name: "good".into()
                },
            },
            McpUnavailable {
                name: "redirect".into(),
                error: McpError::Redirected {
                    name: "redirect".into(),
                    status: 307
                },
            },
            McpUnavailable {
                name: "slow".into(),
                error: McpError::TimedOut {
                    name: "slow".into(),
                    after: timeout
                },
            },
            McpUnavailable {
                name: "unauthorized".into(),
                error: McpError::Unauthorized {
                    name: "unauthorized".into(),
                    status: 401
                },
            },
            McpUnavailable {
                name: "unauthorized_plain".into(),
                error: McpError::Unauthorized {
                    name: "unauthorized_plain".into(),
                    status: 401
                },
            },
        ]
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect was followed");
    // Concurrent: one timeout for the whole list, not one per server.
    assert!(elapsed >= timeout, "{elapsed:?}");
    assert!(elapsed < timeout * 2, "{elapsed:?}");
}

#[tokio::test]
async fn at_most_concurrency_servers_connect_at_once() {
    // Five servers that never answer, sharing one record of when `initialize` arrived.
    let hanging = Notes::hanging();
    let mut running = Vec::new();
    for _ in 0..5 {
        running.push(serve(hanging.clone(), None).await);
    }
    let timeout = Duration::from_millis(400);
    let (mut options, reports) = options(timeout);
    options.concurrency = 2;
    let servers = running
        .iter()
        .enumerate()
        .map(|(i, r)| server(&format!("s{i}"), &r.url))
        .collect();
    let source = Knapsack::mcp_servers(SourceId::new("mcp"), servers, options);
    let started = Instant::now();
    let modules = source.acquire(&CancellationToken::new()).await.unwrap();
    let elapsed = started.elapsed();
    assert!(modules.is_empty());
    assert_eq!(reports.lock().unwrap().len(), 5);
    // Three waves (2 + 2 + 1), each one timeout long.
    assert!(elapsed >= timeout * 3, "{elapsed:?}");
    let starts = hanging.initialize_started();
    assert_eq!(starts.len(), 5);
    for wave in starts.windows(3) {
        // A third server starts only once one of the two before it timed out.
        let gap = wave[2] - wave[0];
        assert!(gap >= timeout - Duration::from_millis(50), "{gap:?}");
    }
}

#[tokio::test]
async fn tools_become_operations_with_mapped_names_replay_and_schemas() {
    let (catalog, _running, _) = notes_catalog(Notes::new(good_tools())).await;
    let module = &catalog.list()[0];
    let names: Vec<(String, Option<String>, Replay)> = module
        .operations
        .iter()
        .map(|op| (op.path.to_string(), op.foreign_name.clone(), op.replay))
        .collect();
    assert_eq!(
        names,
        vec![
            (
                "env.mcp.notes.create_note".into(),
                Some("create-note".into()),
                Replay::Unsafe
            ),
            (
                "env.mcp.notes.list_notes".into(),
                Some("listNotes".into()),
                Replay::Safe
            ),
            (
                "env.mcp.notes.fail_note".into(),
                Some("fail-note".into()),
                Replay::Unsafe
            ),
            (
                "env.mcp.notes.wait".into(),
                Some("wait".into()),
                Replay::Unsafe
            ),
        ]
    );
    let descriptor = catalog
        .describe(&path("env.mcp.notes.create_note"))
        .unwrap();
    assert_eq!(
        serde_json::to_value(&descriptor).unwrap(),
        json!({
            "path": "env.mcp.notes.create_note",
            "toolName": "env__mcp__notes__create_note",
            "foreignName": "create-note",
            "description": "Creates a note.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "title": { "type": "string", "minLength": 1 },
                    "body": { "type": "string" }
                },
                "required": ["title"]
            },
            "replay": "unsafe"
        })
    );
    assert_eq!(
        catalog.replay(&path("env.mcp.notes.list_notes")),
        Some(Replay::Safe)
    );
}

#[tokio::test]
async fn a_call_returns_structured_content_or_is_error_and_content() {
    let notes = Notes::new(good_tools());
    let (catalog, _running, _) = notes_catalog(notes.clone()).await;

    let created = catalog
        .execute(
            &path("env.mcp.notes.create_note"),
            json!({ "title": "groceries" }),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(created, json!({ "id": 1, "title": "groceries" }));

    let listed = catalog
        .execute(&path("env.mcp.notes.list_notes"), json!({}), &ctx())
        .await
        .unwrap();
    assert_eq!(
        listed,
        json!({ "isError": false, "content": [ { "type": "text", "text": "one note" } ] })
    );

    // A tool that reports failure is a `failed` tool error carrying `{ isError, content }`.
    let failed = catalog
        .execute(&path("env.mcp.notes.fail_note"), json!({}), &ctx())
        .await
        .unwrap_err();
    let ToolError::ForModel(failed) = failed else {
        panic!("expected a model error, got {failed:?}")
    };
    assert_eq!(failed.kind, ForModelKind::Failed);
    assert_eq!(
        failed.message,
        "MCP tool `fail-note` of server `notes` failed: the shelf is full"
    );
    assert_eq!(
        failed.details,
        Some(
            json!({ "isError": true, "content": [ { "type": "text", "text": "the shelf is full" } ] })
        )
    );

    // The subset schema is enforced before anything is sent.
    let invalid = catalog
        .execute(
            &path("env.mcp.notes.create_note"),
            json!({ "title": "" }),
            &ctx(),
        )
        .await
        .unwrap_err();
    let ToolError::ForModel(invalid) = invalid else {
        panic!("expected a model error, got {invalid:?}")
    };
    assert_eq!(invalid.kind, ForModelKind::InvalidInput);

    assert_eq!(
        notes.calls(),
        vec![
            ("create-note".to_owned(), json!({ "title": "groceries" })),
            ("listNotes".to_owned(), json!({})),
            ("fail-note".to_owned(), json!({})),
        ]
    );
}

#[tokio::test]
async fn a_schema_outside_the_subset_accepts_any_object_and_the_server_validates() {
    let notes = Notes::new(vec![tag_note()]);
    let (catalog, _running, _) = notes_catalog(notes.clone()).await;
    let tag = path("env.mcp.notes.tag_note");
    let descriptor = serde_json::to_value(catalog.describe(&tag).unwrap()).unwrap();
    assert_eq!(
        descriptor["opaqueInput"],
        json!({ "path": "/properties/id/oneOf", "reason": "keyword outside the subset" })
    );

    let tagged = catalog
        .execute(&tag, json!({ "id": 42 }), &ctx())
        .await
        .unwrap();
    assert_eq!(tagged, json!({ "tagged": 42 }));

    let refused = catalog
        .execute(&tag, json!({ "id": true }), &ctx())
        .await
        .unwrap_err();
    let ToolError::ForModel(refused) = refused else {
        panic!("expected a model error, got {refused:?}")
    };
    assert_eq!(refused.kind, ForModelKind::Failed);
    assert_eq!(
        refused.message,
        "MCP server `notes` refused `tag-note`: id must be a string or an integer"
    );
    assert_eq!(refused.details, Some(json!({ "code": -32602 })));
    // Not an object: refused by the door even for an opaque schema.
    let not_object = catalog.execute(&tag, json!([1]), &ctx()).await.unwrap_err();
    assert!(matches!(not_object, ToolError::ForModel(e) if e.kind == ForModelKind::InvalidInput));
    assert_eq!(
        notes.calls(),
        vec![
            ("tag-note".to_owned(), json!({ "id": 42 })),
            ("tag-note".to_owned(), json!({ "id": true })),
        ]
    );
}

#[tokio::test]
async fn tools_list_changed_refreshes_the_module() {
    let notes = Notes::new(vec![create_note()]);
    let (catalog, _running, _) = notes_catalog(notes.clone()).await;
    notes.set_tools(vec![create_note(), list_notes()]).await;
    tokio::time::timeout(Duration::from_secs(10), catalog.changed())
        .await
        .expect("the source was invalidated");
    let diff = catalog.refresh().await;
    assert_eq!(
        diff.changed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["env.mcp.notes"]
    );
    let tools: Vec<String> = catalog.tools().iter().map(|t| t.name.to_string()).collect();
    assert_eq!(
        tools,
        [
            "env__mcp__notes__create_note",
            "env__mcp__notes__list_notes"
        ]
    );
    let listed = catalog
        .execute(&path("env.mcp.notes.list_notes"), json!({}), &ctx())
        .await
        .unwrap();
    assert_eq!(listed["isError"], json!(false));
}

#[tokio::test]
async fn a_new_list_that_is_unusable_drops_the_server() {
    let notes = Notes::new(vec![create_note()]);
    let (catalog, _running, reports) = notes_catalog(notes.clone()).await;
    let mut bad = list_notes();
    bad.input_schema = schema(json!({ "type": "array" }));
    notes.set_tools(vec![bad]).await;
    tokio::time::timeout(Duration::from_secs(10), catalog.changed())
        .await
        .expect("the source was invalidated");
    let diff = catalog.refresh().await;
    assert_eq!(
        diff.removed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["env.mcp.notes"]
    );
    let reports = reports.lock().unwrap().clone();
    assert_eq!(
        reports,
        vec![McpUnavailable {
            name: "notes".into(),
            error: McpError::Unusable {
                name: "notes".into(),
                tool: "listNotes".into(),
                reason: "the input schema does not describe an object".into()
            }
        }]
    );
}

#[tokio::test]
async fn cancelling_the_run_reaches_the_server() {
    let notes = Notes::new(good_tools());
    let (catalog, _running, _) = notes_catalog(notes.clone()).await;
    let token = CancellationToken::new();
    let context = InvocationContext::new(ExecutionId::generate(), token.clone());
    let waiting = notes.waiting();
    let wait = path("env.mcp.notes.wait");
    let call = catalog.execute(&wait, json!({}), &context);
    let cancel = async {
        waiting.await;
        token.cancel();
    };
    let (result, ()) = tokio::join!(call, cancel);
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    wait_until(|| notes.cancelled() == 1).await;
}

#[tokio::test]
async fn a_passed_deadline_ends_the_call_and_reaches_the_server() {
    let notes = Notes::new(good_tools());
    let (catalog, _running, _) = notes_catalog(notes.clone()).await;
    let context = ctx().with_timeout(Duration::from_millis(300));
    let result = catalog
        .execute(&path("env.mcp.notes.wait"), json!({}), &context)
        .await;
    assert!(
        matches!(&result, Err(e) if e.is_deadline_exceeded()),
        "{result:?}"
    );
    wait_until(|| notes.cancelled() == 1).await;
}

#[tokio::test]
async fn a_server_that_goes_away_makes_calls_unavailable() {
    let notes = Notes::new(good_tools());
    let (catalog, running, _) = notes_catalog(notes.clone()).await;
    drop(running);
    let result = catalog
        .execute(
            &path("env.mcp.notes.create_note"),
            json!({ "title": "late" }),
            &ctx().with_timeout(Duration::from_secs(10)),
        )
        .await
        .unwrap_err();
    let ToolError::ForModel(error) = result else {
        panic!("expected a model error, got {result:?}")
    };
    assert_eq!(error.kind, ForModelKind::Unavailable, "{error:?}");
    assert!(!error.message.contains(SECRET));
}

#[tokio::test]
async fn cancelling_acquisition_gives_up() {
    let slow = serve(Notes::hanging(), None).await;
    let (options, reports) = options(Duration::from_secs(60));
    let source = Knapsack::mcp_servers(
        SourceId::new("mcp"),
        vec![server("slow", &slow.url)],
        options,
    );
    let token = CancellationToken::new();
    let stop = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.cancel();
    });
    let started = Instant::now();
    let result = source.acquire(&token).await;
    assert_eq!(result.unwrap_err(), McpError::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(*reports.lock().unwrap(), vec![]);
}

#[tokio::test]
async fn closing_the_source_ends_its_connections() {
    let notes = Notes::new(good_tools());
    let running = serve(notes.clone(), Some(SECRET)).await;
    let (options, _) = options(Duration::from_secs(10));
    let source = Arc::new(Knapsack::mcp_servers(
        SourceId::new("mcp"),
        vec![server("notes", &running.url)],
        options,
    ));
    let modules = source.modules().await.unwrap();
    assert_eq!(source.connected().await, ["notes"]);
    let create = modules[0].operations()[0].clone();
    source.close().await;
    assert_eq!(source.connected().await, Vec::<String>::new());
    assert!(matches!(
        source.modules().await,
        Err(shiitake_capabilities::SourceError::Closed)
    ));
    // An operation someone still holds can no longer reach the server.
    let result = create
        .handler()
        .call(json!({ "title": "x" }), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&result, ToolError::ForModel(e) if e.kind == ForModelKind::Unavailable),
        "{result:?}"
    );
    assert_eq!(notes.calls(), Vec::<(String, Value)>::new());
}

/// A port nothing listens on (it was free a moment ago).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) async fn wait_until(mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "the condition never held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
