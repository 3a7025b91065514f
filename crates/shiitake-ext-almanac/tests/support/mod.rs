//! The fixture: a core Agent with Almanac on a SQLite file, the scripted model and a clock.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use shiitake_capabilities::Catalog;
use shiitake_conformance::support::PATIENCE;
use shiitake_core::clock::Clock;
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_almanac::contract::*;
use shiitake_ext_almanac::{AlmanacExtension, almanac_grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::bind_agent_extension;
use shiitake_store_sqlite::{Durability, SqliteStore};
use sqlx::ConnectOptions;

/// 2026-11-30T00:00:00Z, a Monday.
pub const MONDAY: u64 = 1_795_996_800_000;
pub const MINUTE: u64 = 60_000;

/// An Agent with Almanac on `path`; every run answers "ok".
pub async fn open(path: &Path, clock: Arc<dyn Clock>) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(
        Script::new(vec![Turn::text("ok")]).cycle(true),
    ));
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let mut config = AgentConfig::new(Arc::new(FixedModel(model.clone())));
    config.clock = clock;
    let agent = Agent::builder(Arc::new(store), Arc::new(Catalog::new()), config)
        .extension(AlmanacExtension::new().unwrap(), almanac_grants())
        .open()
        .await
        .unwrap();
    (agent, model)
}

pub async fn list(agent: &Agent) -> Vec<Schedule> {
    bind_agent_extension::<_, AlmanacContract>(agent)
        .call(&ListSchedules {})
        .await
        .unwrap()
}

pub async fn schedule(agent: &Agent, id: &ScheduleId) -> Schedule {
    list(agent).await.into_iter().find(|s| &s.id == id).unwrap()
}

/// Waits (bounded) until the schedule satisfies `done`.
pub async fn until(agent: &Agent, id: &ScheduleId, done: impl Fn(&Schedule) -> bool) -> Schedule {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let current = schedule(agent, id).await;
        if done(&current) {
            return current;
        }
        assert!(tokio::time::Instant::now() < deadline, "never: {current:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn connect(path: &Path) -> sqlx::SqliteConnection {
    sqlx::sqlite::SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(path)
        .connect()
        .await
        .unwrap()
}

/// Commands admitted by Almanac: (request id, Session, origin).
pub async fn admitted_commands(path: &Path) -> Vec<(String, String, String)> {
    sqlx::query_as(
        "SELECT request_id, session_id, origin FROM commands WHERE request_id LIKE 'almanac:%' ORDER BY request_id",
    )
    .fetch_all(&mut connect(path).await)
    .await
    .unwrap()
}

pub async fn almanac_timers(path: &Path) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM timers WHERE extension_id = ?")
        .bind(EXTENSION_ID)
        .fetch_one(&mut connect(path).await)
        .await
        .unwrap()
}

pub fn once(session: &str, prompt: &str, at: u64) -> CreateSchedule {
    CreateSchedule {
        session_id: session.into(),
        prompt: prompt.into(),
        at: Some(at),
        cadence: None,
        request_id: None,
    }
}
