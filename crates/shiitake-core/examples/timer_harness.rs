//! A child process for `tests/suite/timer_after_restart.rs`.
//!
//! `timer_harness arm <dir>` opens the Agent with the test probe extension,
//! sets a Session timer due in one second, prints `ARMED` and waits to be
//! killed. `timer_harness watch <dir>` reopens the Agent, waits until the
//! timer's hook has run, then a little longer, and prints `FIRED <count>`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/harness.rs"]
mod harness;
#[path = "../tests/support/probe.rs"]
mod probe;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shiitake_core::extension::Grants;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::{AgentApi, ExtensionSlotV0, ReadOptions, RequestId, SessionApi};

async fn fired(agent: &shiitake_core::Agent, session: &shiitake_protocol::SessionId) -> i64 {
    let snapshot = agent
        .session(session.clone())
        .read(ReadOptions::default())
        .await
        .unwrap();
    match snapshot.extensions.get(&probe::id()) {
        Some(ExtensionSlotV0::Running { value }) => value["fired"].as_i64().unwrap_or(0),
        _ => 0,
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (phase, dir) = (
        args.next().expect("a phase"),
        PathBuf::from(args.next().expect("a dir")),
    );
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let agent = probe::agent(
        &dir.join("agent.db"),
        model,
        probe::Probe::new(),
        Grants::all(),
    )
    .await;
    let session = agent
        .create_session(RequestId::new("timer-session").unwrap())
        .await
        .unwrap();
    match phase.as_str() {
        "arm" => {
            agent
                .session(session)
                .call_extension(&probe::id(), "timer", json!({"afterMs": 1000}))
                .await
                .unwrap();
            println!("ARMED");
            std::future::pending::<()>().await;
        }
        "watch" => {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while fired(&agent, &session).await == 0 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            println!("FIRED {}", fired(&agent, &session).await);
            agent.close().await.unwrap();
        }
        other => panic!("unknown phase {other}"),
    }
}
