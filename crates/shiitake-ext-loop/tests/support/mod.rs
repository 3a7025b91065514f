//! The fixture: a core Agent with Loop on a SQLite file, a paused clock and the scripted model.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use shiitake_capabilities::Catalog;
use shiitake_conformance::support::PATIENCE;
use shiitake_core::clock::ManualClock;
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_loop::contract::*;
use shiitake_ext_loop::{LoopExtension, loop_grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::{ExtensionViewV0, view};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};
use sqlx::ConnectOptions;

/// 2026-11-30T00:00:00Z, a Monday.
pub const MONDAY: u64 = 1_795_996_800_000;
pub const MINUTE: u64 = 60_000;

pub async fn open(
    path: &Path,
    clock: &Arc<ManualClock>,
    turns: Vec<Turn>,
) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let mut config = AgentConfig::new(Arc::new(FixedModel(model.clone())));
    config.clock = clock.clone();
    let agent = Agent::builder(Arc::new(store), Arc::new(Catalog::new()), config)
        .extension(LoopExtension::new().unwrap(), loop_grants())
        .open()
        .await
        .unwrap();
    (agent, model)
}

pub fn db(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("agent.db")
}

pub async fn the_loop(session: &impl SessionApi) -> Option<LoopRecord> {
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    match view::<LoopContract>(&snapshot.extensions).unwrap() {
        ExtensionViewV0::Running { value: Some(p) } => p.current,
        other => panic!("loop is not running: {other:?}"),
    }
}

/// Waits (bounded) until the loop satisfies `done`.
pub async fn until(session: &impl SessionApi, done: impl Fn(&LoopRecord) -> bool) -> LoopRecord {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(record) = the_loop(session).await
            && done(&record)
        {
            return record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never: {:?}",
            the_loop(session).await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until nothing is queued or running in the Session.
pub async fn idle(session: &impl SessionApi) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let snapshot = session.read(ReadOptions::default()).await.unwrap();
        if snapshot.activity.queue == QueueState::Idle {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "never idle");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The user messages of the Session's transcript.
pub async fn prompts(session: &impl SessionApi) -> Vec<String> {
    shiitake_conformance::support::outline(
        &shiitake_conformance::support::transcript(session).await,
    )
    .into_iter()
    .filter(|line| line.starts_with("user: "))
    .collect()
}

pub async fn loop_timers(path: &Path) -> i64 {
    let mut conn = sqlx::sqlite::SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(path)
        .connect()
        .await
        .unwrap();
    sqlx::query_scalar("SELECT COUNT(*) FROM timers WHERE extension_id = ?")
        .bind(EXTENSION_ID)
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

pub fn start(prompt: &str, cadence: Option<&str>) -> LoopCommand {
    LoopCommand {
        action: LoopAction::Start,
        prompt: Some(prompt.into()),
        cadence: cadence.map(str::to_owned),
        request_id: None,
    }
}

pub fn action(action: LoopAction) -> LoopCommand {
    LoopCommand {
        action,
        prompt: None,
        cadence: None,
        request_id: None,
    }
}
