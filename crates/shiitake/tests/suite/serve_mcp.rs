//! `shiitake serve --mcp`: a real rmcp server on 127.0.0.1 becomes `env.mcp.notes` for
//! the Local host's runs, its bearer token taken from the environment; a server that
//! refuses the credential is reported and left out; and the token appears nowhere in
//! what `serve` and `chat` print, with logs at trace level.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{binary, free_port, mcp, script, wait_with_timeout};
use serde_json::json;

const TOKEN: &str = "cli-token-5e0b-d2a4";

/// Serves the one tool `create-note {title}` requiring `Bearer <token>`.
fn start_server(token: &'static str) -> (String, tokio::sync::oneshot::Sender<()>) {
    let notes = mcp::OneTool {
        name: "create-note",
        description: "Creates a note.",
        argument: "title",
        answer: Arc::new(|title| json!({ "id": 1, "title": title })),
    };
    mcp::serve(notes, Some(token))
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
