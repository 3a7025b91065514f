//! The throughput phase: acceptances/s and 10-step runs/s with 1, 2 and 3
//! processes on one PostgreSQL database, printed as ratios to one process.
//!
//! One cluster of 1, 2 and 3 processes each (each cluster its own Agent key on the
//! database, all up at once):
//!
//! - **Acceptance.** `CALLERS` callers, each on its own Session whose run never
//!   gets an answer (its prompt starts with `hold`), so every further prompt only
//!   queues: each acceptance is one durable commit. Caller `i` created its Session
//!   through process `i % P` and sends there (sticky routing, as a load balancer
//!   keyed by Session would), `PER_CALLER` prompts one after the other.
//! - **Runs.** `RUNS` Sessions at once, spread over the processes the same way,
//!   each running one prompt to the end: ten model calls (each a 5 ms scripted
//!   pause then a call of the tool `hub.mark`, which here does nothing), their ten
//!   results, and the final answer; a run counts when its terminal reaches a
//!   subscriber on the process that accepted it.
//!
//! The phases of the three clusters are interleaved round by round, so a drift of
//! the machine's speed affects each alike; a rate is the total count over the total
//! time of its rounds.
//!
//! **The baseline**, in the same run on the same database (`pgstat.rs`): raw
//! `INSERT; COMMIT` from as many connections as each phase has callers (`CALLERS`
//! for acceptances, `RUNS` for runs). The durable commits of the one-process runs
//! are counted on the server, so the runs' limit is the raw rate over the commits a
//! run makes, and each figure is printed as a ratio of its limit.

use std::path::Path;

use sqlx::Connection;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use shiitake_client::RemoteAgent;
use shiitake_protocol::{
    AgentApi, PromptText, RequestId, SendOptions, SessionApi, SessionFrame, SessionId, WatchOptions,
};

use crate::Failure;
use crate::cluster::{Node, NodeSpec, client, spawn_node_at};
use crate::machine::{CpuTicks, KINDS};
use crate::pgstat::{self, Counters};

/// Concurrent callers of the acceptance phase.
pub(crate) const CALLERS: usize = 48;
/// Prompts each caller sends in one round.
pub(crate) const PER_CALLER: usize = 10;
/// Runs started at once in one round.
pub(crate) const RUNS: usize = 30;
/// Tool calls of a run.
pub(crate) const STEPS: usize = 10;
/// The scripted model's pause before each of a run's `STEPS + 1` answers (`hub_node`).
const MODEL_PAUSE_MS: u64 = 5;
/// Lease period of the nodes (no failover here; long enough not to matter).
pub(crate) const LEASE_MS: u64 = 5000;

/// The processes of one Agent and the Sessions the phases use.
pub(crate) struct Cluster {
    nodes: Vec<(Node, RemoteAgent)>,
    /// The acceptance Sessions, each held by a run that never ends.
    held: Vec<SessionId>,
    /// Phase totals: (count, time).
    accepted: (usize, Duration),
    /// The machine's CPU ticks over the acceptance rounds.
    accepted_cpu: CpuTicks,
    ran: (usize, Duration),
    round: usize,
}

impl Cluster {
    pub(crate) async fn start(
        binary: &Path,
        database: &str,
        logs: &Path,
        processes: usize,
    ) -> Result<Self, Failure> {
        let key = format!(
            "bench-{processes}-{}",
            ulid::Ulid::generate().to_string().to_lowercase()
        );
        let spec = NodeSpec {
            marks: false,
            ..NodeSpec::new(LEASE_MS, STEPS)
        };
        let nodes = (0..processes)
            .map(|n| {
                let node = spawn_node_at(
                    binary,
                    database,
                    &key,
                    logs,
                    &format!("{processes}-{n}"),
                    spec,
                );
                let agent = client(&node.url);
                (node, agent)
            })
            .collect();
        let mut cluster = Self {
            nodes,
            held: Vec::new(),
            accepted: (0, Duration::ZERO),
            accepted_cpu: CpuTicks::default(),
            ran: (0, Duration::ZERO),
            round: 0,
        };
        for caller in 0..CALLERS {
            let client = cluster.client(caller);
            let session = held_session(&client, caller).await?;
            cluster.held.push(session);
        }
        Ok(cluster)
    }

    fn client(&self, index: usize) -> RemoteAgent {
        self.nodes[index % self.nodes.len()].1.clone()
    }

    /// One round of the acceptance phase.
    async fn accept_round(&mut self) -> Result<(), Failure> {
        let sessions = self
            .held
            .iter()
            .enumerate()
            .map(|(caller, session)| self.client(caller).session(session.clone()))
            .collect();
        let before = CpuTicks::now();
        let took = accept_all(sessions, self.round).await?;
        self.accepted_cpu = self.accepted_cpu.plus(CpuTicks::now().since(before));
        self.accepted.0 += CALLERS * PER_CALLER;
        self.accepted.1 += took;
        Ok(())
    }

