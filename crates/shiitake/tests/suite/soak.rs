//! The soak: rounds of load against the real binary, each ended by a SIGKILL.
//!
//! Many Sessions get prompts with request ids; each Session has its own scripted
//! model (allowed with `--allow-model`), slow for even Sessions and fast for odd
//! ones, whose every run calls a file-changing MCP tool (`mark`, which appends the
//! Session's tag to a file and is not replay-safe) and then answers. Each round SIGKILLs `serve` while work runs,
//! restarts it on the same data directory, and resends every prompt whose answer
//! was lost with the same request id. At the end it checks, and prints:
//!
//! - lost: accepted prompts missing from their transcript (must be 0);
//! - doubled: prompts that appear more than once (must be 0);
//! - unsettled: accepted prompts without a terminal (must be 0);
//! - double results: tool calls with two results (must be 0);
//! - double executions: `mark` runs beyond the tool calls its Session committed
//!   (each committed call may run once; a call cut by the kill is answered
//!   "outcome unknown", never run again) (must be 0).
//!
//! `SHIITAKE_SOAK_ROUNDS` (default 2), `SHIITAKE_SOAK_SESSIONS` (4) and
//! `SHIITAKE_SOAK_PROMPTS` (3 per Session per round) size it; `cargo xtask soak
//! --rounds N` runs it against the release binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{binary, free_port, mcp};
use serde_json::{Value, json};
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_protocol::{
    AgentApi, ModelPreference, ModelSpec, PageLimit, PromptText, ReadOptions, RequestId,
    SendOptions, SessionApi, SessionId,
};

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The script of Session `k`: each run calls `mark {tag: "s<k>"}` once, then answers;
/// even Sessions think for 150 ms first (slow turns), odd ones answer at once.
/// `serve` keeps the script's place across runs and restarts, so the two turns cycle;
/// a run resumed after a kill goes on with the turn after the one the kill cut.
fn write_script(path: &Path, k: usize) {
    let delay = if k.is_multiple_of(2) { 150 } else { 0 };
    let script = json!({"model": "scripted", "cycle": true, "turns": [
        {"steps": [{"delay_ms": delay}, {"tool_call": {
            "name": "env__mcp__marks__mark",
            "arguments": {"tag": format!("s{k}")}
        }}]},
        {"steps": [{"delay_ms": delay / 3}, {"text": "marked"}]}
    ]});
    std::fs::write(path, serde_json::to_vec(&script).unwrap()).unwrap();
}

struct Server {
    child: Child,
    url: String,
}

fn start_serve(data: &Path, workspace: &Path, port: u16, models: &[String], marks: &str) -> Server {
    let mut command = Command::new(binary());
    command.args(["serve", "--port", &port.to_string(), "--model", &models[0]]);
    for model in &models[1..] {
        command.args(["--allow-model", model]);
    }
    let mut child = command
        .arg("--data-dir")
        .arg(data)
        .arg("--workspace")
        .arg(workspace)
        .arg("--mcp")
        .arg(format!("marks={marks}"))
        .env_remove("SHIITAKE_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (marks_tx, marks_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if std::env::var_os("SHIITAKE_SOAK_VERBOSE").is_some() {
                eprintln!("{line}");
            }
            if let Some(url) = line.strip_prefix("shiitake: listening on ") {
                let _ = tx.send(url.to_owned());
            }
            if line.starts_with("shiitake: MCP server connected: marks ") {
                let _ = marks_tx.send(());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("serve started");
    // MCP servers connect in the background: new prompts wait for `mark` to be there.
    marks_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the marks server connected");
    Server { child, url }
}

fn client(url: &str, data: &Path) -> RemoteAgent {
    let token = std::fs::read_to_string(data.join("token")).unwrap();
    RemoteAgent::new(ClientOptions::new(url).with_token(token.trim())).unwrap()
}

/// Every message and terminal of a Session, oldest first, as JSON.
async fn history(agent: &RemoteAgent, session: &SessionId) -> (Vec<Value>, Vec<Value>, bool) {
    let session = agent.session(session.clone());
    let mut messages = Vec::new();
    let mut terminals = Vec::new();
    let mut before = None;
    let mut idle = false;
    loop {
        let options = ReadOptions {
            limit: Some(PageLimit::new(200).unwrap()),
            before: before.clone(),
            ..ReadOptions::default()
        };
        let snapshot = session.read(options).await.unwrap();
        let page = serde_json::to_value(&snapshot).unwrap();
        if before.is_none() {
            idle = page["activity"]["queue"]["state"] == "idle";
        }
        let mut page_messages = page["messages"].as_array().cloned().unwrap_or_default();
        page_messages.extend(messages);
        messages = page_messages;
        let mut page_terminals = page["terminals"].as_array().cloned().unwrap_or_default();
        page_terminals.extend(terminals);
        terminals = page_terminals;
        match (snapshot.has_more, snapshot.oldest_cursor.flatten()) {
            (true, Some(cursor)) => before = Some(cursor),
            _ => return (messages, terminals, idle),
        }
    }
}

/// The figures the soak prints and asserts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Figures {
    accepted: usize,
    lost: usize,
    doubled: usize,
    unsettled: usize,
    double_results: usize,
    tool_results: usize,
    not_completed: usize,
    marks: usize,
    double_executions: usize,
}

