//! Durable prompt acceptance, measured as ratios within one run.
//!
//! `cargo bench -p shiitake-core --bench acceptance` prints:
//! - acceptances/s of one caller vs a raw sqlx `BEGIN; INSERT; COMMIT` loop on
//!   the same SQLite settings (WAL, `synchronous = FULL`);
//! - acceptances/s of 64 concurrent callers (one Session each) vs one caller
//!   (group commit);
//! - CPU time per acceptance in each phase;
//! - resident memory per idle stored Session after 10,000 were created, touched
//!   and left to idle out.
//!
//! A disk's fsync time drifts by a factor of two within seconds, so the phases
//! are interleaved in short chunks ([`ROUNDS`] rounds of raw, one caller, many
//! callers) and each rate is the total count over the total time of its chunks:
//! every ratio compares phases that saw the same disk. The range of the
//! per-round ratios is printed beside it.
//!
//! The model never answers (its one turn waits for ten minutes), so each
//! Session's first prompt starts a run that stays open and every other prompt
//! only queues: what is measured is acceptance, not model time. That first
//! prompt is sent before timing starts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiitake_capabilities::Catalog;
use shiitake_core::{Agent, AgentConfig, FixedModel, LocalSession};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{AgentApi, ReadOptions, RequestId, SessionApi};
use shiitake_store_sqlite::SqliteStore;
use support::{Phase, durability, many_callers, raw_commits, raw_connection, send_prompt};

/// Interleaved rounds of the three phases.
const ROUNDS: usize = 30;
/// Commits of the raw loop, and prompts of the one caller, per round.
const CHUNK: usize = 50;
const CALLERS: usize = 64;
/// Prompts each of the many callers sends per round.
const PER_CALLER: usize = 4;
const IDLE_SESSIONS: usize = 10_000;

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

/// A new Session whose run is already open (its first prompt was sent).
async fn warm_session(agent: &Agent, name: String) -> LocalSession {
    let id = agent
        .create_session(RequestId::new(name).unwrap())
        .await
        .unwrap();
    let session = agent.session(id);
    send_prompt(&session, 0).await;
    session
}

/// One caller sends `count` prompts, each after the last was accepted.
async fn one_caller(session: &LocalSession, count: usize) -> Duration {
    let started = Instant::now();
    for n in 0..count {
        send_prompt(session, n).await;
    }
    started.elapsed()
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

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), v| {
        (low.min(v), high.max(v))
    })
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = raw_connection(dir.path()).await;
    let agent = agent(dir.path(), Duration::from_secs(60)).await;
    let many_count = CALLERS * PER_CALLER;
    if let Ok(phase) = std::env::var("SHIITAKE_BENCH_PROFILE") {
        // For `perf record`: repeat one phase so it dominates the profile, and stop.
        for round in 0..ROUNDS {
            let (count, took) = match phase.as_str() {
                "raw" => (CHUNK * 8, raw_commits(&mut conn, CHUNK * 8).await),
                "one" => {
                    let session = warm_session(&agent, format!("profile-{round}")).await;
                    (CHUNK * 8, one_caller(&session, CHUNK * 8).await)
                }
                _ => {
                    let mut sessions = Vec::new();
                    for caller in 0..CALLERS {
                        sessions
                            .push(warm_session(&agent, format!("profile-{round}-{caller}")).await);
                    }
                    (many_count, many_callers(&sessions, PER_CALLER).await)
                }
            };
            println!(
                "{phase}: {:.0} per second",
                count as f64 / took.as_secs_f64()
            );
        }
        agent.close().await.unwrap();
        return;
    }
    let (mut raw, mut one, mut many) = (Phase::default(), Phase::default(), Phase::default());
    for round in 0..ROUNDS {
        let single = warm_session(&agent, format!("one-{round}")).await;
        let mut sessions = Vec::with_capacity(CALLERS);
        for caller in 0..CALLERS {
            sessions.push(warm_session(&agent, format!("many-{round}-{caller}")).await);
        }
        raw.time(raw_commits(&mut conn, CHUNK)).await;
        one.time(one_caller(&single, CHUNK)).await;
        many.time(many_callers(&sessions, PER_CALLER)).await;
    }
    agent.close().await.unwrap();
    let idle_dir = tempfile::tempdir().unwrap();
    let (per_session, live) = idle_memory(idle_dir.path()).await;

    let (one_low, one_high) = range(one.ratios(CHUNK, &raw, CHUNK));
    let (many_low, many_high) = range(many.ratios(many_count, &one, CHUNK));
    println!("{ROUNDS} interleaved rounds; per-round ratios in brackets");
    println!(
        "raw sqlx insert+commit:         {:>9.0} commits/s",
        raw.rate(CHUNK)
    );
    println!(
        "durable acceptance, 1 caller:   {:>9.0} prompts/s  ratio vs raw {:.2}x [{one_low:.2}-{one_high:.2}] (target >= 0.8x)",
        one.rate(CHUNK),
        one.rate(CHUNK) / raw.rate(CHUNK)
    );
    println!(
        "durable acceptance, {CALLERS} callers: {:>9.0} prompts/s  ratio vs 1 caller {:.2}x [{many_low:.2}-{many_high:.2}] (target >= 5x)",
        many.rate(many_count),
        many.rate(many_count) / one.rate(CHUNK)
    );
    println!(
        "CPU per acceptance: raw {:.0} µs, 1 caller {:.0} µs, {CALLERS} callers {:.0} µs",
        raw.cpu_micros(CHUNK),
        one.cpu_micros(CHUNK),
        many.cpu_micros(many_count)
    );
    println!(
        "resident memory per idle stored Session after {IDLE_SESSIONS}: {per_session:.0} bytes ({live} owners still live)"
    );
}