    /// The `RUNS` Sessions of the next round of the runs phase, created one after the
    /// other (before the clock starts).
    pub(crate) async fn fresh_sessions(
        &self,
    ) -> Result<Vec<shiitake_client::RemoteSession>, Failure> {
        let round = self.round;
        let mut sessions = Vec::with_capacity(RUNS);
        for run in 0..RUNS {
            let client = self.client(run);
            let id = client
                .create_session(RequestId::new(format!("run-{round}-{run}"))?)
                .await?;
            sessions.push(client.session(id));
        }
        Ok(sessions)
    }

    /// Runs one prompt on each of `sessions` at once, to its terminal.
    pub(crate) async fn run_sessions(
        &mut self,
        sessions: Vec<shiitake_client::RemoteSession>,
    ) -> Result<(), Failure> {
        let started = Instant::now();
        let runs = sessions.into_iter().map(run_to_terminal);
        for result in join_all(runs).await {
            result?;
        }
        self.ran.0 += RUNS;
        self.ran.1 += started.elapsed();
        self.round += 1;
        Ok(())
    }
}

/// A new Session of caller `caller` whose run never ends (its prompt starts with
/// `hold`), so every later prompt only queues.
pub(crate) async fn held_session(
    client: &RemoteAgent,
    caller: usize,
) -> Result<SessionId, Failure> {
    let session = client
        .create_session(RequestId::new(format!("held-{caller}"))?)
        .await?;
    client
        .session(session.clone())
        .send(PromptText::new("hold")?, SendOptions::default())
        .await?;
    Ok(session)
}

/// One round of acceptances: each of `sessions` (held: its run never ends) is sent
/// `PER_CALLER` prompts one after the other, all Sessions at once; how long it took.
pub(crate) async fn accept_all(
    sessions: Vec<shiitake_client::RemoteSession>,
    round: usize,
) -> Result<Duration, Failure> {
    let started = Instant::now();
    let callers = sessions.into_iter().map(|session| async move {
        for prompt in 0..PER_CALLER {
            let text = PromptText::new(format!("hold {round}.{prompt}"))?;
            session.send(text, SendOptions::default()).await?;
        }
        Ok::<(), Failure>(())
    });
    for result in join_all(callers).await {
        result?;
    }
    Ok(started.elapsed())
}

/// Runs one prompt (`run`) on `session`, until its terminal reaches a subscriber of
/// the same process.
pub(crate) async fn run_to_terminal(
    session: shiitake_client::RemoteSession,
) -> Result<(), Failure> {
    let watch = session.watch(WatchOptions::default()).await?;
    let accepted = session
        .send(PromptText::new("run")?, SendOptions::default())
        .await?;
    let mut changes = watch.changes;
    while let Some(frame) = changes.next().await {
        let done = match frame? {
            SessionFrame::Update(update) => update
                .terminals
                .iter()
                .any(|terminal| terminal.command_id == accepted.command_id),
            SessionFrame::Reset(reset) => reset
                .baseline
                .terminals
                .iter()
                .any(|terminal| terminal.command_id == accepted.command_id),
            SessionFrame::Progress(_) => false,
        };
        if done {
            return Ok(());
        }
    }
    Err("a subscription ended before its run did".into())
}

/// What the whole machine spent (every process: the Hub's, PostgreSQL's, the callers')
/// on one acceptance of one process and on one raw commit: while both phases keep the
/// cores busy, acceptances can reach at most (raw CPU ÷ acceptance CPU) of the raw rate.
fn print_cpu((accepted, accept_cpu): (usize, CpuTicks), raw_commits: f64, raw_cpu: CpuTicks) {
    #[allow(clippy::cast_precision_loss)]
    let per_acceptance = accept_cpu.busy_time().as_secs_f64() * 1e6 / accepted.max(1) as f64;
    let per_raw = raw_cpu.busy_time().as_secs_f64() * 1e6 / raw_commits.max(1.0);
    println!(
        "machine CPU (/proc/stat, every process): 1-process acceptances {:.0}% busy, {per_acceptance:.0} µs an acceptance; \
         raw {CALLERS}-connection commits {:.0}% busy, {per_raw:.0} µs a commit; an acceptance costs {:.2} raw commits of CPU, \
         so on busy cores acceptances reach at most {:.2}x of the raw rate",
        accept_cpu.busy_share() * 100.0,
        raw_cpu.busy_share() * 100.0,
        per_acceptance / per_raw.max(f64::MIN_POSITIVE),
        per_raw / per_acceptance.max(f64::MIN_POSITIVE),
    );
    let mut shares = Vec::new();
    for ((_, kind), time) in KINDS.iter().zip(accept_cpu.kind_times()) {
        #[allow(clippy::cast_precision_loss)]
        let micros = time.as_secs_f64() * 1e6 / accepted.max(1) as f64;
        shares.push(format!("{kind} {micros:.0} µs"));
    }
    println!("an acceptance's CPU by process: {}", shares.join(", "));
}

