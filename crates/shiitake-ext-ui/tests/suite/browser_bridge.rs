//! The browser App bridge end to end: a core Agent on SQLite with the `ui`
//! extension, the real server on 127.0.0.1 with the bridge's routes, and an App
//! page in headless Chromium that loads the served `connectBrowser` module.
//!
//! One browser, server and Agent serve every scenario, one after another, each on
//! its own Session and tabs (the scenarios name themselves in failures):
//! a scripted run that discovers and executes; busy; not connected; a disconnect
//! after a claim; two tabs where exactly one claims; close. Without Chromium the
//! test prints a note and passes (`cargo xtask test` provides one).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use knapsack::ui::{UiBridge, UiOptions};
use serde_json::{Value, json};
use shiitake_capabilities::{
    ExecutionId, ForModelKind, InvocationContext, Module, OperationName, OperationPath, ToolError,
    execute_operation,
};
use shiitake_chromium::{Chromium, Page, eval, screenshot, wait_for};
use shiitake_conformance::support::{new_session, outline, send, terminal_of, transcript};
use shiitake_core::Agent;
use shiitake_ext_testkit::{TestAgent, tool_names};
use shiitake_model::{ScriptedModel, Turn};
use shiitake_protocol::{AgentApi, SessionApi, SessionId, TerminalOutcome};
use shiitake_server::{ServerConfig, Token, router};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "browser-test-token-0123456789";
/// Generous: on a shared machine under load a new tab can take seconds to start.
const WAIT: Duration = Duration::from_secs(30);

/// The App: a list of notes and four commands, connected with the served module.
const APP: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Notes (ui bridge test)</title></head>
<body>
<h1>Notes</h1>
<ul id="notes"></ul>
<p id="status">connecting</p>
<script type="module">
import { connectBrowser } from "/browser/knapsack-ui.js";
const session = new URLSearchParams(location.search).get("session");
window.notes = [];
window.ran = 0;
window.hanging = false;
const commands = {
  add_note: {
    description: "Adds a note to the list on screen.",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    run: ({ text }) => {
      window.ran += 1;
      window.notes.push(text);
      const item = document.createElement("li");
      item.textContent = text;
      document.getElementById("notes").append(item);
      return { count: window.notes.length };
    },
  },
  slow: {
    description: "Answers after half a second.",
    run: () => new Promise((resolve) => setTimeout(() => { window.ran += 1; resolve({ slow: true }); }, 500)),
  },
  wait_forever: {
    description: "Never answers.",
    run: () => { window.ran += 1; window.hanging = true; return new Promise(() => {}); },
  },
  fail: {
    description: "Always throws.",
    run: () => { throw new Error("the App refused"); },
  },
};
window.bridge = connectBrowser({
  baseUrl: `/browser/sessions/${session}/browser`,
  commands,
  onStatus: (status) => { document.getElementById("status").textContent = status; },
});
</script>
</body></html>
"#;

