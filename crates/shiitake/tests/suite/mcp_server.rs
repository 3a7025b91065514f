//! An Agent as an MCP server, driven by a client this project did not write: the
//! official MCP Python SDK (`mcp` from PyPI, `cargo xtask clients`) over Streamable
//! HTTP with the bearer token, against a running `serve` with a scripted model. The
//! client lists the tools, gives work and receives progress and the final text; a
//! retried `prompt` with the same idempotency key starts nothing new; a question
//! reaches it as an elicitation whose answer lets the run go on, and so does an
//! approval; a client of the protocol before elicitation-in-results reads what is
//! needed and answers with the `answer` tool; wrong calls get the protocol's errors.
//! On a Hub of two processes, a tenant follows its work through either process and
//! another tenant reaches none of it.
//!
//! Without the clients' Python (`SHIITAKE_CLIENTS_PYTHON`) the tests print a `SKIPPED`
//! line, or fail when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_test_services::Service;

use crate::support::clients::{Scene, json_lines};

/// Runs the SDK's client against `url` with `token` in `mode`: the JSON lines it printed.
fn client(python: &Path, url: &str, token: &str, mode: &[&str]) -> Vec<Value> {
    let args = [url, token].into_iter().chain(mode.iter().copied());
    json_lines(python, "mcp_client.py", args, Duration::from_secs(90))
}

/// The client in `mode` against `scene`'s `serve`, at `/mcp`.
fn scene_client(scene: &Scene, mode: &[&str]) -> Vec<Value> {
    client(
        &scene.python,
        &format!("{}/mcp", scene.serve.url),
        &scene.token(),
        mode,
    )
}

fn results(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter_map(|line| line.get("result")).collect()
}

fn progress(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|line| line["progress"]["message"].as_str())
        .map(str::to_owned)
        .collect()
}

fn question_turns() -> Value {
    json!({"model": "scripted", "turns": [
        {"steps": [{"tool_call": {"name": "question__ask", "arguments": {"questions": [
            {"header": "Store", "question": "Which database?", "options": [
                {"label": "SQLite"}, {"label": "PostgreSQL"}]}]}}}]},
        {"steps": [{"text": "Noted."}]}
    ]})
}

#[test]
fn a_client_lists_the_tools_gives_work_and_a_retry_starts_nothing_new() {
    let turns = json!({"model": "scripted", "turns": [
        {"steps": [{"tool_call": {"name": "files__read", "arguments": {"path": "notes.txt"}}}]},
        {"steps": [{"text": "The notes say PURPLE-42."}]}
    ]});
    let Some(scene) = Scene::start(&turns) else {
        return;
    };
    let tools = scene_client(&scene, &["tools"]);
    let names: Vec<&str> = tools[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "prompt",
            "wait",
            "answer",
            "read",
            "list_sessions",
            "cancel",
            "abort"
        ]
    );
    assert_eq!(
        tools[0]["tools"][0]["inputSchema"]["required"],
        json!(["text"])
    );

    let lines = scene_client(&scene, &["prompt", "Read the notes.", "key-1"]);
    let results = results(&lines);
    assert_eq!(results.len(), 2, "{lines:?}");
    let first = &results[0]["structuredContent"];
    assert_eq!(first["status"], "completed", "{lines:?}");
    assert_eq!(first["text"], "The notes say PURPLE-42.");
    assert_eq!(results[0]["content"][0]["text"], "The notes say PURPLE-42.");
    assert_eq!(results[0]["isError"], false);
    // The retry with the same key is the same Session and the same run: the scripted
    // model has no third turn, so a second run would have failed.
    let second = &results[1]["structuredContent"];
    assert_eq!(second["sessionId"], first["sessionId"]);
    assert_eq!(second["commandId"], first["commandId"]);
    assert_eq!(second["status"], "completed");
    let said = progress(&lines);
    assert!(said.contains(&"calling files__read".to_owned()), "{said:?}");
    assert!(said.contains(&"files__read: done".to_owned()), "{said:?}");

    let session = first["sessionId"].as_str().unwrap();
    let read = scene_client(
        &scene,
        &["wait", session, first["commandId"].as_str().unwrap()],
    );
    assert_eq!(
        read[0]["result"]["structuredContent"]["text"],
        "The notes say PURPLE-42."
    );
}

