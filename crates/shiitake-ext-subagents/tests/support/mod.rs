//! Real Agents (SQLite in a temp dir, the scripted model): a parent with Subagents over
//! a test source, and children with the question extension.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use shiitake_core::clock::ManualClock;
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_ext_question::{QuestionConfig, QuestionExtension, question_grants};
use shiitake_ext_subagents::contract::{FooterView, SubagentsContract};
use shiitake_ext_subagents::state::ChildState;
use shiitake_ext_subagents::{
    ChildPage, ChildRef, SourceError, SubagentsExtension, SubagentsSource, read_core_child,
    subagents_grants,
};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::{ExtensionViewV0, view};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

/// 2026-11-30T00:00:00Z, where paused clocks start.
pub const START: u64 = 1_764_460_800_000;

/// The host's side: children per parent Session, and the child Agents by name.
#[derive(Default)]
pub struct TestSource {
    pub agents: Mutex<HashMap<String, Agent>>,
    pub children: Mutex<HashMap<SessionId, Vec<ChildRef>>>,
    pub reads: AtomicUsize,
}

impl TestSource {
    /// Makes the child Agent `name` reachable by the host.
    pub fn add_agent(&self, name: &str, agent: &Agent) {
        self.agents
            .lock()
            .unwrap()
            .insert(name.into(), agent.clone());
    }

    pub fn add_child(&self, parent: &SessionId, agent: &str, session_id: &SessionId) {
        self.children
            .lock()
            .unwrap()
            .entry(parent.clone())
            .or_default()
            .insert(
                0,
                ChildRef {
                    agent: agent.into(),
                    session_id: session_id.clone(),
                },
            );
    }

    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl SubagentsSource for TestSource {
    async fn read(&self, session_id: &SessionId, limit: usize) -> Result<ChildPage, SourceError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let children = self
            .children
            .lock()
            .unwrap()
            .get(session_id)
            .cloned()
            .unwrap_or_default();
        let rest = children.len().saturating_sub(limit) as u32;
        Ok(ChildPage {
            children: children.into_iter().take(limit).collect(),
            rest,
        })
    }

    async fn open(&self, child: &ChildRef) -> Result<ChildState, SourceError> {
        let agent = self.agents.lock().unwrap().get(&child.agent).cloned();
        let agent = agent.ok_or_else(|| SourceError::NoAgent(child.agent.clone()))?;
        read_core_child(&agent, &child.session_id).await
    }
}

pub fn config(model: Arc<ScriptedModel>) -> AgentConfig {
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 1,
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
    };
    config
}

/// A child Agent with the question extension (waiting on the sender when sent work).
pub async fn child(dir: &tempfile::TempDir, name: &str, turns: Vec<Turn>) -> Agent {
    let store = SqliteStore::open(&dir.path().join(format!("{name}.db")), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config(model),
    )
    .extension(
        QuestionExtension::new(QuestionConfig {
            waits_on_sender: true,
        })
        .unwrap(),
        question_grants(),
    )
    .open()
    .await
    .unwrap()
}

pub struct Parent {
    pub agent: Agent,
    pub source: Arc<TestSource>,
    pub clock: Arc<ManualClock>,
    pub refresher: tokio::task::JoinHandle<()>,
}

/// The parent Agent with Subagents over a fresh test source, on a paused clock.
pub async fn parent(dir: &tempfile::TempDir) -> Parent {
    let store = SqliteStore::open(&dir.path().join("parent.db"), Durability::Normal)
        .await
        .unwrap();
    let clock = ManualClock::new(START);
    let source = Arc::new(TestSource::default());
    let subagents = SubagentsExtension::new(source.clone(), clock.clone()).unwrap();
    let refresher = subagents.refresher();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let mut config = config(model);
    config.clock = clock.clone();
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    )
    .extension(subagents, subagents_grants())
    .open()
    .await
    .unwrap();
    let refresher = refresher.spawn(agent.clone());
    Parent {
        agent,
        source,
        clock,
        refresher,
    }
}

/// The footer in an observation's slots, if it shows one.
pub fn footer(slots: &SessionExtensionSlots) -> Option<FooterView> {
    match view::<SubagentsContract>(slots).unwrap() {
        ExtensionViewV0::Running { value } => value,
        other => panic!("subagents is not running: {other:?}"),
    }
}

/// A turn that keeps the model busy (cancellable) far longer than any test.
pub fn busy() -> Turn {
    Turn::new(vec![
        shiitake_model::Step::DelayMs(600_000),
        shiitake_model::Step::Text("late".into()),
    ])
}