#[test]
fn soak_rounds_of_sigkill_lose_and_double_nothing() {
    let rounds = setting("SHIITAKE_SOAK_ROUNDS", 2);
    let sessions = setting("SHIITAKE_SOAK_SESSIONS", 4);
    let prompts = setting("SHIITAKE_SOAK_PROMPTS", 3);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let marks_file = dir.path().join("marks.txt");
    let (marks, _stop_marks) = mcp::serve_marks(marks_file.clone());
    let models: Vec<String> = (0..sessions)
        .map(|k| {
            let script = dir.path().join(format!("script-{k}.json"));
            write_script(&script, k);
            format!("scripted:{}", script.display())
        })
        .collect();
    let port = free_port();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Tool calls committed per Session tag: each may have run `mark` at most once.
    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    let started = Instant::now();

    // Every prompt sent: (session, request id, text); the answers received.
    let mut sent: Vec<(SessionId, String, String)> = Vec::new();
    let mut answered: BTreeMap<String, String> = BTreeMap::new();
    let mut session_ids: Vec<SessionId> = Vec::new();

    for round in 0..=rounds {
        let server = start_serve(&data, &workspace, port, &models, &marks);
        let agent = client(&server.url, &data);
        let mut child = Some(server.child);
        if session_ids.is_empty() {
            runtime.block_on(async {
                for (k, model) in models.iter().enumerate().take(sessions) {
                    let id = agent
                        .create_session(RequestId::new(format!("soak-session-{k}")).unwrap())
                        .await
                        .unwrap();
                    let preference = ModelPreference {
                        model: ModelSpec::new(model.clone()).unwrap(),
                        reasoning: None,
                    };
                    agent
                        .session(id.clone())
                        .set_model_preference(preference)
                        .await
                        .unwrap();
                    session_ids.push(id);
                }
            });
        }
        // Every round but the last ends in a SIGKILL under load: while prompts are
        // still being sent, some runs mid-model-call, some mid-tool.
        let killer = match child.take() {
            Some(mut victim) if round < rounds => {
                let delay = Duration::from_millis(150 + 97 * (round as u64 % 5));
                Some(std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    let _ = victim.kill();
                    let _ = victim.wait();
                }))
            }
            other => {
                child = other;
                None
            }
        };
        runtime.block_on(async {
            // Resend what was never answered, with the same request ids.
            for (session, request_id, text) in &sent {
                if answered.contains_key(request_id) {
                    continue;
                }
                let options = SendOptions {
                    request_id: Some(RequestId::new(request_id.clone()).unwrap()),
                    ..SendOptions::default()
                };
                let accepted = agent
                    .session(session.clone())
                    .send(PromptText::new(text.clone()).unwrap(), options)
                    .await;
                match accepted {
                    Ok(accepted) => {
                        answered.insert(request_id.clone(), accepted.command_id.to_string());
                    }
                    // Killed again before it answered: the next round resends.
                    Err(_) if round < rounds => {}
                    Err(error) => panic!("resending {request_id}: {error}"),
                }
            }
            if round == rounds {
                return;
            }
            for p in 0..prompts {
                for (k, session) in session_ids.iter().enumerate() {
                    let request_id = format!("soak-r{round}-s{k}-p{p}");
                    let text = format!("prompt {request_id}");
                    sent.push((session.clone(), request_id.clone(), text.clone()));
                    let options = SendOptions {
                        request_id: Some(RequestId::new(request_id.clone()).unwrap()),
                        ..SendOptions::default()
                    };
                    // The answer is lost when the kill lands first; the resend recovers it.
                    if let Ok(accepted) = agent
                        .session(session.clone())
                        .send(PromptText::new(text).unwrap(), options)
                        .await
                    {
                        answered.insert(request_id, accepted.command_id.to_string());
                    }
                }
            }
        });
        if let Some(killer) = killer {
            killer.join().unwrap();
            continue;
        }
        // The last round: wait until every Session is idle, then count.
        let figures = runtime.block_on(async {
            let deadline = Instant::now() + Duration::from_secs(180);
            loop {
                let mut all_idle = true;
                let mut figures = Figures {
                    accepted: answered.len(),
                    ..Figures::default()
                };
                let mut results: BTreeMap<String, usize> = BTreeMap::new();
                calls.clear();
                for (k, session) in session_ids.iter().enumerate() {
                    let (messages, terminals, idle) = history(&agent, session).await;
                    all_idle &= idle;
                    let mut texts: BTreeMap<String, usize> = BTreeMap::new();
                    // A result answers a call of the assistant message before it; call ids
                    // repeat across messages (each run's model numbers its own calls).
                    let mut asked_in = String::new();
                    for message in &messages {
                        let value = &message["value"];
                        match value["role"].as_str() {
                            Some("user") => {
                                let text = match &value["content"] {
                                    Value::String(text) => text.clone(),
                                    other => other.to_string(),
                                };
                                *texts.entry(text).or_default() += 1;
                            }
                            Some("assistant") => {
                                asked_in = message["id"].as_str().unwrap_or("").to_owned();
                                for block in value["content"].as_array().into_iter().flatten() {
                                    if block["type"] == "toolCall" {
                                        *calls.entry(format!("s{k}")).or_default() += 1;
                                    }
                                }
                            }
                            Some("toolResult") => {
                                if std::env::var_os("SHIITAKE_SOAK_VERBOSE").is_some() {
                                    eprintln!("tool result: {value}");
                                }
                                let id = format!(
                                    "{asked_in}/{}",
                                    value["toolCallId"].as_str().unwrap_or("")
                                );
                                *results.entry(id).or_default() += 1;
                            }
                            _ => {}
                        }
                    }
                    figures.not_completed += terminals
                        .iter()
                        .filter(|terminal| terminal["outcome"] != "completed")
                        .count();
                    let settled: BTreeSet<String> = terminals
                        .iter()
                        .filter_map(|terminal| terminal["commandId"].as_str().map(str::to_owned))
                        .collect();
                    for (owner, request_id, text) in &sent {
                        if owner != session {
                            continue;
                        }
                        match texts.get(text).copied().unwrap_or(0) {
                            0 => figures.lost += 1,
                            1 => {}
                            _ => figures.doubled += 1,
                        }
                        let settled_here = answered
                            .get(request_id)
                            .is_some_and(|command| settled.contains(command));
                        if !settled_here {
                            figures.unsettled += 1;
                        }
                    }
                }
                figures.double_results = results.values().filter(|&&n| n > 1).count();
                figures.tool_results = results.values().sum();
                if all_idle && figures.unsettled == 0 || Instant::now() > deadline {
                    break figures;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        if let Some(mut child) = child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let tags = std::fs::read_to_string(&marks_file).unwrap_or_default();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for tag in tags.lines() {
            *seen.entry(tag).or_default() += 1;
        }
        let figures = Figures {
            marks: tags.lines().count(),
            // A Session whose `mark` ran more often than its runs called it executed a call twice.
            double_executions: seen
                .iter()
                .map(|(tag, &ran)| ran.saturating_sub(calls.get(*tag).copied().unwrap_or(0)))
                .sum(),
            ..figures
        };
        println!(
            "soak: {rounds} rounds, {sessions} sessions, {} prompts accepted, {} tool results, \
             {} marks, {} runs not completed (interrupted or failed), in {:.1} s: \
             {} lost, {} doubled, {} unsettled, {} double results, {} double executions",
            figures.accepted,
            figures.tool_results,
            figures.marks,
            figures.not_completed,
            started.elapsed().as_secs_f64(),
            figures.lost,
            figures.doubled,
            figures.unsettled,
            figures.double_results,
            figures.double_executions
        );
        assert_eq!(figures.accepted, sent.len());
        assert!(figures.marks > 0, "the file-changing tool never ran");
        assert_eq!(
            (
                figures.lost,
                figures.doubled,
                figures.unsettled,
                figures.double_results,
                figures.double_executions
            ),
            (0, 0, 0, 0, 0),
            "{figures:?}"
        );
    }
}
