//! `shiitake chat` runs the server's human command flows from piped lines: `/help`
//! lists what the server advertises, `/answer` answers a question (the lines that
//! follow answer the flow's questions in order), `/plan` runs a catalog command,
//! and the footer after each run shows the open question and the plan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use shiitake_core::{Agent, AgentConfig, Durability, FixedModel, SqliteStore};
use shiitake_ext_question::{QuestionConfig, QuestionExtension, question_grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::{AgentApi, SessionApi};
use shiitake_server::{ServerConfig, Token, router};

const TOKEN: &str = "slash-flow-token-0123456789";

async fn served(turns: Vec<Turn>) -> (String, Arc<Agent>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        AgentConfig::new(Arc::new(FixedModel(model))),
    )
    .extension(
        QuestionExtension::new(QuestionConfig::default()).unwrap(),
        question_grants(),
    )
    .extension(
        shiitake_ext_plan::PlanExtension::new().unwrap(),
        shiitake_ext_plan::plan_grants(),
    )
    .open()
    .await
    .unwrap();
    let agent = Arc::new(agent);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(agent.clone(), ServerConfig::new(Token::new(TOKEN).unwrap()));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, agent, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_lines_run_help_answer_and_plan_flows() {
    let ask = json!({"mode": "continue", "questions": [{
        "header": "Database", "question": "Which database?",
        "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]}]});
    let plan = json!({"steps": [
        {"step": "Pick a database", "status": "in_progress"},
        {"step": "Write the schema", "status": "pending"}]});
    let (url, agent, dir) = served(vec![
        Turn::tool_call("plan__update_plan", plan),
        Turn::tool_call("question__ask", ask),
        Turn::text("I asked which database."),
        Turn::text("PostgreSQL it is."),
    ])
    .await;
    let mut chat = Command::new(support::binary())
        .args(["--url", &url, "--token", TOKEN, "--data-dir"])
        .arg(dir.path().join("cli"))
        .arg("chat")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    let stdout = chat.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut wait_for = |needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(line) = seen.iter().find(|line: &&String| line.contains(needle)) {
                return line.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => seen.push(line),
                Err(_) => panic!("no line with {needle:?} in:\n{}", seen.join("\n")),
            }
        }
    };
    writeln!(stdin, "/help").unwrap();
    wait_for("/answer — Answer a question the agent asked");
    wait_for("/plan");
    writeln!(stdin, "Set up the service").unwrap();
    let footer = wait_for("? [Database] Which database? — /answer");
    assert!(footer.starts_with("  "), "{footer}");
    wait_for("plan 0/2: Pick a database");
    writeln!(stdin, "/answer").unwrap();
    wait_for("[?] [Database] Which database?");
    wait_for("2) PostgreSQL");
    writeln!(stdin, "2").unwrap();
    wait_for("[ok] Answer [Database] PostgreSQL");
    let receipt = wait_for("[/answer] ");
    assert!(receipt.contains("\"delivery\":\"follow_up\""), "{receipt}");
    wait_for("assistant: PostgreSQL it is.");
    writeln!(stdin, "/plan clear").unwrap();
    let cleared = wait_for("[/plan] ");
    assert!(cleared.contains("\"cleared\":true"), "{cleared}");
    writeln!(stdin, "/nosuch").unwrap();
    wait_for("[/nosuch] no such command here; /help lists them");
    drop(stdin);
    let status = chat.wait().unwrap();
    assert!(status.success());

    let sessions = agent.list_sessions(None).await.unwrap();
    assert_eq!(sessions.sessions.len(), 1);
    let session = agent.session(sessions.sessions[0].session_id().clone());
    let snapshot = session
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    let texts: Vec<String> = snapshot
        .messages
        .iter()
        .filter_map(|m| match &m.value {
            shiitake_protocol::message::Message::User(user) => Some(format!("{:?}", user.content)),
            _ => None,
        })
        .collect();
    assert_eq!(texts.len(), 2, "the prompt and one follow-up: {texts:?}");
    assert!(texts[1].contains("Answer: PostgreSQL"), "{}", texts[1]);
}
