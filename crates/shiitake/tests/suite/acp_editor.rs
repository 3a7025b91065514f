//! `shiitake acp` driven by an editor this project did not write: the official ACP
//! Python SDK (`agent-client-protocol` from PyPI, `cargo xtask clients`), through its
//! client-side connection, against a running `serve` with a scripted model. A prompt
//! streams its tool call, the call's result and the answer, and ends `end_turn`; a
//! second prompt cancelled mid-answer ends `cancelled`; a new `shiitake acp` process
//! loads the Session and gets its transcript back as updates; a prompt to a Session id
//! that is not one is a JSON-RPC error, and the process goes on.
//!
//! Without the clients' Python (`SHIITAKE_CLIENTS_PYTHON`) the test prints a `SKIPPED`
//! line, or fails when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_test_services::Service;

use crate::support::clients::{Scene, json_lines};
use crate::support::{Serve, binary, free_port, script, wait_with_timeout};

/// The editor in `mode` against `scene`'s `serve`.
fn scene_editor(scene: &Scene, mode: &[&str]) -> Vec<Value> {
    editor_at(
        &scene.python,
        &scene.serve.url,
        &scene.token(),
        &scene.workspace,
        mode,
    )
}

/// Runs the SDK's editor against the server at `url` with `token` in `mode` (with its
/// arguments): the JSON lines it printed.
fn editor_at(python: &Path, url: &str, token: &str, workspace: &Path, mode: &[&str]) -> Vec<Value> {
    let workspace = workspace.display().to_string();
    let args = [binary(), url, token, workspace.as_str()]
        .into_iter()
        .chain(mode.iter().copied());
    json_lines(python, "acp_editor.py", args, Duration::from_secs(90))
}

/// The updates among `lines`.
fn updates(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter_map(|line| line.get("update")).collect()
}

/// The text of every `kind` chunk, run together.
fn chunks(updates: &[&Value], kind: &str) -> String {
    updates
        .iter()
        .filter(|update| update["sessionUpdate"] == kind)
        .filter_map(|update| update["content"]["text"].as_str())
        .collect()
}

/// The scripted model of the prompt scenario: a plan and a file read, the answer, then
/// a long answer that is cancelled.
fn prompt_turns() -> Value {
    json!({"model": "scripted", "turns": [
        {"steps": [
            {"tool_call": {"name": "plan__update_plan", "arguments": {"steps": [
                {"step": "Read the notes", "status": "in_progress"},
                {"step": "Say what they say", "status": "pending"}]}}},
            {"tool_call": {"name": "files__read", "arguments": {"path": "notes.txt"}}}
        ]},
        {"steps": [{"text": "The notes say PURPLE-42."}]},
        {"steps": [{"text": "Thinking it over"}, {"delay_ms": 30000}, {"text": " never"}]}
    ]})
}

