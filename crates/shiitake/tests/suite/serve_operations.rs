//! What an operator watches of a real `shiitake serve` (docs/operations.md): the
//! Prometheus scrape at `GET /metrics` (`--metrics`, the bearer token only) moving by
//! exactly what a run with tool calls did; every line of `--log-format json` an
//! object, the run's lines carrying its Session and run; and `GET /v1/tools` listing
//! the file tools, an MCP server's tools and a server left out with its reason.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::mcp;
use crate::support::{Serve, binary, free_port, script};
use serde_json::{Value, json};

/// One `GET` on `serve` with the bearer `token` (none: no header): status and body.
fn get(serve: &Serve, path: &str, token: Option<&str>) -> (u16, String) {
    let address = serve
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let auth = token.map_or(String::new(), |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

/// The token `serve` made in its data directory.
fn token(serve: &Serve) -> String {
    std::fs::read_to_string(serve.data_dir.join("token"))
        .unwrap()
        .trim()
        .to_owned()
}

/// The value of the sample `name{labels}` in a Prometheus text scrape (every label
/// given must be on it, in any order); `None` when there is no such sample.
fn sample(scrape: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape.lines().find_map(|line| {
        if line.starts_with('#') {
            return None;
        }
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        if metric != name {
            return None;
        }
        let matches = labels
            .iter()
            .all(|(key, value)| rest.contains(&format!("{key}=\"{value}\"")));
        matches.then(|| value.parse().unwrap())
    })
}

/// A workspace with `notes.md` and a model that reads it twice, then (after a
/// pause long enough to scrape in) answers.
fn reading_model(dir: &Path) -> (std::path::PathBuf, String) {
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.md"), "the launch is on Tuesday\n").unwrap();
    let read = json!({"tool_call": {"name": "files__read", "arguments": {"path": "notes.md"}}});
    let model = script(
        dir,
        &json!({"model": "scripted", "turns": [
            {"steps": [read]},
            {"steps": [read]},
            {"steps": [{"delay_ms": 4000}, {"text": "It is on Tuesday."}]}
        ]}),
    );
    (workspace, model)
}

/// Scrapes until `ready` holds of the scrape, at most 30 s.
fn scrape_until(serve: &Serve, token: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = get(serve, "/metrics", Some(token));
        assert_eq!(status, 200, "{body}");
        if ready(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "the scrape never got there:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_scrape_during_a_run_counts_what_the_run_did() {
    let dir = tempfile::tempdir().unwrap();
    let (workspace, model) = reading_model(dir.path());
    let workspace = workspace.display().to_string();
    let serve = Arc::new(Serve::start_with(
        &dir.path().join("data"),
        &["--workspace", &workspace, "--metrics"],
        free_port(),
        Some(&model),
    ));
    assert!(
        serve.wait_printed(Duration::from_secs(30), |line| line
            .starts_with("shiitake: metrics at ")),
        "{:?}",
        serve.printed()
    );
    let token = token(&serve);
    let tool = [("tool", "files__read"), ("outcome", "ok")];
    let provider = [("provider", "scripted")];

    // Before anything ran: nothing recorded of runs or tools.
    let (status, before) = get(&serve, "/metrics", Some(&token));
    assert_eq!(status, 200, "{before}");
    assert_eq!(sample(&before, "shiitake_runs_started_total", &[]), None);

    let chatting = serve.clone();
    let chat =
        std::thread::spawn(move || chatting.chat("When is the launch?\n", Duration::from_secs(60)));
    // During the run: both reads done, the last model call paused.
    let during = scrape_until(&serve, &token, |scrape| {
        sample(scrape, "shiitake_tool_call_seconds_count", &tool) == Some(2.0)
    });
    assert_eq!(
        sample(
            &during,
            "shiitake_commands_accepted_total",
            &[("kind", "prompt")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&during, "shiitake_runs_started_total", &[]),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &during,
            "shiitake_runs_settled_total",
            &[("outcome", "completed")]
        ),
        None,
        "the run has not settled:\n{during}"
    );
    assert_eq!(
        sample(&during, "shiitake_model_call_seconds_count", &provider),
        Some(2.0),
        "two model calls answered, the third is paused:\n{during}"
    );
    let commits_during = sample(&during, "shiitake_store_commit_seconds_count", &[]).unwrap();
    assert!(
        commits_during >= 4.0,
        "prompt, run start, two results:\n{during}"
    );
    assert!(
        sample(&during, "shiitake_sse_subscribers", &[]).unwrap() >= 1.0,
        "chat watches the Session:\n{during}"
    );

    let output = chat.join().unwrap();
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("[run completed]"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let after = scrape_until(&serve, &token, |scrape| {
        sample(
            scrape,
            "shiitake_runs_settled_total",
            &[("outcome", "completed")],
        )
        .is_some()
    });
    assert_eq!(
        sample(
            &after,
            "shiitake_runs_settled_total",
            &[("outcome", "completed")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&after, "shiitake_runs_started_total", &[]),
        Some(1.0)
    );
    assert_eq!(
        sample(&after, "shiitake_tool_call_seconds_count", &tool),
        Some(2.0)
    );
    assert_eq!(
        sample(&after, "shiitake_model_call_seconds_count", &provider),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &after,
            "shiitake_model_first_token_seconds_count",
            &provider
        ),
        Some(3.0)
    );
    // The paused call took at least its pause: its time is in the buckets above 2.5 s.
    assert_eq!(
        sample(
            &after,
            "shiitake_model_call_seconds_bucket",
            &[("provider", "scripted"), ("le", "2.5")]
        ),
        Some(2.0),
        "{after}"
    );
    assert!(sample(&after, "shiitake_store_commit_seconds_count", &[]).unwrap() > commits_during);
    assert_eq!(
        sample(&after, "shiitake_queued_prompts", &[]),
        Some(0.0),
        "{after}"
    );
    assert_eq!(sample(&after, "shiitake_open_sessions", &[]), Some(1.0));
    assert!(
        !after.contains("ses_"),
        "no Session id in any label:\n{after}"
    );

    // Refused without the operator's token, and with a wrong one.
    assert_eq!(get(&serve, "/metrics", None).0, 401);
    assert_eq!(get(&serve, "/metrics", Some("not-the-token")).0, 401);
}

#[test]
fn without_metrics_there_is_no_scrape() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("data"), dir.path(), free_port(), None);
    let (status, body) = get(&serve, "/metrics", Some(&token(&serve)));
    assert_eq!(status, 404, "{body}");
}

#[test]
fn every_json_log_line_is_an_object_and_a_run_s_lines_name_its_session_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let (workspace, model) = reading_model(dir.path());
    let data_dir = dir.path().join("data");
    let mut command = Command::new(binary());
    command
        .args([
            "serve",
            "--port",
            &free_port().to_string(),
            "--model",
            &model,
        ])
        .args(["--log-format", "json"])
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--workspace")
        .arg(&workspace)
        .env("SHIITAKE_LOG", "shiitake_core=debug,info")
        .env("CLICOLOR_FORCE", "1")
        .env_remove("SHIITAKE_MODEL")
        .stderr(Stdio::piped());
    let mut serve = Serve::spawn(command, &data_dir);
    let logs = serve.collect_stderr();
    let output = serve.chat("When is the launch?\n", Duration::from_secs(60));
    let chatted = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(chatted.contains("[run completed]"), "{chatted}");
    let token = token(&serve);
    let (_, inbox) = get(&serve, "/v1/sessions", Some(&token));
    let inbox: Value = serde_json::from_str(&inbox).unwrap();
    let session_id = inbox["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, snapshot) = get(
        &serve,
        &format!("/v1/sessions/{session_id}/snapshot"),
        Some(&token),
    );
    serve.kill();
    let logs = logs.lock().unwrap().clone();

    let lines: Vec<Value> = logs
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line:?}")))
        .collect();
    assert!(!logs.contains('\u{1b}'), "no colour codes in JSON");
    let run_lines: Vec<&Value> = lines
        .iter()
        .filter(|line| line["span"]["name"] == "run")
        .collect();
    assert_eq!(
        run_lines
            .iter()
            .filter(|line| line["message"] == "tool call")
            .count(),
        2,
        "{logs}"
    );
    let mut sessions = std::collections::BTreeSet::new();
    let mut runs = std::collections::BTreeSet::new();
    for line in &run_lines {
        assert!(
            line["level"].is_string() && line["timestamp"].is_string(),
            "{line}"
        );
        let spans = line["spans"].as_array().unwrap();
        let owner = spans.iter().find(|span| span["name"] == "owner").unwrap();
        sessions.insert(owner["session"].as_str().unwrap().to_owned());
        runs.insert(line["span"]["command"].as_str().unwrap().to_owned());
    }
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(runs.len(), 1, "{runs:?}");
    // The ids are the Session's and its prompt's, as the server reads them back.
    assert_eq!(sessions.first().unwrap(), &session_id);
    let run = runs.first().unwrap();
    assert!(
        snapshot.contains(&format!("\"{run}\"")),
        "{run} in {snapshot}"
    );
}

