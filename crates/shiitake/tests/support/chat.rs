//! A `shiitake chat` with piped stdin against an in-test Agent (the question, plan and
//! goal extensions, and whatever a test adds) behind a real server on 127.0.0.1.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiitake_core::{Agent, AgentBuilder, AgentConfig, FixedModel};
use shiitake_ext_question::QuestionConfig;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_server::{ServerConfig, Token, router};
use shiitake_store_sqlite::{Durability, SqliteStore};

/// The token of the servers [`served`] starts.
pub const TOKEN: &str = "slash-flow-token-0123456789";

/// An Agent with the question, plan and goal extensions (and what `more` adds) on the
/// scripted `turns`, served on a free port: its URL, the Agent and its directory.
pub async fn served(
    turns: Vec<Turn>,
    more: impl FnOnce(AgentBuilder) -> AgentBuilder,
) -> (String, Arc<Agent>, tempfile::TempDir) {
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
    .kit_extension(shiitake_ext_question::extension(QuestionConfig::default()).unwrap())
    .kit_extension(shiitake_ext_plan::extension().unwrap())
    .kit_extension(shiitake_ext_goal::extension().unwrap());
    let agent = more(agent).open().await.unwrap();
    let agent = Arc::new(agent);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(agent.clone(), ServerConfig::new(Token::new(TOKEN).unwrap()));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, agent, dir)
}

/// A `shiitake chat` against `url` with piped stdin, and a function that waits for a
/// stdout line containing a needle (and returns it).
pub fn piped_chat(
    url: &str,
    token: &str,
    dir: &std::path::Path,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    impl FnMut(&str) -> String,
) {
    let mut chat = Command::new(super::binary())
        .args(["--url", url, "--token", token, "--data-dir"])
        .arg(dir.join("cli"))
        .arg("chat")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = chat.stdin.take().unwrap();
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
    let wait_for = move |needle: &str| {
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
    (chat, stdin, wait_for)
}
