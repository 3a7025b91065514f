//! Observation cost follows the page, not the history, measured as ratios in one run.
//!
//! `cargo bench -p shiitake-core --bench observe` prints:
//! - `read {limit: 50}` on a Session with 100,000 messages vs one with 100;
//! - the first `list_sessions` page with 100,000 Sessions vs 100.
//!
//! Histories are written straight through the store (the same rows the runner
//! commits), so the set-up takes seconds rather than a model's time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiitake_capabilities::Catalog;
use shiitake_core::store::{Op, Store, StoredEntry};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::message::{Message, UserMessage};
use shiitake_protocol::{AgentApi, PageLimit, ReadOptions, SessionApi, SessionId};
use shiitake_store_sqlite::{Durability, SqliteStore};
use support::{entry_id, header};

const SMALL: usize = 100;
const LARGE: usize = 100_000;
const BATCH: usize = 2_000;
const ITERATIONS: u32 = 300;

async fn session_with(store: &SqliteStore, name: &str, messages: usize) -> SessionId {
    let id = SessionId::new(name).unwrap();
    store
        .commit(vec![Op::CreateSession {
            header: header(&id, messages, 1),
            request_id: None,
        }])
        .await
        .unwrap();
    let mut ops = Vec::with_capacity(BATCH);
    for n in 1..=messages {
        let message = Message::User(UserMessage::text(
            format!("message number {n} of the history"),
            n as u64,
        ));
        let entry = StoredEntry {
            id: entry_id(n),
            parent: (n > 1).then(|| entry_id(n - 1)),
            sequence: n as u64,
            command_id: None,
            message,
        };
        ops.push(Op::InsertEntry {
            session_id: id.clone(),
            entry,
        });
        if ops.len() == BATCH {
            store.commit(std::mem::take(&mut ops)).await.unwrap();
        }
    }
    if !ops.is_empty() {
        store.commit(ops).await.unwrap();
    }
    id
}

async fn sessions(store: &SqliteStore, count: usize) {
    let mut ops = Vec::with_capacity(BATCH);
    for n in 0..count {
        let id = SessionId::new(format!("ses_{n:08}")).unwrap();
        ops.push(Op::CreateSession {
            header: header(&id, 0, n as u64),
            request_id: None,
        });
        if ops.len() == BATCH {
            store.commit(std::mem::take(&mut ops)).await.unwrap();
        }
    }
    if !ops.is_empty() {
        store.commit(ops).await.unwrap();
    }
}

async fn open_agent(path: &Path) -> (Agent, Arc<SqliteStore>) {
    let store = Arc::new(SqliteStore::open(path, Durability::Normal).await.unwrap());
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let agent = Agent::open(
        store.clone(),
        Arc::new(Catalog::new()),
        AgentConfig::new(Arc::new(FixedModel(model))),
    )
    .await
    .unwrap();
    (agent, store)
}

async fn time<F: std::future::Future<Output = ()>>(mut call: impl FnMut() -> F) -> Duration {
    for _ in 0..20 {
        call().await; // warm caches and the owner
    }
    let started = Instant::now();
    for _ in 0..ITERATIONS {
        call().await;
    }
    started.elapsed() / ITERATIONS
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, store) = open_agent(&dir.path().join("reads.db")).await;
    let small = session_with(&store, "ses_small", SMALL).await;
    let large = session_with(&store, "ses_large", LARGE).await;
    let options = ReadOptions {
        limit: Some(PageLimit::new(50).unwrap()),
        ..ReadOptions::default()
    };
    let read = |id: SessionId| {
        let session = agent.session(id);
        let options = options.clone();
        async move {
            let snapshot = session.read(options).await.unwrap();
            assert_eq!(snapshot.messages.len(), 50);
        }
    };
    let small_read = time(|| read(small.clone())).await;
    let large_read = time(|| read(large.clone())).await;

    let few = tempfile::tempdir().unwrap();
    let (few_agent, few_store) = open_agent(&few.path().join("inbox.db")).await;
    sessions(&few_store, SMALL).await;
    let many = tempfile::tempdir().unwrap();
    let (many_agent, many_store) = open_agent(&many.path().join("inbox.db")).await;
    sessions(&many_store, LARGE).await;
    let list = |agent: Agent| async move {
        let page = agent.list_sessions(None).await.unwrap();
        assert_eq!(page.sessions.len(), 100);
    };
    let few_list = time(|| list(few_agent.clone())).await;
    let many_list = time(|| list(many_agent.clone())).await;

    println!(
        "read {{limit: 50}}: {SMALL} messages {:?}, {LARGE} messages {:?}: ratio {:.2}x (target <= 1.2x)",
        small_read,
        large_read,
        large_read.as_secs_f64() / small_read.as_secs_f64()
    );
    println!(
        "list_sessions first page: {SMALL} Sessions {:?}, {LARGE} Sessions {:?}: ratio {:.2}x",
        few_list,
        many_list,
        many_list.as_secs_f64() / few_list.as_secs_f64()
    );
}