/// What the prompt scenario must show (`acp_editor.py … prompt`); the Session's id.
fn assert_prompted(lines: &[Value]) -> String {
    let started = &lines[0]["initialize"];
    assert_eq!(started["protocolVersion"], 1, "{started}");
    assert_eq!(
        started["agentCapabilities"]["loadSession"], true,
        "{started}"
    );
    assert_eq!(started["agentInfo"]["name"], "shiitake", "{started}");
    let session = lines[1]["session"].as_str().unwrap().to_owned();
    assert!(session.starts_with("ses_"), "{session}");
    let streamed = updates(lines);
    let call = streamed
        .iter()
        .find(|update| update["sessionUpdate"] == "tool_call" && update["kind"] == "read")
        .unwrap_or_else(|| panic!("no tool call in {lines:?}"));
    assert_eq!(call["title"], "files__read: notes.txt");
    assert_eq!(call["kind"], "read");
    assert_eq!(call["rawInput"], json!({"path": "notes.txt"}));
    let result = streamed
        .iter()
        .find(|update| {
            update["sessionUpdate"] == "tool_call_update"
                && update["toolCallId"] == call["toolCallId"]
        })
        .unwrap_or_else(|| panic!("no tool result in {lines:?}"));
    assert_eq!(result["toolCallId"], call["toolCallId"]);
    assert_eq!(result["status"], "completed");
    assert!(result.to_string().contains("PURPLE-42"), "{result}");
    let answer = chunks(&streamed, "agent_message_chunk");
    assert!(
        answer.starts_with("The notes say PURPLE-42.Thinking it over"),
        "each piece once: {answer:?}"
    );
    let stops: Vec<&Value> = lines.iter().filter_map(|line| line.get("stop")).collect();
    assert_eq!(
        stops,
        [&json!("end_turn"), &json!("cancelled"), &json!("end_turn")],
        "{lines:?}"
    );
    assert!(!answer.contains("never"), "{answer:?}");
    // The plan the model wrote is the editor's plan.
    let plan = streamed
        .iter()
        .find(|update| update["sessionUpdate"] == "plan")
        .unwrap_or_else(|| panic!("no plan in {lines:?}"));
    assert_eq!(plan["entries"][0]["content"], "Read the notes");
    assert_eq!(plan["entries"][0]["status"], "in_progress");
    assert_eq!(plan["entries"][1]["status"], "pending");
    // The Agent's slash commands are the editor's; `/jobs` runs Home's list_jobs.
    let commands = streamed
        .iter()
        .find(|update| update["sessionUpdate"] == "available_commands_update")
        .unwrap_or_else(|| panic!("no commands in {lines:?}"));
    let names: Vec<&str> = commands["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|command| command["name"].as_str())
        .collect();
    for name in ["jobs", "kill", "plan", "approve"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    assert!(answer.ends_with(r#"{"jobs":[]}"#), "{answer:?}");
    let refused = lines.last().unwrap();
    assert!(refused.get("error").is_some(), "{lines:?}");

    session
}

#[test]
fn an_editor_prompts_streams_cancels_and_loads_a_session_over_acp() {
    let Some(scene) = Scene::start(&prompt_turns()) else {
        return;
    };
    let lines = scene_editor(&scene, &["prompt"]);
    let session = assert_prompted(&lines);
    // Another editor process loads the Session: its transcript comes back, and the
    // Agent's Sessions are listed with their titles.
    let lines = scene_editor(&scene, &["load", &session]);
    let listed = lines
        .iter()
        .find_map(|line| line.get("listed"))
        .unwrap_or_else(|| panic!("no list in {lines:?}"));
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["sessionId"] == session.as_str())
        .unwrap_or_else(|| panic!("{session} not listed: {listed}"));
    assert_eq!(row["cwd"], scene.workspace.display().to_string());
    assert!(row["updatedAt"].as_str().unwrap().ends_with('Z'), "{row}");
    let replayed = updates(&lines);
    assert!(
        chunks(&replayed, "user_message_chunk").starts_with("Read the notes.Think long."),
        "{lines:?}"
    );
    assert!(
        chunks(&replayed, "agent_message_chunk").starts_with("The notes say PURPLE-42."),
        "{lines:?}"
    );
    assert!(
        replayed
            .iter()
            .any(|update| update["sessionUpdate"] == "tool_call_update"
                && update["status"] == "completed"),
        "{lines:?}"
    );
}

/// A patch of `path` adding one line, as the scripted model writes it.
fn add_file(path: &str) -> Value {
    json!({"tool_call": {"name": "files__apply_patch", "arguments": {
        "patch": format!("*** Begin Patch\n*** Add File: {path}\n+made\n*** End Patch")}}})
}

/// The permission requests among `lines`.
fn permissions(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter_map(|line| line.get("permission"))
        .collect()
}

/// Approvals under the Local default (which asks before every patch): allowed once,
/// rejected, and one left unanswered by an editor that goes, which after a SIGKILL and
/// a restart of `serve` is asked again to the editor that loads the Session.
#[test]
fn approvals_reach_the_editor_as_permission_requests_and_outlive_it() {
    // The Local default asks before every patch.
    let turns = json!({"model": "scripted", "turns": [
        {"steps": [add_file("a.txt")]},
        {"steps": [add_file("b.txt")]},
        {"steps": [{"text": "One made, one refused."}]},
        {"steps": [add_file("c.txt")]},
        {"steps": [{"text": "Made after all."}]}
    ]});
    let Some(mut scene) = Scene::start(&turns) else {
        return;
    };
    let workspace = scene.workspace.clone();

    // Allowed once, then rejected.
    let lines = scene_editor(&scene, &["permissions", "allow_once", "reject_once"]);
    let asked = permissions(&lines);
    assert_eq!(asked.len(), 2, "{lines:?}");
    let options: Vec<&Value> = asked[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|option| &option["kind"])
        .collect();
    assert_eq!(
        options,
        [
            &json!("allow_once"),
            &json!("allow_always"),
            &json!("reject_once")
        ]
    );
    let calls: Vec<&Value> = updates(&lines)
        .into_iter()
        .filter(|update| update["sessionUpdate"] == "tool_call")
        .collect();
    assert_eq!(asked[0]["toolCall"]["toolCallId"], calls[0]["toolCallId"]);
    // The patch shows as the diff of the file it adds, in the editor's folder.
    let diff = &calls[0]["content"][0];
    assert_eq!(diff["type"], "diff", "{}", calls[0]);
    assert_eq!(diff["path"], workspace.join("a.txt").display().to_string());
    assert_eq!(diff["newText"], "made\n");
    assert_eq!(
        calls[0]["locations"][0]["path"],
        workspace.join("a.txt").display().to_string()
    );
    assert_eq!(asked[1]["toolCall"]["toolCallId"], calls[1]["toolCallId"]);
    assert!(
        asked[0]["toolCall"]["title"]
            .as_str()
            .unwrap()
            .starts_with("approve files__apply_patch?"),
        "{}",
        asked[0]
    );
    assert!(workspace.join("a.txt").exists(), "allowed once, it ran");
    assert!(!workspace.join("b.txt").exists(), "rejected, it never ran");
    let stops: Vec<&Value> = lines.iter().filter_map(|line| line.get("stop")).collect();
    assert_eq!(stops, [&json!("end_turn")], "{lines:?}");
    let session = lines[1]["session"].as_str().unwrap().to_owned();

    // The next request is left unanswered: the editor goes, the approval stays.
    let lines = scene_editor(&scene, &["permissions", "leave"]);
    assert_eq!(permissions(&lines).len(), 1, "{lines:?}");
    assert!(
        lines.iter().any(|line| line.get("left").is_some()),
        "{lines:?}"
    );
    let left_session = lines[1]["session"].as_str().unwrap().to_owned();
    assert!(!workspace.join("c.txt").exists());
    std::thread::sleep(Duration::from_millis(300));
    assert!(!workspace.join("c.txt").exists(), "nobody allowed it");

    // The host is killed and started again; another editor loads that Session: the
    // request comes again; allowed, the call runs.
    scene.restart();
    let lines = scene_editor(&scene, &["load", &left_session, "allow_once"]);
    let asked = permissions(&lines);
    assert_eq!(asked.len(), 1, "{lines:?}");
    // The run the answer let go on was followed to this editor after the load.
    let loaded_at = lines
        .iter()
        .position(|line| line.get("loaded").is_some())
        .unwrap();
    let after = updates(&lines[loaded_at..]);
    assert!(
        chunks(&after, "agent_message_chunk").contains("Made after all."),
        "{lines:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !workspace.join("c.txt").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the approval given after the load never let the call run: {lines:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_ne!(session, left_session);
}

/// The same editor against a Hub tenant's Agent (`shiitake acp --server HUB --token
/// TENANT`): the prompt scenario runs in the tenant's own folder, and another tenant's
/// token loads nothing of it.
#[test]
fn an_editor_drives_a_hub_tenants_agent_over_acp() {
    use crate::support::hub::{ScriptedHub, create_tenant, tenant_names, test_database};
    let Some(python) = Service::clients_python() else {
        return;
    };
    let Some(database) = test_database() else {
        return;
    };
    let (operator, tenant, other) = tenant_names("acp");
    let scripted = ScriptedHub::new(&database, &operator, &prompt_turns());
    let hub = scripted.process("data");
    let token = create_tenant(&hub, &tenant);
    let other_token = create_tenant(&hub, &other);
    let folder = scripted.root.join(&tenant);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("notes.txt"), "PURPLE-42\n").unwrap();

    let server = format!("server:{}", hub.url);
    let lines = editor_at(&python, &server, &token, &folder, &["prompt"]);
    let session = assert_prompted(&lines);

    // Another tenant's editor cannot load it: the Session is absent for it.
    let lines = editor_at(
        &python,
        &hub.url,
        &other_token,
        &folder,
        &["load", &session],
    );
    assert!(
        lines.iter().all(|line| line.get("loaded").is_none()),
        "another tenant loaded the Session: {lines:?}"
    );
    assert!(
        lines.iter().any(|line| line.get("load_error").is_some()),
        "{lines:?}"
    );
    assert!(
        updates(&lines)
            .iter()
            .all(|update| update["sessionUpdate"] != "user_message_chunk")
    );
}

/// A question the agent asks ends the editor's turn with the question and its
/// numbered options; the editor's next prompt ("2") is the answer, and the run that
/// asked goes on in that turn.
#[test]
fn a_question_ends_the_turn_and_the_next_prompt_answers_it() {
    let turns = json!({"model": "scripted", "turns": [
        {"steps": [{"tool_call": {"name": "question__ask", "arguments": {"questions": [
            {"header": "Store", "question": "Which database?", "options": [
                {"label": "SQLite"}, {"label": "PostgreSQL"}]}]}}}]},
        {"steps": [{"text": "Noted."}]}
    ]});
    let Some(scene) = Scene::start(&turns) else {
        return;
    };
    let lines = scene_editor(&scene, &["question", "2"]);
    let stops: Vec<&Value> = lines.iter().filter_map(|line| line.get("stop")).collect();
    assert_eq!(stops, [&json!("end_turn"), &json!("end_turn")], "{lines:?}");
    let said = chunks(&updates(&lines), "agent_message_chunk");
    assert!(
        said.contains("Which database?\n  1) SQLite\n  2) PostgreSQL\n"),
        "{said:?}"
    );
    assert!(said.ends_with("Noted."), "the run went on: {said:?}");
    let answered = updates(&lines)
        .into_iter()
        .find(|update| update["sessionUpdate"] == "tool_call_update")
        .unwrap_or_else(|| panic!("no result of the question in {lines:?}"));
    assert_eq!(answered["status"], "completed", "{answered}");
    assert!(answered.to_string().contains("PostgreSQL"), "{answered}");
}

/// A client's mistakes get JSON-RPC's own answers and the process goes on: a line that
/// is not JSON (`-32700`), a batch (`-32600`), an unknown method (`-32601`), a prompt
/// without its content (`-32602`); then `initialize` is answered, and every line on
/// stdout is a JSON-RPC message. Closing stdin ends the process cleanly.
#[test]
fn bad_input_gets_json_rpc_errors_and_nothing_but_protocol_on_stdout() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let serve = Serve::start(&dir.path().join("data"), &workspace, free_port(), None);
    let token = std::fs::read_to_string(serve.data_dir.join("token")).unwrap();
    let mut acp = Command::new(binary())
        .args(["--url", &serve.url, "--token", token.trim(), "acp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = acp.stdin.take().unwrap();
    let mut stdout = BufReader::new(acp.stdout.take().unwrap());
    let mut ask = |line: &str| -> Value {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap_or_else(|_| panic!("not JSON-RPC: {answer:?}"))
    };
    let garbage = ask("this is not json");
    assert_eq!(garbage["error"]["code"], -32700, "{garbage}");
    assert_eq!(garbage["id"], Value::Null);
    assert_eq!(ask("[1, 2]")["error"]["code"], -32600);
    let unknown = ask(r#"{"jsonrpc":"2.0","id":1,"method":"no/such","params":{}}"#);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    assert_eq!(unknown["id"], 1);
    let missing =
        ask(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"x"}}"#);
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let started =
        ask(r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}"#);
    assert_eq!(started["id"], 3);
    assert_eq!(started["result"]["protocolVersion"], 1, "{started}");
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(rest.is_empty(), "more on stdout: {rest:?}");
    let status = wait_with_timeout(acp, Duration::from_secs(10)).status;
    assert!(status.success(), "{status}");
}

/// An editor that starts `shiitake --data-dir D acp` with no `serve` running: `acp`
/// starts one on the data directory, in the editor's folder (its workspace), serves
/// the prompt scenario, and ends that `serve` when the editor leaves.
#[test]
fn acp_starts_a_serve_on_its_data_directory_when_none_answers() {
    let Some(python) = Service::clients_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "PURPLE-42\n").unwrap();
    let data = dir.path().join("data");
    let model = script(dir.path(), &prompt_turns());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/acp_editor.py");
    let child = Command::new(&python)
        .arg(script)
        .arg(binary())
        .arg(format!("data-dir:{}", data.display()))
        .arg("-")
        .arg(&workspace)
        .arg("prompt")
        .env("SHIITAKE_MODEL", &model)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_with_timeout(child, Duration::from_secs(120));
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    let logged = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{printed}\n{logged}");
    let lines: Vec<Value> = printed
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // No serve ran on the data directory before: the one that answered was started.
    assert_prompted(&lines);
    // The serve it started is gone with it: the data directory's lock is free.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let serving = crate::support::processes_with(&data.display().to_string())
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("serve"))
            })
            .count();
        if serving == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the started serve outlived the editor"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `session/load` of a Session longer than a page (50 messages) replays all of it, in
/// order, reading older pages back.
#[test]
fn load_replays_a_long_transcript_whole() {
    const PROMPTS: usize = 30;
    let turns: Vec<Value> = (0..PROMPTS)
        .map(|n| json!({"steps": [{"text": format!("answer {n}.")}]}))
        .collect();
    let Some(scene) = Scene::start(&json!({"model": "scripted", "turns": turns})) else {
        return;
    };
    let session = scene.serve.new_session();
    for n in 0..PROMPTS {
        scene.serve.send(&session, &format!("prompt {n}."));
    }
    scene.serve.watch_until_idle(&session);
    let lines = scene_editor(&scene, &["load", &session]);
    let replayed = updates(&lines);
    let said: String = (0..PROMPTS).map(|n| format!("prompt {n}.")).collect();
    let answered: String = (0..PROMPTS).map(|n| format!("answer {n}.")).collect();
    assert_eq!(chunks(&replayed, "user_message_chunk"), said, "{lines:?}");
    assert_eq!(chunks(&replayed, "agent_message_chunk"), answered);
}
