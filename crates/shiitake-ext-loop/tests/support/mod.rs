//! Loop's fixture on the extension test kit: the Agent with Loop on a SQLite file and a
//! paused clock, the loop record of the projection, and Loop's commands.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shiitake_core::Agent;
use shiitake_core::clock::ManualClock;
use shiitake_ext_loop::contract::*;
use shiitake_ext_testkit::{TestAgent, projection, timers_of};
use shiitake_model::{ScriptedModel, Turn};
use shiitake_protocol::SessionApi;

pub use shiitake_ext_testkit::until_idle as idle;

/// 2026-11-30T00:00:00Z, a Monday.
pub const MONDAY: u64 = 1_795_996_800_000;
pub const MINUTE: u64 = 60_000;

pub async fn open(
    path: &Path,
    clock: &Arc<ManualClock>,
    turns: Vec<Turn>,
) -> (Agent, Arc<ScriptedModel>) {
    let kit = TestAgent::builder()
        .file(path)
        .clock(clock.clone())
        .turns(turns)
        .kit_extension(shiitake_ext_loop::extension().unwrap())
        .open()
        .await;
    (kit.agent, kit.model)
}

pub fn db(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("agent.db")
}

pub async fn the_loop(session: &impl SessionApi) -> Option<LoopRecord> {
    projection::read::<LoopContract>(session)
        .await
        .unwrap()
        .current
}

/// Waits (bounded) until the loop satisfies `done`.
pub async fn until(session: &impl SessionApi, done: impl Fn(&LoopRecord) -> bool) -> LoopRecord {
    projection::until::<LoopContract>(session, |p| p.current.as_ref().is_some_and(&done))
        .await
        .current
        .unwrap()
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
    timers_of(path, EXTENSION_ID).await
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
