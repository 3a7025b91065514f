//! The in-process fixture: a core Agent on a fresh SQLite file with the scripted model.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shiitake_capabilities::Catalog;
use shiitake_conformance::{Fixture, TestTools, tools};
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_model::{Script, ScriptedModel};
use shiitake_store_sqlite::{Durability, SqliteStore};
use tempfile::TempDir;

/// One Agent for one test.
pub struct Local {
    pub agent: Agent,
    pub model: Arc<ScriptedModel>,
    pub tools: Arc<TestTools>,
    pub dir: TempDir,
}

/// The test configuration: the scripted model and quick retries.
pub fn config(model: Arc<ScriptedModel>) -> AgentConfig {
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 3,
        initial_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
    };
    config
}

pub async fn open(path: &Path, counters: Arc<TestTools>, config: AgentConfig) -> Agent {
    open_with(path, tools::catalog(counters).await, config).await
}

/// An Agent on `path` with the test tools, answering from `turns`; returns its model too.
pub async fn open_scripted(
    path: &Path,
    turns: Vec<shiitake_model::Turn>,
) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let agent = open(path, Arc::new(TestTools::default()), config(model.clone())).await;
    (agent, model)
}

/// An Agent on `path` with its own tools and the conformance suite's tally extension.
pub async fn open_with(path: &Path, catalog: Arc<Catalog>, config: AgentConfig) -> Agent {
    use shiitake_conformance::extension::Tally;
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    Agent::builder(Arc::new(store), catalog, config)
        .extension(Tally::new().unwrap(), Tally::grants())
        .open()
        .await
        .unwrap()
}

impl Local {
    /// Closes this Agent and opens another on the same file, with a new script.
    pub async fn reopen(self, script: Script) -> Self {
        use shiitake_protocol::AgentApi;
        self.agent.close().await.unwrap();
        let model = Arc::new(ScriptedModel::new(script));
        let agent = open(
            &self.dir.path().join("agent.db"),
            self.tools.clone(),
            config(model.clone()),
        )
        .await;
        Self {
            agent,
            model,
            tools: self.tools,
            dir: self.dir,
        }
    }
}

#[async_trait]
impl Fixture for Local {
    type Agent = Agent;

    async fn start(script: Script) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(ScriptedModel::new(script));
        let tools = Arc::new(TestTools::default());
        let agent = open(
            &dir.path().join("agent.db"),
            tools.clone(),
            config(model.clone()),
        )
        .await;
        Self {
            agent,
            model,
            tools,
            dir,
        }
    }

    fn agent(&self) -> &Agent {
        &self.agent
    }

    fn model(&self) -> &ScriptedModel {
        &self.model
    }

    fn tools(&self) -> &TestTools {
        &self.tools
    }
}
