//! A child process for `tests/suite/two_processes.rs`: two of these race over one SQLite file.
//!
//! `race_harness setup <db> <n> <due-in-ms>` creates `n` Sessions and one one-shot
//! schedule into each, all due `due-in-ms` from now, prints `READY` and exits.
//! `race_harness run <db> <n>` opens the Agent with Almanac, waits until `n`
//! Almanac prompts have settled (in either process), prints `RUNS <k>` (the runs
//! this process's model served) and exits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use shiitake_capabilities::Catalog;
use shiitake_core::clock::now_ms;
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_almanac::contract::{AlmanacContract, CreateSchedule};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::bind_agent_extension;
use shiitake_protocol::{AgentApi, RequestId};
use shiitake_store_sqlite::{Durability, SqliteStore};
use sqlx::ConnectOptions;

async fn open(path: &Path) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(
        Script::new(vec![Turn::text("ok")]).cycle(true),
    ));
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let config = AgentConfig::new(Arc::new(FixedModel(model.clone())));
    let agent = Agent::builder(Arc::new(store), Arc::new(Catalog::new()), config)
        .kit_extension(shiitake_ext_almanac::extension().unwrap())
        .open()
        .await
        .unwrap();
    (agent, model)
}

async fn settled_almanac_prompts(path: &Path) -> i64 {
    let mut conn = sqlx::sqlite::SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(path)
        .read_only(true)
        .connect()
        .await
        .unwrap();
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM commands WHERE request_id LIKE 'almanac:%' AND state = 'settled'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = PathBuf::from(&args[1]);
    let n: usize = args[2].parse().unwrap();
    match args[0].as_str() {
        "setup" => {
            let due_in: u64 = args[3].parse().unwrap();
            let (agent, _) = open(&path).await;
            let almanac = bind_agent_extension::<_, AlmanacContract>(&agent);
            let at = now_ms() + due_in;
            for i in 0..n {
                let session = agent
                    .create_session(RequestId::new(format!("race-{i}")).unwrap())
                    .await
                    .unwrap();
                almanac
                    .call(&CreateSchedule {
                        session_id: session.as_str().to_owned(),
                        prompt: format!("Occurrence {i}"),
                        at: Some(at),
                        cadence: None,
                        request_id: None,
                    })
                    .await
                    .unwrap();
            }
            agent.close().await.unwrap();
            println!("READY");
        }
        "run" => {
            let (agent, model) = open(&path).await;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while settled_almanac_prompts(&path).await < n as i64 {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "not every prompt settled"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // Let this process finish what it was doing before counting.
            tokio::time::sleep(Duration::from_millis(300)).await;
            println!("RUNS {}", model.calls());
            agent.close().await.unwrap();
        }
        other => panic!("unknown phase {other}"),
    }
}
