//! The browser App bridge's routes over real HTTP, with a Rust "tab" (reqwest and
//! an SSE parser) standing in for the browser: auth, the stored-Session check,
//! claims and results with every refusal, bounds of a `discover` list, the claim
//! timeout, a dropped connection, and close. The same routes driven by the real
//! JavaScript in headless Chromium are in `crates/shiitake-ext-ui/tests/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::support::{Server, TOKEN, local_agent};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use futures::stream::BoxStream;
use knapsack::ui::{UiBridge, UiOptions};
use serde_json::{Value, json};
use shiitake_capabilities::{
    ExecutionId, ForModelKind, InvocationContext, Module, OperationName, OperationPath, ToolError,
    execute_operation,
};
use shiitake_conformance::TestTools;
use shiitake_conformance::support::new_session;
use shiitake_core::Agent;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::{SessionApi, SessionId};
use shiitake_server::{ServerConfig, Token, router};
use tokio_util::sync::CancellationToken;

/// A core Agent on SQLite in a temporary directory.
async fn core_fixture() -> (Arc<Agent>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    let agent = local_agent(&dir, Arc::new(TestTools::default()), model).await;
    (Arc::new(agent), dir)
}

struct Setup {
    server: Server,
    bridge: UiBridge,
    session: SessionId,
    http: reqwest::Client,
    _agent: Arc<Agent>,
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn new(options: UiOptions) -> Self {
        let (agent, dir) = core_fixture().await;
        let session = new_session(&*agent).await.session_id().clone();
        let bridge = UiBridge::new(options);
        let config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_browser(bridge.clone());
        let server = Server::start(
            router(agent.clone(), config),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        Self {
            server,
            bridge,
            session,
            http: reqwest::Client::new(),
            _agent: agent,
            _dir: dir,
        }
    }

    fn url(&self, tail: &str) -> String {
        format!(
            "{}/browser/sessions/{}/browser/{tail}",
            self.server.url(),
            self.session
        )
    }

    async fn post(&self, tail: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(self.url(tail))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Opens a tab's events stream and reads its `hello`.
    async fn tab(&self) -> Tab {
        let response = self
            .http
            .get(self.url("events"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let mut events = response
            .bytes_stream()
            .eventsource()
            .map(|event| {
                let event = event.unwrap();
                (event.event, serde_json::from_str(&event.data).unwrap())
            })
            .boxed();
        let (name, data): (String, Value) = events.next().await.unwrap();
        assert_eq!(name, "hello");
        Tab {
            connection: data["connectionId"].as_str().unwrap().to_owned(),
            events,
        }
    }

    fn module(&self) -> Module {
        self.bridge.lend(&self.session).unwrap()
    }
}

struct Tab {
    connection: String,
    events: BoxStream<'static, (String, Value)>,
}

impl Tab {
    async fn next(&mut self) -> Option<(String, Value)> {
        tokio::time::timeout(Duration::from_secs(10), self.events.next())
            .await
            .expect("an event in time")
    }

    async fn request(&mut self) -> Value {
        let (name, data) = self.next().await.unwrap();
        assert_eq!(name, "request");
        data
    }
}

/// Calls `ui.<name>` of `module` as the execute door would.
async fn call(module: &Module, name: &str, input: Value) -> Result<Value, ToolError> {
    let op_name = OperationName::new(name).unwrap();
    let operation = module.operation(&op_name).unwrap();
    let path = OperationPath::parse(&format!("ui.{name}")).unwrap();
    let ctx = InvocationContext::new(ExecutionId::generate(), CancellationToken::new())
        .with_timeout(Duration::from_secs(20));
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

#[tokio::test]
async fn the_browser_module_and_every_route_need_the_token() {
    let setup = Setup::new(UiOptions::default()).await;
    let script_url = format!("{}/browser/knapsack-ui.js", setup.server.url());
    for url in [script_url.clone(), setup.url("events")] {
        let response = setup.http.get(&url).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 401, "{url}");
    }
    let response = setup
        .http
        .post(setup.url("claims"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);

    let response = setup
        .http
        .get(&script_url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    assert_eq!(text, knapsack::ui::BROWSER_JS);
    assert!(text.contains("export function connectBrowser("));
}

#[tokio::test]
async fn without_a_bridge_no_browser_route_exists() {
    let (agent, _dir) = core_fixture().await;
    let server = Server::agent(agent, "127.0.0.1:0".parse().unwrap()).await;
    let response = reqwest::Client::new()
        .get(format!("{}/browser/knapsack-ui.js", server.url()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
}

#[tokio::test]
async fn only_a_stored_session_gets_an_events_stream() {
    let setup = Setup::new(UiOptions::default()).await;
    let unknown = format!(
        "{}/browser/sessions/no-such-session/browser/events",
        setup.server.url()
    );
    let response = setup
        .http
        .get(&unknown)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "not_found");
    assert_eq!(setup.bridge.hosts(), 0);

    let tab = setup.tab().await;
    assert_eq!(setup.bridge.connections(&setup.session), 1);
    assert_eq!(setup.bridge.hosts(), 1);
    drop(tab);
    support_eventually(|| setup.bridge.hosts() == 0).await;
}

/// Waits (bounded) until `condition` holds: the server notices a dropped connection
/// when hyper polls it.
async fn support_eventually(mut condition: impl FnMut() -> bool) {
    for _ in 0..500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition did not hold within 5 s");
}

#[tokio::test]
async fn a_request_is_claimed_once_and_only_the_claimers_result_counts() {
    let setup = Setup::new(UiOptions::default()).await;
    let mut first = setup.tab().await;
    let mut second = setup.tab().await;
    let module = setup.module();
    let run = tokio::spawn(async move {
        call(
            &module,
            "execute",
            json!({ "command": "add_note", "input": { "text": "hi" } }),
        )
        .await
    });
    let request = first.request().await;
    assert_eq!(
        second.request().await,
        request,
        "every tab gets the request"
    );
    assert_eq!(request["kind"], "execute");
    assert_eq!(request["command"], "add_note");
    assert_eq!(request["input"], json!({ "text": "hi" }));
    let id = request["requestId"].clone();

    // A result before any claim is refused.
    let (status, body) = setup
        .post(
            "results",
            json!({ "requestId": id, "connectionId": first.connection, "outcome": { "ok": 1 } }),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("conflict")));
    // The first claim wins; the winner may repeat it; the other tab is refused.
    let claim = |tab: &Tab| json!({ "requestId": id, "connectionId": tab.connection });
    assert_eq!(
        setup.post("claims", claim(&second)).await,
        (200, json!({ "claimed": true }))
    );
    assert_eq!(
        setup.post("claims", claim(&second)).await,
        (200, json!({ "claimed": true }))
    );
    assert_eq!(setup.post("claims", claim(&first)).await.0, 409);
    // Unknown request, unknown connection, malformed body.
    let (status, _) = setup
        .post(
            "claims",
            json!({ "requestId": "nope", "connectionId": second.connection }),
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = setup
        .post(
            "claims",
            json!({ "requestId": id, "connectionId": "nobody" }),
        )
        .await;
    assert_eq!(status, 409);
    let (status, body) = setup.post("claims", json!({ "requestId": id })).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid")));
    // The loser's result is refused; the winner's settles the run.
    let result = |tab: &Tab| json!({ "requestId": id, "connectionId": tab.connection, "outcome": { "ok": { "count": 1 } } });
    assert_eq!(setup.post("results", result(&first)).await.0, 409);
    assert_eq!(setup.post("results", result(&second)).await.0, 204);
    assert_eq!(
        setup.post("results", result(&second)).await.0,
        409,
        "settled once"
    );
    assert_eq!(run.await.unwrap().unwrap(), json!({ "count": 1 }));
}

#[tokio::test]
async fn a_second_request_is_busy_and_none_without_a_tab_is_not_connected() {
    let setup = Setup::new(UiOptions::default()).await;
    let module = setup.module();
    let result = call(&module, "discover", json!({})).await;
    assert_eq!(
        code_of(&result),
        (ForModelKind::Unavailable, "browser_not_connected".into())
    );

    let mut tab = setup.tab().await;
    let first = module.clone();
    let run = tokio::spawn(async move { call(&first, "discover", json!({})).await });
    let request = tab.request().await;
    let busy = call(&module, "execute", json!({ "command": "x" })).await;
    assert_eq!(
        code_of(&busy),
        (ForModelKind::Unavailable, "browser_busy".into())
    );

    let claim = json!({ "requestId": request["requestId"], "connectionId": tab.connection });
    assert_eq!(setup.post("claims", claim).await.0, 200);
    let commands = json!({ "commands": [
        { "name": "add_note", "description": "Adds a note.", "inputSchema": { "type": "object" } },
        { "name": "clear" }
    ] });
    let body = json!({ "requestId": request["requestId"], "connectionId": tab.connection, "outcome": { "ok": commands } });
    assert_eq!(setup.post("results", body).await.0, 204);
    assert_eq!(
        run.await.unwrap().unwrap(),
        json!({ "commands": [
            { "name": "add_note", "description": "Adds a note.", "inputSchema": { "type": "object" } },
            { "name": "clear", "description": "" }
        ] })
    );
}

/// Runs one `discover` answered with `commands` and returns the HTTP status of the
/// result and what the run got.
async fn discover_answered(
    setup: &Setup,
    tab: &mut Tab,
    commands: Value,
) -> (u16, Result<Value, ToolError>) {
    let module = setup.module();
    let run = tokio::spawn(async move { call(&module, "discover", json!({})).await });
    let request = tab.request().await;
    let id = request["requestId"].clone();
    let claim = json!({ "requestId": id, "connectionId": tab.connection });
    assert_eq!(setup.post("claims", claim).await.0, 200);
    let body =
        json!({ "requestId": id, "connectionId": tab.connection, "outcome": { "ok": commands } });
    let (status, _) = setup.post("results", body).await;
    (status, run.await.unwrap())
}

#[tokio::test]
async fn a_discover_list_is_bounded_at_256_commands_and_128_byte_names() {
    let setup = Setup::new(UiOptions::default()).await;
    let mut tab = setup.tab().await;
    let list = |count: usize, name_len: usize| {
        let commands: Vec<Value> = (0..count)
            .map(|i| json!({ "name": format!("{i:0>width$}", width = name_len) }))
            .collect();
        json!({ "commands": commands })
    };
    let (status, result) = discover_answered(&setup, &mut tab, list(256, 128)).await;
    assert_eq!(status, 204);
    assert_eq!(result.unwrap()["commands"].as_array().unwrap().len(), 256);

    let (status, result) = discover_answered(&setup, &mut tab, list(257, 8)).await;
    assert_eq!(status, 400);
    assert_eq!(
        code_of(&result),
        (ForModelKind::Failed, "browser_invalid_result".into())
    );

    let (status, result) = discover_answered(&setup, &mut tab, list(1, 129)).await;
    assert_eq!(status, 400);
    assert_eq!(
        code_of(&result),
        (ForModelKind::Failed, "browser_invalid_result".into())
    );

    let (status, result) = discover_answered(&setup, &mut tab, json!([1, 2])).await;
    assert_eq!(status, 400);
    assert_eq!(
        code_of(&result),
        (ForModelKind::Failed, "browser_invalid_result".into())
    );
}

#[tokio::test]
async fn a_failed_command_reaches_the_run_with_its_message() {
    let setup = Setup::new(UiOptions::default()).await;
    let mut tab = setup.tab().await;
    let module = setup.module();
    let run =
        tokio::spawn(
            async move { call(&module, "execute", json!({ "command": "explode" })).await },
        );
    let request = tab.request().await;
    assert_eq!(
        request["input"],
        json!({}),
        "input defaults to an empty object"
    );
    let id = request["requestId"].clone();
    let claim = json!({ "requestId": id, "connectionId": tab.connection });
    assert_eq!(setup.post("claims", claim).await.0, 200);
    let body = json!({ "requestId": id, "connectionId": tab.connection, "outcome": { "error": { "message": "kaboom" } } });
    assert_eq!(setup.post("results", body).await.0, 204);
    let result = run.await.unwrap();
    assert_eq!(
        code_of(&result),
        (ForModelKind::Failed, "browser_command_failed".into())
    );
    let Err(ToolError::ForModel(error)) = result else {
        unreachable!()
    };
    assert_eq!(error.message, "the App's command `explode` failed: kaboom");
}

#[tokio::test]
async fn an_unclaimed_request_times_out_as_not_connected() {
    let setup = Setup::new(UiOptions {
        claim_timeout: Duration::from_millis(300),
    })
    .await;
    let mut tab = setup.tab().await;
    let module = setup.module();
    let run = tokio::spawn(async move { call(&module, "discover", json!({})).await });
    let request = tab.request().await;
    let result = run.await.unwrap();
    assert_eq!(
        code_of(&result),
        (ForModelKind::Unavailable, "browser_not_connected".into())
    );
    // The request was given up: a late claim is refused.
    let claim = json!({ "requestId": request["requestId"], "connectionId": tab.connection });
    assert_eq!(setup.post("claims", claim).await.0, 409);
}

#[tokio::test]
async fn a_claimer_whose_connection_drops_leaves_the_outcome_unknown() {
    let setup = Setup::new(UiOptions::default()).await;
    let mut tab = setup.tab().await;
    let module = setup.module();
    let run =
        tokio::spawn(async move { call(&module, "execute", json!({ "command": "pay" })).await });
    let request = tab.request().await;
    let claim = json!({ "requestId": request["requestId"], "connectionId": tab.connection });
    assert_eq!(setup.post("claims", claim).await.0, 200);
    drop(tab); // the TCP connection of the events stream closes
    let result = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        code_of(&result),
        (
            ForModelKind::Failed,
            "browser_execution_indeterminate".into()
        )
    );
}

#[tokio::test]
async fn close_ends_every_stream_then_routes_answer_410_and_runs_cannot_borrow() {
    let setup = Setup::new(UiOptions::default()).await;
    let mut tab = setup.tab().await;
    let module = setup.module();
    let run = tokio::spawn(async move { call(&module, "discover", json!({})).await });
    let request = tab.request().await;
    setup.bridge.close();
    assert_eq!(tab.next().await, Some(("end".to_owned(), json!({}))));
    assert_eq!(tab.next().await, None, "the stream ends after `end`");
    let result = run.await.unwrap();
    assert_eq!(
        code_of(&result),
        (ForModelKind::Unavailable, "browser_closed".into())
    );

    let response = setup
        .http
        .get(setup.url("events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 410);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "stopped");
    let claim = json!({ "requestId": request["requestId"], "connectionId": tab.connection });
    assert_eq!(setup.post("claims", claim).await.0, 410);
    let result = json!({ "requestId": request["requestId"], "connectionId": tab.connection, "outcome": { "ok": 1 } });
    assert_eq!(setup.post("results", result).await.0, 410);
    assert_eq!(
        setup.bridge.lend(&setup.session).unwrap_err(),
        knapsack::ui::UiError::Closed
    );
}