const NOTES_TOKEN: &str = "ops-token-77aa";

#[test]
fn tools_lists_the_file_tools_an_mcp_server_s_and_what_is_left_out() {
    let notes = mcp::OneTool {
        name: "create-note",
        description: "Creates a note.",
        argument: "title",
        answer: Arc::new(|title| json!({ "id": 1, "title": title })),
    };
    let (notes_url, _stop_notes) = mcp::serve(notes.clone(), Some(NOTES_TOKEN));
    let (locked_url, _stop_locked) = mcp::serve(notes, Some("some-other-token"));
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().display().to_string();
    let header = "header=Authorization:Bearer ${NOTES_TOKEN}";
    let (notes_arg, locked_arg) = (
        format!("notes={notes_url},{header}"),
        format!("locked={locked_url},{header}"),
    );
    let data_dir = dir.path().join("data");
    let mut command = Command::new(binary());
    command
        .args([
            "serve",
            "--port",
            &free_port().to_string(),
            "--model",
            "none",
        ])
        .arg("--data-dir")
        .arg(&data_dir)
        .args([
            "--workspace",
            &workspace,
            "--mcp",
            &notes_arg,
            "--mcp",
            &locked_arg,
        ])
        .env("NOTES_TOKEN", NOTES_TOKEN)
        .env_remove("SHIITAKE_MODEL")
        .stderr(Stdio::null());
    let serve = Serve::spawn(command, &data_dir);
    let token = token(&serve);
    // Both servers answered (one connected, one refused): the list is settled.
    let deadline = Instant::now() + Duration::from_secs(30);
    let list = loop {
        let (status, body) = get(&serve, "/v1/tools", Some(&token));
        assert_eq!(status, 200, "{body}");
        let list: Value = serde_json::from_str(&body).unwrap();
        let has_notes = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["server"] == "notes");
        if has_notes && !list["leftOut"].as_array().unwrap().is_empty() {
            break list;
        }
        assert!(Instant::now() < deadline, "{list}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(list["profile"], "full");
    let tools = list["tools"].as_array().unwrap();
    let find = |name: &str| {
        tools
            .iter()
            .find(|tool| tool["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {list}"))
    };
    let read = find("files__read");
    assert_eq!(read["source"], "files");
    assert_eq!(read["path"], "files.read");
    assert_eq!(read["replay"], "safe");
    assert_eq!(read["extension"], "botanical-agent-home");
    assert_eq!(read["schema"]["type"], "object");
    let note = find("env__mcp__notes__create_note");
    assert_eq!(
        (
            &note["source"],
            &note["server"],
            &note["replay"],
            &note["schema"]["required"]
        ),
        (
            &json!("mcp"),
            &json!("notes"),
            &json!("unsafe"),
            &json!(["title"])
        )
    );
    assert!(
        !tools.iter().any(|tool| tool["server"] == "locked"),
        "{list}"
    );
    let left_out = list["leftOut"].as_array().unwrap();
    let locked = left_out
        .iter()
        .find(|left| left["name"] == "locked")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(locked["source"], "mcp");
    assert_eq!(locked["reason"], "unavailable");
    assert!(
        locked["detail"]
            .as_str()
            .unwrap()
            .contains("refused its credential (HTTP 401)"),
        "{locked}"
    );
    assert!(!list.to_string().contains(NOTES_TOKEN));

    // A small model is offered the compact set: the MCP server's tools are left out
    // as not offered, the file tools stay.
    let (status, body) = get(&serve, "/v1/tools?profile=small", Some(&token));
    assert_eq!(status, 200, "{body}");
    let small: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(small["profile"], "small");
    let names: Vec<&str> = small["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"files__read"), "{names:?}");
    assert!(
        !names.iter().any(|name| name.starts_with("env__mcp")),
        "{names:?}"
    );
    let notes_out = small["leftOut"]
        .as_array()
        .unwrap()
        .iter()
        .find(|left| left["name"] == "env.mcp.notes")
        .unwrap_or_else(|| panic!("{small}"));
    assert_eq!(notes_out["reason"], "not_offered");
    assert_eq!(notes_out["tools"], json!(["env__mcp__notes__create_note"]));

    // A profile that does not exist is refused; the list is the operator's.
    assert_eq!(get(&serve, "/v1/tools?profile=huge", Some(&token)).0, 400);
    assert_eq!(get(&serve, "/v1/tools", None).0, 401);
}

#[test]
fn the_tenant_label_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let output = Command::new(binary())
        .args(["serve", "--port", "0", "--model", "none", "--metrics"])
        .arg("--metrics-tenant-label")
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--workspace")
        .arg(dir.path())
        .env_remove("SHIITAKE_DATABASE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("serves every tenant") && stderr.contains("--metrics-tenant-label"),
        "{stderr}"
    );
    assert!(
        !data_dir.join("shiitake.db").exists(),
        "it opened the database"
    );
}
