//! Real Agents over a test directory (SQLite in a temp dir, the scripted model): each
//! with the extensions the `agents.*` tools talk to (questions that wait on the
//! sender, goals, Subagents) and the `agents.*` extension itself.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use serde_json::json;
use shiitake_core::Agent;
use shiitake_core::clock::SystemClock;
use shiitake_ext_agents::contract::{ChildRecord, EXTENSION_ID};
use shiitake_ext_agents::{AgentDirectory, DirectoryError};
use shiitake_ext_question::QuestionConfig;
use shiitake_ext_testkit::{TestAgent, fast_retry};
use shiitake_model::Turn;
use shiitake_protocol::*;

pub use shiitake_ext_testkit::tool_values;

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
    let (agents, roster) = shiitake_ext_agents::extension(name(me), directory.clone()).unwrap();
    let (subagents, refresher) =
        shiitake_ext_subagents::extension(Arc::new(roster.source()), Arc::new(SystemClock))
            .unwrap();
    roster.notify(refresher.handle());
    let question = shiitake_ext_question::extension(QuestionConfig {
        waits_on_sender: true,
    })
    .unwrap();
    let agent = TestAgent::builder()
        .file(dir.path().join(format!("{me}.db")))
        .turns(turns)
        .configure(|config| config.retry = fast_retry(1))
        .kit_extension(question)
        .kit_extension(shiitake_ext_goal::extension().unwrap())
        .kit_extension(subagents)
        .kit_extension(agents)
        .open()
        .await
        .agent;
    directory
        .agents
        .write()
        .unwrap()
        .insert(name(me), agent.clone());
    let mut tasks = vec![refresher.spawn(agent.clone())];
    tasks.extend(roster.start(agent.clone()));
    (agent, tasks)
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
