//! A model over its real protocol whose answers follow from what it is sent: for the
//! storage fault tests (`suite/serve_disk_full.rs`).
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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::header;
use axum::response::IntoResponse;
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

/// A running model server; stops when dropped.
pub struct EchoModel {
    /// `openai-compatible:<base>#echo`, for `serve --model`.
    pub spec: String,
    calls: Arc<Mutex<Vec<Call>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl EchoModel {
    /// Starts the server; every answer waits `think` first, so runs are in flight for a
    /// while.
    pub fn start(think: Duration) -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let recorded = calls.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let router = axum::Router::new().route(
                    "/v1/chat/completions",
                    axum::routing::post(move |body: axum::Json<Value>| {
                        let recorded = recorded.clone();
                        async move {
                            tokio::time::sleep(think).await;
                            let call = call_of(&body.0);
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
            _stop: stop,
        }
    }

    /// Every call answered so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
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
