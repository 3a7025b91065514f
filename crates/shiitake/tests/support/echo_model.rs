//! A model and a tool over their real protocols, whose answers follow from what they
//! are sent, and which a test can hold at a chosen point ([`Gate`]): for the storage
//! fault tests (`suite/serve_disk_full.rs`), which need runs stopped exactly where a
//! commit is about to happen.
//!
//! [`EchoModel`] is an OpenAI-compatible server (`openai-compatible:<url>#echo`). The
//! prompt of a call is the last user message of its context. When the context ends with
//! that prompt (and the run offered [`TOOL`]), the model calls the tool with the prompt
//! as its `tag`; when it ends with a tool result (or the tool was not offered), it
//! answers `answer to <prompt>` and stops. So a run calls the tool once and then
//! answers, a call made again (a run resumed) gets the same answer, and an answer shows
//! which prompt it was made for. Unlike a `scripted:` model under `serve`, it keeps no
//! place in the data directory, so filling that directory's filesystem does not fail
//! the model.
//!
//! [`Marks`] is an MCP server with the one tool `mark {tag}` (not safe to repeat): it
//! appends the tag to a file, one line per execution, so executions are counted on a
//! disk the test does not fault.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::header;
use axum::response::IntoResponse;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

/// The tool the model calls: `mark` of the MCP server named `marks`.
pub const TOOL: &str = "env__mcp__marks__mark";

/// What one call of the model asked for and got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The prompt: the last user message of the context.
    pub prompt: String,
    /// Whether the model answered with a call of [`TOOL`] (else with text).
    pub tool_call: bool,
}

/// A point a call stops at until the test opens it: armed, it takes the first call
/// its rule matches and holds it; opened, it lets that call (and every later one) go.
#[derive(Clone)]
pub struct Gate(Arc<GateInner>);

struct GateInner {
    rule: Box<dyn Fn(&Call) -> bool + Send + Sync>,
    state: Mutex<GateState>,
    opened: tokio::sync::Notify,
}

enum GateState {
    Armed,
    Holding(String),
    Open,
}

impl Gate {
    fn new(rule: impl Fn(&Call) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(GateInner {
            rule: Box::new(rule),
            state: Mutex::new(GateState::Armed),
            opened: tokio::sync::Notify::new(),
        }))
    }

    /// The prompt of the call held now, if one is.
    pub fn holding(&self) -> Option<String> {
        match &*self.0.state.lock().unwrap() {
            GateState::Holding(prompt) => Some(prompt.clone()),
            _ => None,
        }
    }

    /// Lets the held call go on; the gate holds nothing more.
    pub fn open(&self) {
        *self.0.state.lock().unwrap() = GateState::Open;
        self.0.opened.notify_waiters();
    }

    /// Takes `call` when armed and its rule matches.
    fn take(&self, call: &Call) -> bool {
        let mut state = self.0.state.lock().unwrap();
        let take = matches!(*state, GateState::Armed) && (self.0.rule)(call);
        if take {
            *state = GateState::Holding(call.prompt.clone());
        }
        take
    }

    /// Returns once the gate is open.
    async fn passed(&self) {
        loop {
            // Made before the state is looked at, so an `open` in between is not missed.
            let opened = self.0.opened.notified();
            if matches!(*self.0.state.lock().unwrap(), GateState::Open) {
                return;
            }
            opened.await;
        }
    }
}

/// The gates of a server, and the one a call stops at.
#[derive(Clone, Default)]
struct Gates(Arc<Mutex<Vec<Gate>>>);

impl Gates {
    fn add(&self, rule: impl Fn(&Call) -> bool + Send + Sync + 'static) -> Gate {
        let gate = Gate::new(rule);
        self.0.lock().unwrap().push(gate.clone());
        gate
    }

    /// Holds `call` at the first armed gate that takes it, until that gate opens.
    async fn pass(&self, call: &Call) {
        let gate = self
            .0
            .lock()
            .unwrap()
            .iter()
            .find(|gate| gate.take(call))
            .cloned();
        if let Some(gate) = gate {
            gate.passed().await;
        }
    }
}

