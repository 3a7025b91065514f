//! Shared test harness: a real SQLite file in a temp dir, the scripted model, real tools.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
};
use shiitake_core::{Agent, AgentConfig, Durability, FixedModel, RetryPolicy, SqliteStore};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;
use tempfile::TempDir;

/// One Agent on a fresh database, with the scripted model and the test tools.
pub struct Harness {
    pub agent: Agent,
    pub model: Arc<ScriptedModel>,
    pub tools: Arc<TestTools>,
    pub dir: TempDir,
}

/// Counters the test tools bump, so tests can see what ran.
#[derive(Default)]
pub struct TestTools {
    pub echo_calls: AtomicUsize,
    pub slow_started: AtomicUsize,
    pub slow_cancelled: AtomicUsize,
}

pub fn db_path(dir: &Path) -> PathBuf {
    dir.join("agent.db")
}

pub fn config(model: Arc<ScriptedModel>) -> AgentConfig {
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 3,
        initial_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
    };
    config
}

/// The tools every harness offers: `test.echo` (replay-safe) and `test.slow` (sleeps until cancelled).
pub async fn catalog(counters: Arc<TestTools>) -> Arc<Catalog> {
    let echo_counter = counters.clone();
    let echo = Operation::from_fn(
        OperationName::new("echo").unwrap(),
        "Echoes its input.",
        move |input, _ctx| {
            let counter = echo_counter.clone();
            async move {
                counter.echo_calls.fetch_add(1, Ordering::SeqCst);
                Ok(json!({ "echo": input }))
            }
        },
    )
    .with_replay(Replay::Safe);
    let slow_counter = counters.clone();
    let slow = Operation::from_fn(
        OperationName::new("slow").unwrap(),
        "Waits a long time.",
        move |_input, ctx| {
            let counter = slow_counter.clone();
            let token = ctx.cancellation().clone();
            async move {
                counter.slow_started.fetch_add(1, Ordering::SeqCst);
                tokio::select! {
                    () = token.cancelled() => {
                        counter.slow_cancelled.fetch_add(1, Ordering::SeqCst);
                        Ok(Value::from("cancelled"))
                    }
                    () = tokio::time::sleep(Duration::from_secs(30)) => Ok(Value::from("done")),
                }
            }
        },
    );
    let module = Module::new(ModulePath::new("test").unwrap(), "Test tools.")
        .with_operation(echo)
        .unwrap()
        .with_operation(slow)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("test"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

impl Harness {
    pub async fn new(turns: Vec<Turn>) -> Self {
        Self::with_script(Script::new(turns)).await
    }

    pub async fn with_script(script: Script) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(ScriptedModel::new(script));
        let tools = Arc::new(TestTools::default());
        let agent = open_agent(&dir, model.clone(), tools.clone()).await;
        Self {
            agent,
            model,
            tools,
            dir,
        }
    }

    /// Closes the Agent and opens a new one on the same file with a new script.
    pub async fn reopen(self, turns: Vec<Turn>) -> Self {
        self.agent.close().await.unwrap();
        let model = Arc::new(ScriptedModel::new(Script::new(turns)));
        let agent = open_agent(&self.dir, model.clone(), self.tools.clone()).await;
        Self {
            agent,
            model,
            tools: self.tools,
            dir: self.dir,
        }
    }

    pub async fn session(&self) -> shiitake_core::LocalSession {
        let id = self
            .agent
            .create_session(RequestId::new(format!("create-{}", ulid_like())).unwrap())
            .await
            .unwrap();
        self.agent.session(id)
    }
}

pub async fn open_agent(dir: &TempDir, model: Arc<ScriptedModel>, tools: Arc<TestTools>) -> Agent {
    let store = SqliteStore::open(&db_path(dir.path()), Durability::Normal)
        .await
        .unwrap();
    Agent::open(Arc::new(store), catalog(tools).await, config(model))
        .await
        .unwrap()
}

fn ulid_like() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

pub fn text(value: &str) -> PromptText {
    PromptText::new(value).unwrap()
}

pub fn request(value: &str) -> RequestId {
    RequestId::new(value).unwrap()
}

pub async fn send(session: &impl SessionApi, prompt: &str) -> CommandId {
    session
        .send(text(prompt), SendOptions::default())
        .await
        .unwrap()
        .command_id
}

pub async fn steer(session: &impl SessionApi, prompt: &str) -> CommandId {
    let options = SendOptions {
        delivery: Some(PromptDelivery::Steer),
        request_id: None,
    };
    session
        .send(text(prompt), options)
        .await
        .unwrap()
        .command_id
}

/// Waits (bounded) until the command has a terminal; returns it.
pub async fn terminal_of(session: &impl SessionApi, command_id: &CommandId) -> SessionTerminal {
    tokio::time::timeout(Duration::from_secs(20), async {
        let watch = session.watch(ReadOptions::default()).await.unwrap();
        if let Some(found) = watch
            .snapshot
            .terminals
            .iter()
            .find(|t| &t.command_id == command_id)
        {
            return found.clone();
        }
        let mut changes = watch.changes;
        while let Some(frame) = changes.next().await {
            match frame.unwrap() {
                SessionFrame::Update(update) => {
                    if let Some(found) = update
                        .terminals
                        .iter()
                        .find(|t| &t.command_id == command_id)
                    {
                        return found.clone();
                    }
                }
                SessionFrame::Reset(reset) => {
                    if let Some(found) = reset
                        .baseline
                        .terminals
                        .iter()
                        .find(|t| &t.command_id == command_id)
                    {
                        return found.clone();
                    }
                }
                SessionFrame::Progress(_) => {}
            }
        }
        panic!("the frame stream ended before {command_id} settled");
    })
    .await
    .expect("the command settled in time")
}

/// The messages of the selected lineage (up to 200), oldest first.
pub async fn transcript(session: &impl SessionApi) -> Vec<shiitake_protocol::message::Message> {
    let options = ReadOptions {
        limit: Some(PageLimit::new(200).unwrap()),
        ..ReadOptions::default()
    };
    session
        .read(options)
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|m| m.value)
        .collect()
}

/// The role and main text of each message, for whole-value comparisons.
pub fn outline(messages: &[shiitake_protocol::message::Message]) -> Vec<String> {
    use shiitake_protocol::message::{InputContent, Message, UserContent};
    messages
        .iter()
        .map(|message| match message {
            Message::User(user) => match &user.content {
                UserContent::Text(text) => format!("user: {text}"),
                UserContent::Blocks(_) => "user: [blocks]".to_owned(),
            },
            Message::Assistant(assistant) => {
                let calls: Vec<_> = assistant.tool_calls().map(|c| c.name.clone()).collect();
                if calls.is_empty() {
                    format!("assistant: {}", assistant.text())
                } else {
                    format!("assistant: {} -> {}", assistant.text(), calls.join(","))
                }
            }
            Message::ToolResult(result) => {
                let text: String = result
                    .content
                    .iter()
                    .map(|c| match c {
                        InputContent::Text(t) => t.text.clone(),
                        InputContent::Image(_) => "[image]".into(),
                    })
                    .collect();
                format!(
                    "tool {}{}: {text}",
                    result.tool_name,
                    if result.is_error { " (error)" } else { "" }
                )
            }
        })
        .collect()
}
