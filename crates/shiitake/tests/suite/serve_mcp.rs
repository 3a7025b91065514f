//! `shiitake serve --mcp`: a real rmcp server on 127.0.0.1 becomes `env.mcp.notes` for
//! the Local host's runs, its bearer token taken from the environment; a server that
//! refuses the credential is reported and left out; servers connect in the background,
//! so one that hangs delays nothing and a run sees a server once it has connected; and
//! the token appears nowhere in what `serve` and `chat` print, at the default, debug
//! and trace levels, even when servers repeat it in a 401 body or a redirect's URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::mcp::{self, Refusal};
use crate::support::{Serve, binary, free_port, script, stdout};
use serde_json::json;

const TOKEN: &str = "cli-token-5e0b-d2a4";

/// Serves the one tool `create-note {title}` requiring `Bearer <token>`.
fn notes_tool() -> mcp::OneTool {
    mcp::OneTool {
        name: "create-note",
        description: "Creates a note.",
        argument: "title",
        answer: Arc::new(|title| json!({ "id": 1, "title": title })),
    }
}

/// A `--mcp` value for `name` at `url` sending `Bearer $NOTES_TOKEN`.
fn mcp_arg(name: &str, url: &str) -> String {
    format!("{name}={url},header=Authorization:Bearer ${{NOTES_TOKEN}}")
}

/// The scripted model: create a note, then say so.
fn note_taking_model(dir: &Path) -> String {
    script(
        dir,
        &json!({"model": "scripted", "turns": [
            {"steps": [{"tool_call": {"name": "env__mcp__notes__create_note", "arguments": {"title": "groceries"}}}]},
            {"steps": [{"text": "Noted."}]}
        ]}),
    )
}

/// `serve` with `mcp` servers and `model`, `NOTES_TOKEN` set, logging at `level`
/// (`None`: the default); what it writes on stderr is collected.
fn serve_with_mcp(
    dir: &Path,
    model: &str,
    mcp: &[String],
    level: Option<&str>,
) -> (Serve, Arc<Mutex<String>>) {
    let data_dir = dir.join("data");
    let mut command = Command::new(binary());
    command
        .args([
            "serve",
            "--port",
            &free_port().to_string(),
            "--model",
            model,
        ])
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--workspace")
        .arg(dir)
        .env("NOTES_TOKEN", TOKEN)
        .env_remove("SHIITAKE_MODEL")
        .env_remove("SHIITAKE_LOG")
        .stderr(Stdio::piped());
    for server in mcp {
        command.arg("--mcp").arg(server);
    }
    if let Some(level) = level {
        command.env("SHIITAKE_LOG", level);
    }
    let mut serve = Serve::spawn(command, &data_dir);
    let logs = serve.collect_stderr();
    (serve, logs)
}

/// Waits until `logs` holds `needle`, at most 30 s.
fn wait_logged(logs: &Mutex<String>, needle: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if logs.lock().unwrap().contains(needle) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Chats `write it down` and returns what chat printed.
fn chat_once(serve: &Serve) -> String {
    stdout(&serve.chat("write it down\n", Duration::from_secs(60)))
}

const NOTES_CONNECTED: &str = "shiitake: MCP server connected: notes (1 tools)";

#[test]
fn serve_mcp_makes_a_server_s_tools_available_to_runs() {
    let (notes_url, _stop_notes) = mcp::serve(notes_tool(), Some(TOKEN));
    let (locked_url, _stop_locked) = mcp::serve(notes_tool(), Some("some-other-token"));
    let dir = tempfile::tempdir().unwrap();
    let model = note_taking_model(dir.path());
    let servers = [mcp_arg("notes", &notes_url), mcp_arg("locked", &locked_url)];
    let (mut serve, logs) = serve_with_mcp(dir.path(), &model, &servers, Some("trace"));
    assert!(
        serve.wait_printed(Duration::from_secs(30), |line| line == NOTES_CONNECTED),
        "{:?}",
        serve.printed()
    );
    let chatted = chat_once(&serve);
    assert!(wait_logged(&logs, "shiitake: MCP server left out"));
    serve.kill();
    let logs = logs.lock().unwrap().clone();
    let printed = serve.printed().join("\n");

    assert!(
        chatted.lines().any(|line| line
            == r#"[tool result] env__mcp__notes__create_note: {"id":1,"title":"groceries"}"#),
        "{chatted}\n{logs}"
    );
    assert!(chatted.contains("[run completed]"), "{chatted}");
    assert!(
        printed.contains("shiitake: MCP servers connecting: notes, locked"),
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

#[test]
fn a_credential_a_server_repeats_never_reaches_serve_s_output() {
    let (notes_url, _stop_notes) = mcp::serve(notes_tool(), Some(TOKEN));
    // It repeats the refused `Authorization` in its 401 body.
    let (echo_url, _stop_echo) =
        mcp::serve_handler(notes_tool(), Some("some-other-token"), Refusal::Echoing);
    // It redirects to a URL that holds the credential, encoded and as sent.
    let (moved_url, _stop_moved) = mcp::redirecting(format!(
        "http://127.0.0.1:9/steal?credential=Bearer%20{TOKEN}&raw={TOKEN}"
    ));
    for level in [None, Some("debug")] {
        let dir = tempfile::tempdir().unwrap();
        let servers = [
            mcp_arg("notes", &notes_url),
            mcp_arg("echo", &echo_url),
            mcp_arg("moved", &moved_url),
        ];
        let (mut serve, logs) = serve_with_mcp(dir.path(), "none", &servers, level);
        assert!(wait_logged(
            &logs,
            "MCP server `echo` refused its credential"
        ));
        assert!(wait_logged(
            &logs,
            "MCP server `moved` answered with a redirect"
        ));
        assert!(serve.wait_printed(Duration::from_secs(30), |line| line == NOTES_CONNECTED));
        serve.kill();
        let logs = logs.lock().unwrap().clone();
        let printed = serve.printed().join("\n");
        // Not vacuous: rmcp logged the refusal's body, and the token in it was removed.
        assert!(
            logs.contains("credential refused: <redacted>"),
            "{level:?}: {logs}"
        );
        assert!(
            !logs.contains(TOKEN),
            "{level:?}: the token is in stderr: {logs}"
        );
        assert!(
            !printed.contains(TOKEN),
            "{level:?}: the token is in stdout: {printed}"
        );
    }
}

#[test]
fn a_hanging_server_delays_nothing_and_a_run_sees_a_server_once_connected() {
    let (notes_url, _stop_notes) = mcp::serve(notes_tool(), Some(TOKEN));
    let (stuck_url, _stop_stuck) = mcp::serve_handler(mcp::Hanging, None, Refusal::Plain);
    let dir = tempfile::tempdir().unwrap();
    let model = note_taking_model(dir.path());
    let servers = [mcp_arg("stuck", &stuck_url), mcp_arg("notes", &notes_url)];
    let (serve, logs) = serve_with_mcp(dir.path(), &model, &servers, None);

    // Listening and answering while `stuck` is still inside its 10 s to connect.
    let listed = serve.command(&["sessions"]).output().unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        !logs.lock().unwrap().contains("`stuck`"),
        "serve waited for the hanging server: {}",
        logs.lock().unwrap()
    );

    // The other server's tools reach a run once it has connected.
    assert!(serve.wait_printed(Duration::from_secs(30), |line| line == NOTES_CONNECTED));
    let chatted = chat_once(&serve);
    assert!(
        chatted.lines().any(|line| line
            == r#"[tool result] env__mcp__notes__create_note: {"id":1,"title":"groceries"}"#),
        "{chatted}"
    );
}
