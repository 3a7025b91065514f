//! Group commit across a real crash: a child process with 64 callers accepting
//! prompts as fast as it can is SIGKILLed mid-burst, while groups are in flight.
//! Every command it acknowledged is in the file, loading finds it from the
//! header's watermark, the file passes SQLite's integrity check, and an Agent
//! reopened on it runs every acknowledged prompt to completion.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code outside #[test] functions

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiitake_capabilities::Catalog;
use shiitake_core::store::Store;
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::{AgentApi, CommandId, SessionId};
use shiitake_store_sqlite::{Durability, SqliteStore};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};

/// Acknowledgements to see before the kill: enough for many groups of many Sessions.
const ACKS_BEFORE_KILL: usize = 1_500;

/// The `burst_harness` example, built by `cargo test` next to this test binary.
fn harness() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    debug.join("examples").join("burst_harness")
}

/// Runs the harness until it has acknowledged enough, SIGKILLs it, and returns every
/// acknowledgement it printed (including any printed while the kill was on its way).
fn acknowledged_before_a_kill(dir: &Path) -> BTreeMap<SessionId, BTreeSet<CommandId>> {
    let mut child = Command::new(harness())
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", harness().display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acks = BTreeMap::<SessionId, BTreeSet<CommandId>>::new();
    let mut count = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while count < ACKS_BEFORE_KILL {
        assert!(Instant::now() < deadline, "only {count} acknowledgements");
        let line = lines.next().expect("the harness ended early").unwrap();
        record(&mut acks, &line);
        count += 1;
    }
    child.kill().unwrap(); // SIGKILL on Unix
    // Lines already in the pipe were acknowledged before the kill, so they count too.
    for line in lines {
        let Ok(line) = line else { break };
        record(&mut acks, &line);
    }
    assert!(!child.wait().unwrap().success(), "the child was killed");
    acks
}

fn record(acks: &mut BTreeMap<SessionId, BTreeSet<CommandId>>, line: &str) {
    let mut words = line.split(' ');
    assert_eq!(words.next(), Some("ACK"), "{line}");
    let session = SessionId::new(words.next().unwrap()).unwrap();
    let command = CommandId::new(words.next().unwrap()).unwrap();
    acks.entry(session).or_default().insert(command);
}

async fn connect(path: &Path) -> SqliteConnection {
    SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(path)
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_command_survives_a_kill_mid_burst() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let acks = acknowledged_before_a_kill(dir.path());
    assert!(
        acks.len() > 1,
        "the burst spread over Sessions: {}",
        acks.len()
    );

    // The store alone: what an owner would load, with nothing running yet.
    let store = SqliteStore::open(&path, Durability::Full).await.unwrap();
    for (session, commands) in &acks {
        let loaded = store.load_session(session).await.unwrap().unwrap();
        let open: BTreeSet<CommandId> = loaded.open_commands.into_iter().map(|c| c.id).collect();
        let lost: Vec<_> = commands.difference(&open).collect();
        assert!(lost.is_empty(), "{session} lost {lost:?}");
    }
    store.close().await;
    let mut conn = connect(&path).await;
    let check: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(check, "ok");

    // An Agent with a model that answers: recovery resumes each Session's first
    // prompt and the queues drain, so every acknowledged prompt completes.
    let model = Arc::new(ScriptedModel::new(
        Script::new(vec![Turn::text("done")]).cycle(true),
    ));
    let store = SqliteStore::open(&path, Durability::Normal).await.unwrap();
    let agent = Agent::open(
        Arc::new(store),
        Arc::new(Catalog::new()),
        AgentConfig::new(Arc::new(FixedModel(model))),
    )
    .await
    .unwrap();
    let acknowledged: usize = acks.values().map(BTreeSet::len).sum();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (open, completed): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM commands WHERE state <> 'settled'), \
             (SELECT COUNT(*) FROM terminals WHERE outcome = 'completed')",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if open == 0 {
            assert!(
                usize::try_from(completed).unwrap() >= acknowledged,
                "{completed} completed of {acknowledged} acknowledged"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{open} commands still open");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (session, commands) in &acks {
        for command in commands {
            let outcome: String = sqlx::query_scalar(
                "SELECT outcome FROM terminals WHERE session_id = ? AND command_id = ?",
            )
            .bind(session.as_str())
            .bind(command.as_str())
            .fetch_one(&mut conn)
            .await
            .unwrap();
            assert_eq!(outcome, "completed", "{session} {command}");
        }
    }
    agent.close().await.unwrap();
}
