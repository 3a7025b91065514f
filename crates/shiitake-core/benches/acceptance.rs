//! Durable prompt acceptance, measured as ratios within one run.
//!
//! `cargo bench -p shiitake-core --bench acceptance` prints:
//! - acceptances/s of one caller vs a raw sqlx `BEGIN; INSERT; COMMIT` loop on
//!   the same SQLite settings (WAL, `synchronous = FULL`);
//! - acceptances/s of 64 concurrent callers (one Session each) vs one caller
//!   (group commit);
//! - resident memory per idle stored Session after 10,000 were created, touched
//!   and left to idle out.
//!
//! The model never answers (its one turn waits for ten minutes), so each
//! Session's first prompt starts a run that stays open and every other prompt
//! only queues: what is measured is acceptance, not model time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiitake_capabilities::Catalog;
use shiitake_core::{Agent, AgentConfig, Durability, FixedModel, SqliteStore};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{AgentApi, PromptText, ReadOptions, RequestId, SendOptions, SessionApi};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection};

const PROMPTS: usize = 400;
const CALLERS: usize = 64;
const IDLE_SESSIONS: usize = 10_000;

/// `SHIITAKE_BENCH_DURABILITY=normal` measures both sides with `synchronous = NORMAL`
/// (no fsync per commit), which isolates the CPU cost of acceptance.
fn durability() -> (Durability, SqliteSynchronous) {
    match std::env::var("SHIITAKE_BENCH_DURABILITY").as_deref() {
        Ok("normal") => (Durability::Normal, SqliteSynchronous::Normal),
        _ => (Durability::Full, SqliteSynchronous::Full),
    }
}

async fn raw_commits_per_second(dir: &Path) -> f64 {
    let options = SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(dir.join("raw.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(durability().1);
    let mut conn = options.connect().await.unwrap();
    sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
        .execute(&mut conn)
        .await
        .unwrap();
    let started = Instant::now();
    for n in 0..PROMPTS {
        let mut tx = conn.begin().await.unwrap();
        sqlx::query("INSERT INTO t (payload) VALUES (?)")
            .bind(format!("{{\"type\":\"prompt\",\"text\":\"prompt {n}\"}}"))
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    PROMPTS as f64 / started.elapsed().as_secs_f64()
}

async fn agent(dir: &Path, idle: Duration) -> Agent {
    let store = SqliteStore::open(&dir.join("agent.db"), durability().0)
        .await
        .unwrap();
    let never = Turn::new(vec![Step::DelayMs(600_000), Step::Text("late".into())]);
    let model = Arc::new(ScriptedModel::new(Script::new(vec![never]).cycle(true)));
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.owner_idle = idle;
    Agent::open(Arc::new(store), Arc::new(Catalog::new()), config)
        .await
        .unwrap()
}

async fn one_caller(agent: &Agent) -> f64 {
    let id = agent
        .create_session(RequestId::new("one-caller").unwrap())
        .await
        .unwrap();
    let session = agent.session(id);
    let started = Instant::now();
    for n in 0..PROMPTS {
        session
            .send(
                PromptText::new(format!("prompt {n}")).unwrap(),
                SendOptions::default(),
            )
            .await
            .unwrap();
    }
    PROMPTS as f64 / started.elapsed().as_secs_f64()
}

async fn many_callers(agent: &Agent) -> f64 {
    let mut sessions = Vec::new();
    for caller in 0..CALLERS {
        let id = agent
            .create_session(RequestId::new(format!("caller-{caller}")).unwrap())
            .await
            .unwrap();
        sessions.push(agent.session(id));
    }
    let per_caller = PROMPTS * 4 / CALLERS;
    let started = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|session| {
            tokio::spawn(async move {
                for n in 0..per_caller {
                    let text = PromptText::new(format!("prompt {n}")).unwrap();
                    session.send(text, SendOptions::default()).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (per_caller * CALLERS) as f64 / started.elapsed().as_secs_f64()
}

fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

async fn idle_memory(dir: &Path) -> (f64, usize) {
    let agent = agent(dir, Duration::from_millis(300)).await;
    let before = resident_bytes();
    let mut ids = Vec::with_capacity(IDLE_SESSIONS);
    for chunk in 0..IDLE_SESSIONS / 100 {
        let creates: Vec<_> = (0..100)
            .map(|n| {
                let agent = agent.clone();
                tokio::spawn(async move {
                    let request = RequestId::new(format!("idle-{chunk}-{n}")).unwrap();
                    let id = agent.create_session(request).await.unwrap();
                    agent
                        .session(id.clone())
                        .read(ReadOptions::default())
                        .await
                        .unwrap();
                    id
                })
            })
            .collect();
        for create in creates {
            ids.push(create.await.unwrap());
        }
    }
    // Every Session was opened once (an owner was spawned); let them all idle out.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let live = agent.live_sessions();
    let after = resident_bytes();
    let per_session = after.saturating_sub(before) as f64 / ids.len() as f64;
    agent.close().await.unwrap();
    (per_session, live)
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_commits_per_second(dir.path()).await;
    let agent = agent(dir.path(), Duration::from_secs(60)).await;
    let one = one_caller(&agent).await;
    let mut many = many_callers(&agent).await;
    if std::env::var("SHIITAKE_BENCH_PROFILE_MANY").is_ok() {
        // For `perf record`: repeat the many-callers phase so it dominates the profile.
        for _ in 0..10 {
            many = many_callers(&agent).await;
        }
    }
    agent.close().await.unwrap();
    let idle_dir = tempfile::tempdir().unwrap();
    let (per_session, live) = idle_memory(idle_dir.path()).await;

    println!("raw sqlx insert+commit:        {raw:>9.0} commits/s");
    println!(
        "durable acceptance, 1 caller:  {one:>9.0} prompts/s  ratio vs raw {:.2}x (target >= 0.8x)",
        one / raw
    );
    println!(
        "durable acceptance, {CALLERS} callers: {many:>9.0} prompts/s  ratio vs 1 caller {:.2}x (target >= 5x)",
        many / one
    );
    println!(
        "resident memory per idle stored Session after {IDLE_SESSIONS}: {per_session:.0} bytes ({live} owners still live)"
    );
}