#[test]
fn a_question_is_an_elicitation_and_its_answer_lets_the_run_go_on() {
    let Some(scene) = Scene::start(&question_turns()) else {
        return;
    };
    let lines = scene_client(&scene, &["elicit", "Pick a store.", "PostgreSQL"]);
    let asked: Vec<&Value> = lines
        .iter()
        .filter_map(|line| line.get("elicitation"))
        .collect();
    assert_eq!(asked.len(), 1, "{lines:?}");
    assert_eq!(asked[0]["mode"], "form");
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap()
            .contains("Which database?")
    );
    let field = &asked[0]["requestedSchema"]["properties"]["q1"];
    assert_eq!(field["title"], "Store", "{field}");
    assert!(
        field["description"]
            .as_str()
            .unwrap()
            .contains("SQLite, PostgreSQL")
    );
    let results = results(&lines);
    assert_eq!(
        results[0]["structuredContent"]["status"], "completed",
        "{lines:?}"
    );
    assert_eq!(results[0]["structuredContent"]["text"], "Noted.");
    // The question's result in the transcript carries the person's answer.
    let transcript = &results[1]["structuredContent"]["messages"];
    let answer = transcript
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .unwrap_or_else(|| panic!("no answer in {transcript}"));
    assert!(
        answer["text"].as_str().unwrap().contains("PostgreSQL"),
        "{answer}"
    );
}

#[test]
fn an_approval_is_an_elicitation_of_a_decision() {
    // The Local default asks before every patch.
    let patch = "*** Begin Patch\n*** Add File: made.txt\n+made\n*** End Patch\n";
    let turns = json!({"model": "scripted", "turns": [
        {"steps": [{"tool_call": {"name": "files__apply_patch", "arguments": {"patch": patch}}}]},
        {"steps": [{"text": "Made it."}]}
    ]});
    let Some(scene) = Scene::start(&turns) else {
        return;
    };
    let lines = scene_client(&scene, &["elicit", "Make the file.", "allow_once"]);
    let asked: Vec<&Value> = lines
        .iter()
        .filter_map(|line| line.get("elicitation"))
        .collect();
    assert_eq!(asked.len(), 1, "{lines:?}");
    let field = &asked[0]["requestedSchema"]["properties"]["decision"];
    assert_eq!(
        field["enum"],
        json!(["allow_once", "allow_session", "deny"]),
        "{field}"
    );
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("approve files__apply_patch?")
    );
    let results = results(&lines);
    assert_eq!(
        results[0]["structuredContent"]["text"], "Made it.",
        "{lines:?}"
    );
    assert_eq!(
        std::fs::read_to_string(scene.workspace.join("made.txt")).unwrap(),
        "made\n"
    );
}

