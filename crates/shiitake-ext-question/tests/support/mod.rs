//! A real Agent (SQLite in a temp dir, the scripted model) with the question extension.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_ext_question::contract::{AskView, QuestionContract, QuestionProjection};
use shiitake_ext_question::{QuestionConfig, QuestionExtension, question_grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::{ExtensionViewV0, view};
use shiitake_protocol::message::{InputContent, Message};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

/// 2026-11-30T00:00:00Z, where paused clocks start.
pub const START: u64 = 1_764_460_800_000;

pub struct Setup {
    pub agent: Agent,
    pub model: Arc<ScriptedModel>,
    pub clock: Arc<ManualClock>,
    pub dir: tempfile::TempDir,
}

pub fn config(model: Arc<ScriptedModel>, clock: Arc<ManualClock>) -> AgentConfig {
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 2,
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
    };
    config.clock = clock;
    config
}

pub async fn open_at(
    path: &Path,
    model: Arc<ScriptedModel>,
    clock: Arc<ManualClock>,
    question: QuestionConfig,
    tune: impl FnOnce(&mut AgentConfig),
) -> Agent {
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let mut config = config(model, clock);
    tune(&mut config);
    Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    )
    .extension(QuestionExtension::new(question).unwrap(), question_grants())
    .open()
    .await
    .unwrap()
}

pub async fn setup(turns: Vec<Turn>) -> Setup {
    setup_with(turns, QuestionConfig::default(), |_| {}).await
}

pub async fn setup_with(
    turns: Vec<Turn>,
    question: QuestionConfig,
    tune: impl FnOnce(&mut AgentConfig),
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let clock = ManualClock::new(START);
    let agent = open_at(
        &dir.path().join("agent.db"),
        model.clone(),
        clock.clone(),
        question,
        tune,
    )
    .await;
    Setup {
        agent,
        model,
        clock,
        dir,
    }
}

/// One question with two options, SQLite recommended.
pub fn database_question() -> Value {
    json!({
        "header": "Database",
        "question": "Which database should the service use?",
        "options": [
            {"label": "SQLite", "description": "One file, no server"},
            {"label": "PostgreSQL"}
        ]
    })
}

pub fn ask_call(extra: Value) -> Turn {
    let mut input = json!({"questions": [database_question()]});
    if let (Some(input), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
        input.extend(extra.clone());
    }
    Turn::tool_call("question__ask", input)
}

/// The decoded projection of a snapshot.
pub fn projection(snapshot: &SessionSnapshot) -> QuestionProjection {
    match view::<QuestionContract>(&snapshot.extensions).unwrap() {
        ExtensionViewV0::Running { value } => value.unwrap_or_default(),
        other => panic!("the question extension is not running: {other:?}"),
    }
}

/// Waits until `count` Asks are open and returns them.
pub async fn open_asks(session: &impl SessionApi, count: usize) -> Vec<AskView> {
    let decode = |slots: &SessionExtensionSlots| match view::<QuestionContract>(slots) {
        Ok(ExtensionViewV0::Running { value: Some(p) }) if p.asks.len() == count => Some(p.asks),
        _ => None,
    };
    wait_for(
        session,
        |snapshot| decode(&snapshot.extensions),
        |frame| match frame {
            SessionFrame::Update(update) => decode(&update.extensions),
            _ => None,
        },
    )
    .await
}

/// The text of every tool result, oldest first.
pub fn tool_results(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => Some(
                result
                    .content
                    .iter()
                    .map(|c| match c {
                        InputContent::Text(text) => text.text.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// The tool results as JSON values.
pub fn tool_values(messages: &[Message]) -> Vec<Value> {
    tool_results(messages)
        .iter()
        .map(|text| serde_json::from_str(text).unwrap_or(Value::String(text.clone())))
        .collect()
}

/// The text of every user message, oldest first.
pub fn user_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::User(user) => match &user.content {
                shiitake_protocol::message::UserContent::Text(text) => Some(text.clone()),
                other => Some(format!("{other:?}")),
            },
            _ => None,
        })
        .collect()
}

/// The inbox state of one Session.
pub async fn inbox_state(agent: &Agent, session_id: &SessionId) -> SessionInboxState {
    let page = agent.list_sessions(None).await.unwrap();
    page.sessions
        .into_iter()
        .find_map(|row| match row {
            SessionSummaryRow::Available {
                session_id: id,
                summary,
            } if &id == session_id => Some(summary.state),
            _ => None,
        })
        .unwrap()
}
