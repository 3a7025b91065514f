//! Real Agents over a test directory (SQLite in a temp dir, the scripted model), each
//! composed as the rosters compose them: the shared set (Asks wait on the sender
//! first, as on Local) and conversation agents.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use shiitake_core::Agent;
use shiitake_core::clock::SystemClock;
use shiitake_ext_testkit::{TestAgent, fast_retry};
use shiitake_model::Turn;
use shiitake_protocol::*;
use shiitake_roster_conversation_agents::{
    AgentDirectory, ConversationError, DirectoryError, SharedSet, add_conversation_agents,
    add_shared_set,
};

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

/// Opens the Agent `me` with the roster's composition in `directory`, and starts its
/// tasks.
pub async fn open(
    dir: &tempfile::TempDir,
    me: &str,
    turns: Vec<Turn>,
    directory: Arc<TestDirectory>,
) -> (Agent, Vec<tokio::task::JoinHandle<()>>) {
    let conversation = Arc::new(Mutex::new(None));
    let agent = TestAgent::builder()
        .file(dir.path().join(format!("{me}.db")))
        .turns(turns)
        .configure(|config| config.retry = fast_retry(1))
        .compose(|builder| {
            add_shared_set(
                builder,
                &SharedSet {
                    waits_on_sender: true,
                    skills: None,
                },
            )
        })
        .compose({
            let directory = directory.clone();
            let conversation = conversation.clone();
            let me = name(me);
            move |builder| {
                let (builder, tasks) =
                    add_conversation_agents(builder, me, directory, Arc::new(SystemClock))?;
                *conversation.lock().unwrap() = Some(tasks);
                Ok::<_, ConversationError>(builder)
            }
        })
        .open()
        .await
        .agent;
    let conversation = conversation.lock().unwrap().take().unwrap();
    directory
        .agents
        .write()
        .unwrap()
        .insert(name(me), agent.clone());
    let tasks = conversation.start(&agent);
    (agent, tasks)
}