/// Count over time, per second.
pub(crate) fn rate((count, time): (usize, Duration)) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let count = count as f64;
    count / time.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// Runs `rounds` rounds of both phases on clusters of 1, 2 and 3 processes and
/// prints the table of `docs/benchmarks.md`, then the baseline and the limits.
pub async fn run(binary: &Path, database: &str, rounds: usize) -> Result<(), Failure> {
    let logs = tempfile::tempdir()?;
    let mut clusters = Vec::new();
    for processes in 1..=3 {
        clusters.push(Cluster::start(binary, database, logs.path(), processes).await?);
    }
    let mut counters = sqlx::PgConnection::connect(database).await?;
    let mut one_process: Option<Counters> = None;
    for round in 0..rounds {
        for cluster in &mut clusters {
            cluster.accept_round().await?;
        }
        for (index, cluster) in clusters.iter_mut().enumerate() {
            let sessions = cluster.fresh_sessions().await?;
            let before = Counters::read(&mut counters).await?;
            cluster.run_sessions(sessions).await?;
            if index == 0 {
                let phase = Counters::read(&mut counters).await?.since(before);
                one_process = Some(one_process.map_or(phase, |sum| sum.plus(phase)));
            }
        }
        eprintln!("hub_bench: round {} of {rounds} done", round + 1);
    }
    // The clusters stay up (idle but for their heartbeats), as in the phases.
    let before = CpuTicks::now();
    let raw_accept = pgstat::raw_commit_rate(database, CALLERS).await?;
    let raw_accept_cpu = CpuTicks::now().since(before);
    let raw_runs = pgstat::raw_commit_rate(database, RUNS).await?;
    let raw_one = pgstat::raw_commit_rate(database, 1).await?;
    let load = crate::load_average();
    let base_accept = rate(clusters[0].accepted);
    let base_runs = rate(clusters[0].ran);
    println!(
        "Hub on PostgreSQL, {rounds} rounds: {CALLERS} callers x {PER_CALLER} prompts; {RUNS} runs of {STEPS} steps; load {load}"
    );
    println!("| processes | acceptances/s | ratio | 10-step runs/s | ratio |");
    println!("| --- | --- | --- | --- | --- |");
    for (index, cluster) in clusters.iter().enumerate() {
        let accept = rate(cluster.accepted);
        let runs = rate(cluster.ran);
        println!(
            "| {} | {accept:.0} | {:.2}x | {runs:.1} | {:.2}x |",
            index + 1,
            accept / base_accept,
            runs / base_runs
        );
    }
    let one_process = one_process.unwrap_or_default();
    #[allow(clippy::cast_precision_loss)]
    let ran = clusters[0].ran.0 as f64;
    #[allow(clippy::cast_precision_loss)]
    let per_run = |count: i64| count as f64 / ran.max(1.0);
    let commits_per_run = per_run(one_process.durable_commits());
    let limit = raw_runs / commits_per_run.max(f64::MIN_POSITIVE);
    let optional = |count: Option<i64>| {
        count.map_or_else(|| "-".to_owned(), |count| format!("{:.1}", per_run(count)))
    };
    println!();
    println!(
        "Baseline on the same database: raw INSERT; COMMIT, {} s per figure",
        pgstat::RAW_FOR.as_secs()
    );
    println!("| connections | commits/s |");
    println!("| --- | --- |");
    println!("| 1 | {raw_one:.0} |");
    println!("| {RUNS} (the runs phase) | {raw_runs:.0} |");
    println!("| {CALLERS} (the acceptance phase) | {raw_accept:.0} |");
    println!();
    println!(
        "1 process, per 10-step run (server counters): {:.1} durable commits, {} statements, {} COMMITs, {} savepoints",
        commits_per_run,
        optional(one_process.statements),
        optional(one_process.commits),
        optional(one_process.savepoints),
    );
    println!(
        "limit = {raw_runs:.0} commits/s / {commits_per_run:.1} commits per run = {limit:.1} runs/s; 1 process: {base_runs:.1} runs/s = {:.2}x of it",
        base_runs / limit.max(f64::MIN_POSITIVE)
    );
    #[allow(clippy::cast_precision_loss)]
    let paused = RUNS as f64 * 1000.0 / ((STEPS as u64 + 1) * MODEL_PAUSE_MS) as f64;
    println!(
        "the model's pauses alone: {RUNS} runs at once / ({} answers x {MODEL_PAUSE_MS} ms) = {paused:.0} runs/s; 1 process = {:.2}x of the lower of the two limits",
        STEPS + 1,
        base_runs / limit.min(paused).max(f64::MIN_POSITIVE)
    );
    println!(
        "acceptances: 1 process {base_accept:.0}/s = {:.2}x of raw commits with {CALLERS} connections",
        base_accept / raw_accept.max(f64::MIN_POSITIVE)
    );
    print_cpu(
        (clusters[0].accepted.0, clusters[0].accepted_cpu),
        raw_accept * pgstat::RAW_FOR.as_secs_f64(),
        raw_accept_cpu,
    );
    Ok(())
}