/// A running model server; stops when dropped.
pub struct EchoModel {
    /// `openai-compatible:<base>#echo`, for `serve --model`.
    pub spec: String,
    calls: Arc<Mutex<Vec<Call>>>,
    gates: Gates,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl EchoModel {
    /// Starts the server; every answer waits `think` first, so runs are in flight for a
    /// while.
    pub fn start(think: Duration) -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let gates = Gates::default();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (recorded, held) = (calls.clone(), gates.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let router = axum::Router::new().route(
                    "/v1/chat/completions",
                    axum::routing::post(move |body: axum::Json<Value>| {
                        let (recorded, held) = (recorded.clone(), held.clone());
                        async move {
                            tokio::time::sleep(think).await;
                            let call = call_of(&body.0);
                            held.pass(&call).await;
                            let n = {
                                let mut recorded = recorded.lock().unwrap();
                                recorded.push(call.clone());
                                recorded.len()
                            };
                            (
                                [(header::CONTENT_TYPE, "text/event-stream")],
                                answer(&call, n),
                            )
                                .into_response()
                        }
                    }),
                );
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let base = format!("http://{}/v1", listener.local_addr().unwrap());
                ready_tx.send(base).unwrap();
                axum::serve(listener, router)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let base = ready_rx.recv().unwrap();
        Self {
            spec: format!("openai-compatible:{base}#echo"),
            calls,
            gates,
            _stop: stop,
        }
    }

    /// Every call answered so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// A gate that holds the first call `rule` matches (the model has its answer and
    /// has not sent it) until it is opened.
    pub fn hold(&self, rule: impl Fn(&Call) -> bool + Send + Sync + 'static) -> Gate {
        self.gates.add(rule)
    }
}

/// The call a request body makes.
fn call_of(body: &Value) -> Call {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let prompt = messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .map(|message| text(&message["content"]))
        .unwrap_or_default();
    let offered = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|tool| tool["function"]["name"] == TOOL);
    let tool_call = offered && messages.last().is_some_and(|last| last["role"] == "user");
    Call { prompt, tool_call }
}

/// The answer to `call`, the `n`th answered: an SSE stream of chat completion chunks.
fn answer(call: &Call, n: usize) -> String {
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({"id": format!("echo-{n}"), "object": "chat.completion.chunk",
            "model": "echo", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let mut sse = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    if call.tool_call {
        let arguments = json!({"tag": call.prompt}).to_string();
        sse += &chunk(
            json!({"tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function",
                "function": {"name": TOOL, "arguments": arguments}}]}),
            Value::Null,
        );
        sse += &chunk(json!({}), json!("tool_calls"));
    } else {
        sse += &chunk(
            json!({"content": format!("answer to {}", call.prompt)}),
            Value::Null,
        );
        sse += &chunk(json!({}), json!("stop"));
    }
    sse + "data: [DONE]\n\n"
}

/// The text of a message's content: a string, or its text blocks joined.
pub fn text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The MCP server of `mark {tag}`: appends the tag to its file (synced) and then
/// answers `{"marked": tag}`; a [`Gate`] can hold a call after the line is written,
/// before the answer. Runs in the test's process, so it outlives a killed `serve`.
#[derive(Clone)]
pub struct Marks {
    file: Arc<Mutex<File>>,
    gates: Gates,
}

impl Marks {
    /// Serves `mark` at a free port, appending to `file`; its URL, the server and the
    /// sender that stops it.
    pub fn start(file: PathBuf) -> (String, Self, tokio::sync::oneshot::Sender<()>) {
        let marks = Self {
            file: Arc::new(Mutex::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(file)
                    .unwrap(),
            )),
            gates: Gates::default(),
        };
        let (url, stop) =
            super::mcp::serve_handler(marks.clone(), None, super::mcp::Refusal::Plain);
        (url, marks, stop)
    }

    /// A gate that holds the first execution whose tag `rule` matches (the `tag` is the
    /// call's prompt; `tool_call` is true), after it marked, until it is opened.
    pub fn hold(&self, rule: impl Fn(&Call) -> bool + Send + Sync + 'static) -> Gate {
        self.gates.add(rule)
    }
}

impl ServerHandler for Marks {
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
            "properties": {"tag": {"type": "string"}},
            "required": ["tag"]
        }) else {
            unreachable!()
        };
        let schema: JsonObject = schema;
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "mark",
            "Appends a tag to the marks file.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tag = request
            .arguments
            .and_then(|arguments| arguments.get("tag").cloned())
            .and_then(|tag| tag.as_str().map(str::to_owned))
            .unwrap_or_default();
        {
            let mut file = self.file.lock().unwrap();
            file.write_all(format!("{tag}\n").as_bytes()).unwrap();
            file.sync_data().unwrap();
        }
        let call = Call {
            prompt: tag.clone(),
            tool_call: true,
        };
        self.gates.pass(&call).await;
        Ok(CallToolResult::structured(json!({ "marked": tag })).into())
    }
}
