//! Question's fixture on the extension test kit: the Agent with the question extension
//! on a paused clock, an Ask the model makes, and the open Asks of the projection.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_core::clock::ManualClock;
use shiitake_core::{Agent, AgentConfig};
use shiitake_ext_question::QuestionConfig;
use shiitake_ext_question::contract::{AskView, QuestionContract, QuestionProjection};
use shiitake_ext_testkit::{TestAgent, fast_retry, paused_clock, projection};
use shiitake_model::{ScriptedModel, Turn};
use shiitake_protocol::*;

pub use shiitake_ext_testkit::{
    START, inbox_state, tool_texts as tool_results, tool_values, user_texts,
};

pub struct Setup {
    pub agent: Agent,
    pub model: Arc<ScriptedModel>,
    pub clock: Arc<ManualClock>,
    pub dir: tempfile::TempDir,
}

/// The Agent with the question extension on `path`, two model attempts per call.
pub async fn open_at(
    path: &Path,
    model: Arc<ScriptedModel>,
    clock: Arc<ManualClock>,
    question: QuestionConfig,
    tune: impl FnOnce(&mut AgentConfig),
) -> Agent {
    TestAgent::builder()
        .file(path)
        .model(model)
        .clock(clock)
        .configure(|config| config.retry = fast_retry(2))
        .configure(tune)
        .kit_extension(shiitake_ext_question::extension(question).unwrap())
        .open()
        .await
        .agent
}

pub async fn setup(turns: Vec<Turn>) -> Setup {
    setup_with(turns, QuestionConfig::default(), |_| {}).await
}

pub async fn setup_with(
    turns: Vec<Turn>,
    question: QuestionConfig,
    tune: impl FnOnce(&mut AgentConfig),
) -> Setup {
    let clock = paused_clock();
    let mut kit = TestAgent::builder()
        .turns(turns)
        .clock(clock.clone())
        .configure(|config| config.retry = fast_retry(2))
        .configure(tune)
        .kit_extension(shiitake_ext_question::extension(question).unwrap())
        .open()
        .await;
    Setup {
        dir: kit.take_dir().unwrap(),
        agent: kit.agent,
        model: kit.model,
        clock,
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
    projection::running::<QuestionContract>(&snapshot.extensions).unwrap_or_default()
}

/// Waits until `count` Asks are open and returns them.
pub async fn open_asks(session: &impl SessionApi, count: usize) -> Vec<AskView> {
    projection::until::<QuestionContract>(session, |p| p.asks.len() == count)
        .await
        .asks
}
