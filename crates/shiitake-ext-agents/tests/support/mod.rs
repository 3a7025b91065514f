//! Real Agents over a test directory (SQLite in a temp dir, the scripted model): each
//! with the extensions the `agents.*` tools talk to (questions that wait on the
//! sender, goals, Subagents) and the `agents.*` extension itself.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use shiitake_core::clock::SystemClock;
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_ext_agents::contract::{ChildRecord, EXTENSION_ID};
use shiitake_ext_agents::{AgentDirectory, ConversationAgents, DirectoryError, agents_grants};
use shiitake_ext_goal::{GoalExtension, goal_grants};
use shiitake_ext_question::{QuestionConfig, QuestionExtension, question_grants};
use shiitake_ext_subagents::{SubagentsExtension, subagents_grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::message::{InputContent, Message};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

/// The host's directory: the Agents opened so far, by name; `refuse` turns
/// `agents.create` away.
#[derive(Default)]
pub struct TestDirectory {
    /// The Agents opened so far.
    pub agents: RwLock<BTreeMap<AgentName, Agent>>,
    /// Whether `agents.create` is refused (else it finds the name taken).
    pub refuse: bool,
}

#[async_trait]
impl AgentDirectory for TestDirectory {
    fn agent(&self, name: &AgentName) -> Option<Agent> {
        self.agents.read().unwrap().get(name).cloned()
    }

    fn names(&self) -> Vec<AgentName> {
        self.agents.read().unwrap().keys().cloned().collect()
    }

    async fn create(&self, name: &AgentName) -> Result<Agent, DirectoryError> {
        if self.refuse {
            return Err(DirectoryError::Refused {
                name: name.clone(),
                reason: "this host creates no Agents".into(),
            });
        }
        Err(DirectoryError::Exists(name.clone()))
    }
}

/// The Agent name `value`, which the tests spell right.
pub fn name(value: &str) -> AgentName {
    AgentName::new(value).unwrap()
}

/// Opens the Agent `me` with its extensions in `directory`, and starts its tasks.
pub async fn open(
    dir: &tempfile::TempDir,
    me: &str,
    turns: Vec<Turn>,
    directory: Arc<TestDirectory>,
) -> (Agent, Vec<tokio::task::JoinHandle<()>>) {
    let store = SqliteStore::open(&dir.path().join(format!("{me}.db")), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 1,
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
    };
    let roster = ConversationAgents::new(name(me), directory.clone()).unwrap();
    let subagents =
        SubagentsExtension::new(Arc::new(roster.source()), Arc::new(SystemClock)).unwrap();
    roster.notify(subagents.handle());
    let refresher = subagents.refresher();
    let builder = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    );
    let question = QuestionExtension::new(QuestionConfig {
        waits_on_sender: true,
    })
    .unwrap();
    let agent = builder
        .extension(question, question_grants())
        .extension(GoalExtension::new().unwrap(), goal_grants())
        .extension(subagents, subagents_grants())
        .extension(roster.extension().unwrap(), agents_grants())
        .open()
        .await
        .unwrap();
    directory
        .agents
        .write()
        .unwrap()
        .insert(name(me), agent.clone());
    let mut tasks = vec![refresher.spawn(agent.clone())];
    tasks.extend(roster.start(agent.clone()));
    (agent, tasks)
}

/// The tool results of `messages`, as JSON where they parse.
pub fn tool_values(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => {
                let text: String = result
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        InputContent::Text(text) => Some(text.text.clone()),
                        _ => None,
                    })
                    .collect();
                Some(serde_json::from_str(&text).unwrap_or(Value::String(text)))
            }
            _ => None,
        })
        .collect()
}

/// The record rows of `session`.
pub async fn records(agent: &Agent, session: &SessionId) -> Vec<ChildRecord> {
    let id = ExtensionId::new(EXTENSION_ID).unwrap();
    let rows = agent
        .session(session.clone())
        .host_transaction(&id, |tx| Ok(json!(shiitake_ext_agents::record::load(tx)?)))
        .await
        .unwrap();
    serde_json::from_value(rows).unwrap()
}
