//! Almanac's fixture on the extension test kit: the Agent with Almanac on a SQLite file,
//! its schedules, and the rows it admitted.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shiitake_conformance::support::PATIENCE;
use shiitake_core::Agent;
use shiitake_core::clock::Clock;
use shiitake_ext_almanac::contract::*;
use shiitake_ext_testkit::{TestAgent, timers_of};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::bind_agent_extension;

pub use shiitake_ext_testkit::connect;

/// 2026-11-30T00:00:00Z, a Monday.
pub const MONDAY: u64 = 1_795_996_800_000;
pub const MINUTE: u64 = 60_000;

/// An Agent with Almanac on `path`; every run answers "ok".
pub async fn open(path: &Path, clock: Arc<dyn Clock>) -> (Agent, Arc<ScriptedModel>) {
    let kit = TestAgent::builder()
        .file(path)
        .clock(clock)
        .script(Script::new(vec![Turn::text("ok")]).cycle(true))
        .kit_extension(shiitake_ext_almanac::extension().unwrap())
        .open()
        .await;
    (kit.agent, kit.model)
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
    timers_of(path, EXTENSION_ID).await
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