struct World {
    chromium: Chromium,
    agent: Arc<Agent>,
    bridge: UiBridge,
    model: Arc<ScriptedModel>,
    url: String,
    artifacts: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl World {
    async fn session(&self) -> SessionId {
        new_session(&*self.agent).await.session_id().clone()
    }

    /// Opens the App for `session` in a new tab and waits until the host has it.
    async fn tab(&self, session: &SessionId) -> Page {
        let before = self.bridge.connections(session);
        let page = self
            .chromium
            .open(
                &format!("{}/app?session={session}", self.url),
                &[("Authorization", &format!("Bearer {TOKEN}"))],
            )
            .await
            .unwrap();
        wait_for(
            &page,
            "window.bridge && window.bridge.status === 'connected'",
            WAIT,
        )
        .await
        .unwrap();
        eventually(|| self.bridge.connections(session) == before + 1).await;
        page
    }
}

async fn eventually(mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition did not hold in time"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Calls `ui.<name>` of a lent module as the execute door would.
async fn call(module: &Module, name: &str, input: Value) -> Result<Value, ToolError> {
    let operation = module
        .operation(&OperationName::new(name).unwrap())
        .unwrap();
    let path = OperationPath::parse(&format!("ui.{name}")).unwrap();
    let ctx = InvocationContext::new(ExecutionId::generate(), CancellationToken::new())
        .with_timeout(WAIT);
    execute_operation(&path, operation, input, &ctx).await
}

fn code_of(result: &Result<Value, ToolError>) -> (ForModelKind, String) {
    match result {
        Err(ToolError::ForModel(error)) => (
            error.kind,
            error.details.as_ref().unwrap()["code"]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
        other => panic!("not a tool error for the model: {other:?}"),
    }
}

async fn start() -> Option<World> {
    let chromium = Chromium::launch_or_skip("browser_bridge").await.unwrap()?;
    let bridge = UiBridge::new(UiOptions::default());
    let mut kit = TestAgent::builder()
        .turns(vec![
            // The run scenario.
            Turn::tool_call("ui__discover", json!({})),
            Turn::tool_call(
                "ui__execute",
                json!({ "command": "add_note", "input": { "text": "milk" } }),
            ),
            Turn::text("added"),
            // The run after close.
            Turn::tool_call("ui__discover", json!({})),
            Turn::text("no browser"),
        ])
        .kit_extension(shiitake_ext_ui::extension(bridge.clone()).unwrap())
        .open()
        .await;
    let dir = kit.take_dir().unwrap();
    let (agent, model) = (kit.agent, kit.model);
    let agent = Arc::new(agent);
    let config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_browser(bridge.clone());
    let app = Router::new()
        .route("/app", get(|| async { Html(APP) }))
        .merge(router(agent.clone(), config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let artifacts = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser_bridge");
    Some(World {
        chromium,
        agent,
        bridge,
        model,
        url,
        artifacts,
        _dir: dir,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_bridge_in_headless_chromium() {
    let Some(world) = start().await else {
        return;
    };
    a_scripted_run_discovers_and_executes(&world).await;
    a_second_request_is_busy(&world).await;
    no_tab_is_not_connected(&world).await;
    a_tab_that_closes_after_claiming_leaves_the_outcome_unknown(&world).await;
    of_two_tabs_exactly_one_claims(&world).await;
    close_ends_every_stream_and_later_runs_go_without_ui(&world).await;
    world.agent.close().await.unwrap();
    world.chromium.close().await;
}

async fn a_scripted_run_discovers_and_executes(world: &World) {
    let session = world.session().await;
    let page = world.tab(&session).await;
    let local = world.agent.session(session.clone());
    let command = send(&local, "note milk").await;
    let terminal = terminal_of(&local, &command).await;
    assert_eq!(
        terminal.outcome,
        TerminalOutcome::Completed,
        "run: {terminal:?}"
    );
    let discovered = json!({ "commands": [
        { "name": "add_note", "description": "Adds a note to the list on screen.",
          "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] } },
        { "name": "slow", "description": "Answers after half a second." },
        { "name": "wait_forever", "description": "Never answers." },
        { "name": "fail", "description": "Always throws." }
    ] });
    assert_eq!(
        outline(&transcript(&local).await),
        vec![
            "user: note milk".to_owned(),
            "assistant: -> ui__discover".to_owned(),
            format!("tool ui__discover: {discovered}"),
            "assistant: -> ui__execute".to_owned(),
            r#"tool ui__execute: {"count":1}"#.to_owned(),
            "assistant: added".to_owned(),
        ],
        "run"
    );
    // The command ran in the page, once.
    let notes: Vec<String> = eval(&page, "window.notes").await.unwrap();
    assert_eq!(notes, ["milk"]);
    let shown: String = eval(&page, "document.getElementById('notes').textContent")
        .await
        .unwrap();
    assert_eq!(shown, "milk");
    // The tools the model was offered include the borrowed module.
    let offered = tool_names(&world.model, 0);
    assert!(offered.contains(&"ui__discover".to_owned()), "{offered:?}");
    assert!(offered.contains(&"ui__execute".to_owned()), "{offered:?}");
    screenshot(&page, &world.artifacts.join("executed.png"))
        .await
        .unwrap();
    // The run returned the module; closing the tab lets the host go.
    page.close().await.unwrap();
    eventually(|| world.bridge.connections(&session) == 0).await;
    eventually(|| world.bridge.hosts() == 0).await;
}

async fn a_second_request_is_busy(world: &World) {
    let session = world.session().await;
    let page = world.tab(&session).await;
    let first = world.bridge.lend(&session).unwrap();
    let second = world.bridge.lend(&session).unwrap();
    let slow =
        tokio::spawn(async move { call(&first, "execute", json!({ "command": "slow" })).await });
    wait_for(&page, "window.bridge.stats().claimed === 1", WAIT)
        .await
        .unwrap();
    let busy = call(
        &second,
        "execute",
        json!({ "command": "add_note", "input": { "text": "no" } }),
    )
    .await;
    assert_eq!(
        code_of(&busy),
        (ForModelKind::Unavailable, "browser_busy".to_owned()),
        "busy"
    );
    assert_eq!(
        slow.await.unwrap().unwrap(),
        json!({ "slow": true }),
        "busy"
    );
    // Once the first settled, the Session takes requests again.
    let after = call(
        &second,
        "execute",
        json!({ "command": "add_note", "input": { "text": "yes" } }),
    )
    .await;
    assert_eq!(after.unwrap(), json!({ "count": 1 }), "busy");
    let failed = call(&second, "execute", json!({ "command": "fail" })).await;
    assert_eq!(
        code_of(&failed),
        (ForModelKind::Failed, "browser_command_failed".to_owned())
    );
    let ran: u32 = eval(&page, "window.ran").await.unwrap();
    assert_eq!(ran, 2, "busy: the refused request never reached the page");
    page.close().await.unwrap();
}

async fn no_tab_is_not_connected(world: &World) {
    let session = world.session().await;
    let module = world.bridge.lend(&session).unwrap();
    let result = call(&module, "discover", json!({})).await;
    assert_eq!(
        code_of(&result),
        (
            ForModelKind::Unavailable,
            "browser_not_connected".to_owned()
        ),
        "not connected"
    );
}

async fn a_tab_that_closes_after_claiming_leaves_the_outcome_unknown(world: &World) {
    let session = world.session().await;
    let page = world.tab(&session).await;
    let module = world.bridge.lend(&session).unwrap();
    let run = tokio::spawn(async move {
        call(&module, "execute", json!({ "command": "wait_forever" })).await
    });
    wait_for(&page, "window.hanging === true", WAIT)
        .await
        .unwrap();
    page.close().await.unwrap();
    let result = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert_eq!(
        code_of(&result),
        (
            ForModelKind::Failed,
            "browser_execution_indeterminate".to_owned()
        ),
        "disconnect after claim"
    );
}

async fn of_two_tabs_exactly_one_claims(world: &World) {
    let session = world.session().await;
    let one = world.tab(&session).await;
    let two = world.tab(&session).await;
    assert_eq!(world.bridge.connections(&session), 2);
    let module = world.bridge.lend(&session).unwrap();
    let result = call(
        &module,
        "execute",
        json!({ "command": "add_note", "input": { "text": "once" } }),
    )
    .await;
    assert_eq!(result.unwrap(), json!({ "count": 1 }), "two tabs");
    let mut ran = 0;
    let mut claimed = 0;
    let mut refused = 0;
    for page in [&one, &two] {
        // Both tabs saw the request and tried to claim it.
        wait_for(
            page,
            "window.bridge.stats().claimed + window.bridge.stats().refused === 1",
            WAIT,
        )
        .await
        .unwrap();
        let stats: Value = eval(page, "window.bridge.stats()").await.unwrap();
        assert_eq!(stats["requests"], 1, "two tabs: {stats}");
        claimed += stats["claimed"].as_u64().unwrap();
        refused += stats["refused"].as_u64().unwrap();
        ran += eval::<u64>(page, "window.ran").await.unwrap();
    }
    assert_eq!(
        (claimed, refused, ran),
        (1, 1, 1),
        "two tabs: exactly one claimed and ran"
    );
    one.close().await.unwrap();
    two.close().await.unwrap();
}

async fn close_ends_every_stream_and_later_runs_go_without_ui(world: &World) {
    let session = world.session().await;
    let one = world.tab(&session).await;
    let two = world.tab(&session).await;
    let module = world.bridge.lend(&session).unwrap();
    let run = tokio::spawn(async move {
        call(&module, "execute", json!({ "command": "wait_forever" })).await
    });
    wait_for(&one, "window.bridge.stats().requests === 1", WAIT)
        .await
        .unwrap();
    world.bridge.close();
    let result = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert_eq!(
        code_of(&result),
        (ForModelKind::Unavailable, "browser_closed".to_owned()),
        "close"
    );
    for page in [&one, &two] {
        // Each tab got `end` and stopped for good, without reconnecting.
        wait_for(page, "window.bridge.status === 'closed'", WAIT)
            .await
            .unwrap();
        let connects: u64 = eval(page, "window.bridge.stats().connects").await.unwrap();
        assert_eq!(connects, 1, "close: no reconnect");
        let status: u16 = eval(
            page,
            &format!("fetch('/browser/sessions/{session}/browser/events').then((r) => r.status)"),
        )
        .await
        .unwrap();
        assert_eq!(status, 410, "close: later requests answer 410");
    }
    screenshot(&one, &world.artifacts.join("closed.png"))
        .await
        .unwrap();
    assert_eq!(world.bridge.connections(&session), 0);
    // A later run fails to borrow: it is offered no `ui` tools, and a call is unknown.
    let local = world.agent.session(session.clone());
    let command = send(&local, "try the browser").await;
    let terminal = terminal_of(&local, &command).await;
    assert_eq!(
        terminal.outcome,
        TerminalOutcome::Completed,
        "close: {terminal:?}"
    );
    let last = world.model.requests().last().unwrap().tools.clone();
    assert!(
        last.iter().all(|tool| !tool.name.starts_with("ui__")),
        "close: {last:?}"
    );
    let lines = outline(&transcript(&local).await);
    assert!(
        lines[2].starts_with("tool ui__discover (error): "),
        "close: {lines:?}"
    );
    one.close().await.unwrap();
    two.close().await.unwrap();
}
