//! Real Agents over a test directory (SQLite in a temp dir, the scripted model), each
//! composed as the rosters compose them: the shared set (Asks wait on the sender
//! first, as on Local) and conversation agents.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use shiitake_core::clock::SystemClock;
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::message::{InputContent, Message};
use shiitake_protocol::*;
use shiitake_roster_conversation_agents::{
    AgentDirectory, DirectoryError, SharedSet, add_conversation_agents, add_shared_set,
};
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

/// Opens the Agent `me` with the roster's composition in `directory`, and starts its
/// tasks.
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
    let builder = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    );
    let builder = add_shared_set(
        builder,
        &SharedSet {
            waits_on_sender: true,
            skills: None,
        },
    )
    .unwrap();
    let (builder, conversation) =
        add_conversation_agents(builder, name(me), directory.clone(), Arc::new(SystemClock))
            .unwrap();
    let agent = builder.open().await.unwrap();
    directory
        .agents
        .write()
        .unwrap()
        .insert(name(me), agent.clone());
    let tasks = conversation.start(&agent);
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