#[test]
fn a_client_without_elicitation_reads_what_is_needed_and_answers_it() {
    let Some(scene) = Scene::start(&question_turns()) else {
        return;
    };
    let lines = scene_client(&scene, &["legacy", "Pick a store.", "2"]);
    let results = results(&lines);
    let waiting = &results[0]["structuredContent"];
    assert_eq!(waiting["status"], "input_required", "{lines:?}");
    assert_eq!(waiting["needs"]["kind"], "ask");
    assert!(
        waiting["needs"]["text"]
            .as_str()
            .unwrap()
            .contains("2) PostgreSQL")
    );
    let said = results[0]["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("Call `answer`"), "{said}");
    assert_eq!(results[1]["structuredContent"]["status"], "completed");
    assert_eq!(results[1]["structuredContent"]["text"], "Noted.");
    let transcript = &results[2]["structuredContent"]["messages"];
    let users: Vec<&Value> = transcript
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .collect();
    assert_eq!(
        users.len(),
        1,
        "one prompt, answered in place: {transcript}"
    );
}

#[test]
fn wrong_calls_get_the_protocols_errors_and_the_server_goes_on() {
    let Some(scene) = Scene::start(&question_turns()) else {
        return;
    };
    let lines = scene_client(&scene, &["bad"]);
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert!(
        lines[0]["error"]
            .as_str()
            .unwrap()
            .contains("no tool named \"nope\""),
        "{lines:?}"
    );
    let errors: Vec<(&str, String)> = lines[1..]
        .iter()
        .map(|line| {
            assert_eq!(line["result"]["isError"], true, "{line}");
            (
                line["tool"].as_str().unwrap(),
                line["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    assert!(errors[0].1.contains("expected a string"), "{errors:?}");
    assert!(errors[1].1.contains("unknown field `colour`"), "{errors:?}");
    assert!(errors[2].1.contains("129 bytes"), "{errors:?}");
    assert!(errors[3].1.starts_with("not_found"), "{errors:?}");
    assert!(errors[4].1.contains("must be 1 to 3600"), "{errors:?}");

    // Raw bodies that are not JSON-RPC, past the bound, or without the token.
    let url = format!("{}/mcp", scene.serve.url);
    let token = std::fs::read_to_string(scene.serve.data_dir.join("token")).unwrap();
    let post = |body: Vec<u8>, token: Option<&str>| {
        let mut command = Command::new("curl");
        command.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"]);
        command.args(["-H", "content-type: application/json"]);
        command.args(["-H", "accept: application/json, text/event-stream"]);
        if let Some(token) = token {
            command.args(["-H", &format!("authorization: Bearer {}", token.trim())]);
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), body).unwrap();
        command
            .arg("--data-binary")
            .arg(format!("@{}", file.path().display()))
            .arg(&url);
        String::from_utf8(command.output().unwrap().stdout).unwrap()
    };
    assert_eq!(post(b"{not json".to_vec(), Some(&token)), "400");
    assert_eq!(post(vec![b' '; 300 * 1024], Some(&token)), "413");
    assert_eq!(post(b"{}".to_vec(), None), "401");
    // Still serving.
    let tools = scene_client(&scene, &["reach"]);
    assert_eq!(tools[0]["reached"], true, "{tools:?}");
}

/// On a Hub of two processes, a tenant gives work through one and follows it through
/// the other; another tenant's token reaches neither that Agent's endpoint nor its
/// Sessions through its own.
#[test]
fn on_a_hub_a_tenant_reaches_only_its_own_agent_over_mcp() {
    use crate::support::hub::{ScriptedHub, create_tenant, tenant_names, test_database};
    let Some(python) = Service::clients_python() else {
        return;
    };
    let Some(database) = test_database() else {
        return;
    };
    let (operator, tenant, other) = tenant_names("mcp");
    let hub = ScriptedHub::new(
        &database,
        &operator,
        &json!({"model": "scripted", "turns": [{"steps": [{"text": "Done for you."}]}]}),
    );
    let (one, two) = (hub.process("one"), hub.process("two"));
    let token = create_tenant(&one, &tenant);
    let other_token = create_tenant(&one, &other);

    let own = format!("{}/v1/agents/{tenant}/mcp", one.url);
    let lines = client(&python, &own, &token, &["prompt", "Do it.", "hub-key"]);
    let done = &results(&lines)[0]["structuredContent"];
    assert_eq!(done["text"], "Done for you.", "{lines:?}");
    let (session, command) = (
        done["sessionId"].as_str().unwrap(),
        done["commandId"].as_str().unwrap(),
    );

    // The same run through the other process, at the tenant's default endpoint.
    let lines = client(
        &python,
        &format!("{}/mcp", two.url),
        &token,
        &["wait", session, command],
    );
    assert_eq!(
        lines[0]["result"]["structuredContent"]["text"], "Done for you.",
        "{lines:?}"
    );

    // Another tenant: the Agent's endpoint is absent, and the Session through its own.
    let lines = client(
        &python,
        &format!("{}/v1/agents/{tenant}/mcp", two.url),
        &other_token,
        &["reach"],
    );
    // The SDK reads the 404 as JSON-RPC's `Not Found`.
    assert!(
        lines[0]["refused"].as_str().unwrap().contains("Not Found"),
        "{lines:?}"
    );
    let lines = client(
        &python,
        &format!("{}/mcp", two.url),
        &other_token,
        &["wait", session, command],
    );
    let answer = &lines[0]["result"];
    assert_eq!(answer["isError"], true, "{lines:?}");
    assert!(
        answer["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("not_found"),
        "{answer}"
    );
}

/// Work given without waiting is followed, queued work taken back, running work
/// stopped: `prompt` with `wait: false` answers `queued`, a `wait` shorter than the run
/// answers `running`, `cancel` takes back a prompt queued behind it, `abort` stops the
/// run, whose `wait` then answers how it ended.
#[test]
fn work_is_queued_followed_cancelled_and_aborted() {
    let turns = json!({"model": "scripted", "turns": [
        {"steps": [{"text": "Thinking it over"}, {"delay_ms": 30000}, {"text": " never"}]}
    ]});
    let Some(scene) = Scene::start(&turns) else {
        return;
    };
    let lines = scene_client(&scene, &["stop", "Think long."]);
    let results = results(&lines);
    let status = |n: usize| {
        results[n]["structuredContent"]["status"]
            .as_str()
            .unwrap_or("")
    };
    assert_eq!(status(0), "queued", "{lines:?}");
    assert_eq!(status(1), "running", "{lines:?}");
    assert!(
        results[1]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("call `wait`"),
        "{lines:?}"
    );
    assert_eq!(status(2), "queued", "{lines:?}");
    // Without a key, a second prompt is its own command.
    assert_ne!(
        results[2]["structuredContent"]["commandId"],
        results[0]["structuredContent"]["commandId"]
    );
    let sessions = &results[3]["structuredContent"]["sessions"];
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    // The wire's cancel outcome: `accepted` (it was still waiting), not `too_late`.
    assert_eq!(
        results[4]["structuredContent"]["status"], "accepted",
        "{lines:?}"
    );
    assert_eq!(
        results[5]["structuredContent"]["aborted"], true,
        "{lines:?}"
    );
    let ended = status(6);
    assert!(ended == "cancelled" || ended == "interrupted", "{lines:?}");
}
