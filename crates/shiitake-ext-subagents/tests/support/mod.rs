//! Subagents' fixture on the extension test kit: a parent Agent with Subagents over a
//! test source on a paused clock, and children with the question extension.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use shiitake_core::Agent;
use shiitake_core::clock::ManualClock;
use shiitake_ext_question::QuestionConfig;
use shiitake_ext_subagents::contract::{FooterView, SubagentsContract};
use shiitake_ext_subagents::state::ChildState;
use shiitake_ext_subagents::{ChildPage, ChildRef, SourceError, SubagentsSource, read_core_child};
use shiitake_ext_testkit::{TestAgent, fast_retry, paused_clock, projection};
use shiitake_model::Turn;
use shiitake_protocol::*;

pub use shiitake_ext_testkit::START;

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

/// A child Agent with the question extension (waiting on the sender when sent work).
pub async fn child(dir: &tempfile::TempDir, name: &str, turns: Vec<Turn>) -> Agent {
    TestAgent::builder()
        .file(dir.path().join(format!("{name}.db")))
        .turns(turns)
        .configure(|config| config.retry = fast_retry(1))
        .kit_extension(
            shiitake_ext_question::extension(QuestionConfig {
                waits_on_sender: true,
            })
            .unwrap(),
        )
        .open()
        .await
        .agent
}

pub struct Parent {
    pub agent: Agent,
    pub source: Arc<TestSource>,
    pub clock: Arc<ManualClock>,
    pub refresher: tokio::task::JoinHandle<()>,
}

/// The parent Agent with Subagents over a fresh test source, on a paused clock.
pub async fn parent(dir: &tempfile::TempDir) -> Parent {
    let clock = paused_clock();
    let source = Arc::new(TestSource::default());
    let (subagents, refresher) =
        shiitake_ext_subagents::extension(source.clone(), clock.clone()).unwrap();
    let agent = TestAgent::builder()
        .file(dir.path().join("parent.db"))
        .clock(clock.clone())
        .configure(|config| config.retry = fast_retry(1))
        .kit_extension(subagents)
        .open()
        .await
        .agent;
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
    projection::running::<SubagentsContract>(slots)
}

/// A turn that keeps the model busy (cancellable) far longer than any test.
pub fn busy() -> Turn {
    Turn::new(vec![
        shiitake_model::Step::DelayMs(600_000),
        shiitake_model::Step::Text("late".into()),
    ])
}
