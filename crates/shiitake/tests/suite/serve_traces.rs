//! `serve --otlp-endpoint` exporting to a trace receiver this project did not write:
//! Arize Phoenix (`arize-phoenix` from PyPI, `cargo xtask phoenix`), started on free
//! ports. A scripted run with a tool call that waits for an approval (answered by the
//! MCP Python SDK's elicitation) comes back from Phoenix's API as one trace: the run at
//! its root, a `chat` span per model call with the GenAI attributes, the tool call, and
//! the approval's wait under it; no message content, as none was asked for. A request
//! carrying a W3C `traceparent` is a span of the caller's trace. A second `serve` with
//! `--otlp-content` exports the answer and the call's arguments.
//!
//! Without Phoenix (`SHIITAKE_PHOENIX`) or the clients' Python the test prints a
//! `SKIPPED` line, or fails when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shiitake_test_services::Service;

use crate::support::clients::json_lines;
use crate::support::{Serve, binary, free_port, script};

/// A Phoenix server of this test: its HTTP port, killed when dropped.
struct Phoenix {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Phoenix {
    /// Phoenix on free ports with a database of its own, once it answers `/healthz`.
    fn start(command: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (port, grpc) = (free_port(), free_port());
        let log = std::fs::File::create(dir.path().join("phoenix.log")).unwrap();
        let child = Command::new(command)
            .arg("serve")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let phoenix = Self {
            child,
            port,
            _dir: dir,
        };
        let started = Instant::now();
        while get(port, "/healthz").0 != 200 {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "Phoenix did not answer in 120 s: {}",
                std::fs::read_to_string(phoenix._dir.path().join("phoenix.log"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        phoenix
    }

    /// The spans of `project` Phoenix holds, once `ready` says they are all there
    /// (Phoenix takes spans in the background), within 30 s.
    fn spans(&self, project: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let (status, body) = get(
                self.port,
                &format!("/v1/projects/{project}/spans?limit=200"),
            );
            if status == 200 {
                let spans = serde_json::from_str::<Value>(&body).unwrap()["data"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if ready(&spans) {
                    return spans;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "Phoenix has no complete trace in {project} after 30 s: {status} {body}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// One HTTP/1.1 GET to 127.0.0.1:`port` with `headers`: its status and body.
fn request(port: u16, path: &str, headers: &str) -> (u16, String) {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Connection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn get(port: u16, path: &str) -> (u16, String) {
    request(port, path, "")
}

/// The spans named `name`.
fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|span| span["name"] == name).collect()
}

fn attribute<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

/// A `serve` exporting to `phoenix`'s project `project` (with message content when
/// `content`), playing a patch that asks for approval and an answer; its folder, its
/// port and its token.
fn traced_serve(
    phoenix: &Phoenix,
    project: &str,
    content: bool,
) -> (Serve, tempfile::TempDir, u16, String) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    // The Local default asks before every patch.
    let patch = "*** Begin Patch\n*** Add File: made.txt\n+made\n*** End Patch\n";
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [{"tool_call": {"name": "files__apply_patch", "arguments": {"patch": patch}}}]},
            {"steps": [{"text": "Made it."}]}
        ]}),
    );
    let port = free_port();
    let data = dir.path().join("data");
    let mut command = Command::new(binary());
    command
        .args(["serve", "--port", &port.to_string(), "--model", &model])
        .arg("--data-dir")
        .arg(&data)
        .arg("--workspace")
        .arg(&workspace)
        .args([
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{}", phoenix.port),
        ])
        .env_remove("SHIITAKE_MODEL")
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("x-project-name={project}"),
        );
    if content {
        command.arg("--otlp-content");
    }
    let serve = Serve::spawn(command, &data);
    let token = std::fs::read_to_string(data.join("token")).unwrap();
    (serve, dir, port, token.trim().to_owned())
}

/// The MCP client's `prompt` answered by allowing the approval it brings: the Session.
fn prompt_and_allow(python: &Path, serve: &Serve, token: &str) -> String {
    let url = format!("{}/mcp", serve.url);
    let args = [
        url.as_str(),
        token,
        "elicit",
        "Make the file.",
        "allow_once",
    ];
    let lines = json_lines(python, "mcp_client.py", args, Duration::from_secs(90));
    let result = lines.iter().find_map(|line| line.get("result")).unwrap();
    assert_eq!(result["structuredContent"]["text"], "Made it.", "{lines:?}");
    result["structuredContent"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_run_with_a_tool_call_and_an_approval_is_one_trace_in_phoenix() {
    let Some(phoenix_command) = Service::phoenix() else {
        return;
    };
    let Some(python) = Service::clients_python() else {
        return;
    };
    let phoenix = Phoenix::start(&phoenix_command);
    let project = format!("traces-{}", std::process::id());
    let (serve, _dir, port, token) = traced_serve(&phoenix, &project, false);
    let token = token.as_str();
    let session = prompt_and_allow(&python, &serve, token);

    // A caller's trace continues into the request it makes.
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traceparent = format!("traceparent: 00-{caller_trace}-00f067aa0ba902b7-01\r\n");
    let authorization = format!("Authorization: Bearer {token}\r\n");
    let (status, _) = request(
        port,
        "/v1/sessions",
        &format!("{authorization}{traceparent}"),
    );
    assert_eq!(status, 200);

    let spans = phoenix.spans(&project, |spans| {
        named(spans, "invoke_agent main").len() == 1
            && named(spans, "chat scripted").len() == 2
            && spans
                .iter()
                .any(|span| span["context"]["trace_id"] == caller_trace)
    });

    let run = named(&spans, "invoke_agent main")[0];
    assert!(run["parent_id"].is_null(), "the run is the root: {run}");
    assert_eq!(run["span_kind"], "AGENT", "{run}");
    assert_eq!(attribute(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attribute(run, "gen_ai.conversation.id"), session.as_str());
    assert_eq!(attribute(run, "shiitake.outcome"), "completed");
    let trace = run["context"]["trace_id"].clone();
    let run_id = run["context"]["span_id"].clone();

    let mut chats = named(&spans, "chat scripted");
    chats.sort_by_key(|span| span["start_time"].as_str().unwrap().to_owned());
    for chat in &chats {
        assert_eq!(chat["context"]["trace_id"], trace, "{chat}");
        assert_eq!(chat["parent_id"], run_id, "{chat}");
        assert_eq!(chat["span_kind"], "LLM", "{chat}");
        assert_eq!(attribute(chat, "gen_ai.provider.name"), "scripted");
        assert_eq!(attribute(chat, "gen_ai.request.model"), "scripted");
        assert!(
            attribute(chat, "gen_ai.usage.input_tokens")
                .as_i64()
                .unwrap()
                > 0,
            "{chat}"
        );
        assert!(
            attribute(chat, "gen_ai.usage.output_tokens")
                .as_i64()
                .is_some(),
            "{chat}"
        );
        assert!(
            attribute(chat, "shiitake.time_to_first_token_ms")
                .as_i64()
                .is_some()
        );
    }
    assert_eq!(
        attribute(chats[0], "gen_ai.response.finish_reasons"),
        "tool_calls"
    );
    assert_eq!(
        attribute(chats[1], "gen_ai.response.finish_reasons"),
        "stop"
    );

    let tool = named(&spans, "execute_tool files__apply_patch");
    assert_eq!(tool.len(), 1, "{spans:?}");
    let tool = tool[0];
    assert_eq!(tool["parent_id"], run_id, "{tool}");
    assert_eq!(tool["span_kind"], "TOOL", "{tool}");
    assert_eq!(attribute(tool, "gen_ai.tool.name"), "files__apply_patch");
    assert!(
        attribute(tool, "gen_ai.tool.call.id").as_str().is_some(),
        "{tool}"
    );
    assert_eq!(attribute(tool, "shiitake.outcome"), "ok");
    assert_eq!(attribute(tool, "shiitake.replay_safe"), false);

    let wait = named(&spans, "await_approval files__apply_patch");
    assert_eq!(wait.len(), 1, "{spans:?}");
    assert_eq!(
        wait[0]["parent_id"], tool["context"]["span_id"],
        "{}",
        wait[0]
    );
    assert_eq!(attribute(wait[0], "shiitake.decision"), "allow");

    // No content was asked for: neither the patch nor the answer is anywhere.
    let everything = Value::Array(spans.clone()).to_string();
    assert!(!everything.contains("+made"), "the patch was exported");
    assert!(!everything.contains("Made it."), "the answer was exported");

    let continued: Vec<&Value> = spans
        .iter()
        .filter(|span| span["context"]["trace_id"] == caller_trace)
        .collect();
    assert_eq!(continued.len(), 1, "{continued:?}");
    assert_eq!(continued[0]["name"], "GET /v1/sessions");
    assert_eq!(continued[0]["parent_id"], "00f067aa0ba902b7");

    // Asked for, the content is there: the answer on its model call, the tool's result.
    let project = format!("traces-content-{}", std::process::id());
    let (serve, _dir, _, token) = traced_serve(&phoenix, &project, true);
    prompt_and_allow(&python, &serve, &token);
    let spans = phoenix.spans(&project, |spans| {
        named(spans, "chat scripted").len() == 2 && named(spans, "invoke_agent main").len() == 1
    });
    let everything = Value::Array(spans).to_string();
    assert!(
        everything.contains("Made it."),
        "the answer was not exported: {everything}"
    );
    assert!(
        everything.contains("files__apply_patch("),
        "the call was not exported"
    );
}
