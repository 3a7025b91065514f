//! Whole agent runs, measured as ratios within one run of this bench.
//!
//! `cargo bench -p shiitake-core --bench run` prints, each beside its target:
//! - sequential 10-call runs/s vs the fsync-bound limit: the raw commit rate (a sqlx
//!   `BEGIN; INSERT; COMMIT` loop on the same SQLite settings) divided by the commits
//!   a run makes (counted by the store's writer);
//! - runs/s of 64 Sessions in parallel vs sequential;
//! - CPU per committed message vs the CPU of one durable acceptance (64 callers), and
//!   those callers' acceptances/s;
//! - the median turn of one Session at 1,000 turns vs its first 100 turns;
//! - database bytes per run (after a WAL checkpoint) vs the JSON bytes of its messages;
//! - restart at scale: 10,000 stored Sessions, 1,000 with a run in flight when the
//!   process was killed (a real child process, `SIGKILL`); the time from open until
//!   every one of those runs made its first model call.
//!
//! A run is the workload: one new Session, one prompt, ten calls of an instant
//! scripted model (nine `files__read` tool calls, then a text answer), on
//! `Durability::Full`. Phases are interleaved in rounds so every ratio compares phases
//! that saw the same disk (see `benches/acceptance.rs`).
//!
//! `SHIITAKE_BENCH_DURABILITY=normal` runs both sides without an fsync per commit, to
//! separate the run's own latency from the disk's.
//! `SHIITAKE_BENCH_PROFILE=seq|par|turns|acc|warm` repeats one phase for `perf record`
//! or cachegrind (`acc`: the acceptance phase with its warm Sessions, `warm`: those
//! Sessions alone, so the difference of the two counts is the acceptances' own);
//! with `SHIITAKE_BENCH_KEEP=1` it keeps its database and prints where.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
};
use shiitake_core::store::{Op, SessionHeader, Store, StoredEntry};
use shiitake_core::{Agent, AgentConfig, FixedModel, LocalSession};
use shiitake_model::{
    AssistantStream, Model, ModelContext, ModelError, ModelInfo, ModelOptions, Recording, Script,
    ScriptedModel, Step, Turn,
};
use shiitake_protocol::message::{Message, UserMessage};
use shiitake_protocol::{
    AgentApi, PageLimit, PromptText, ReadOptions, RequestId, SendOptions, SessionApi, SessionFrame,
    SessionId, SubscribeOptions,
};
use shiitake_store_sqlite::SqliteStore;
use support::{
    Phase, checkpointed_bytes, durability, entry_id, header, load_average, many_callers,
    raw_commits, raw_connection,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Interleaved rounds of the phases.
const ROUNDS: usize = 10;
/// Raw commits per round.
const RAW_CHUNK: usize = 100;
/// Sequential runs per round.
const SEQUENTIAL: usize = 20;
/// Sessions running at once in the parallel phase (one run each per round).
const PARALLEL: usize = 64;
/// Prompts each acceptance caller sends per round.
const PER_CALLER: usize = 4;
/// Model calls of a run: this many minus one tool calls, then the answer.
const CALLS_PER_RUN: usize = 10;
/// Follow-up turns of the long Session, and the window compared at each end.
const TURNS: usize = 1_000;
const WINDOW: usize = 100;
/// Restart at scale: stored Sessions, of which this many had a run in flight.
const STORED: usize = 10_000;
const IN_FLIGHT: usize = 1_000;
/// Messages of each idle stored Session's history.
const IDLE_HISTORY: usize = 20;
const CHILD_ENV: &str = "SHIITAKE_BENCH_RUN_CHILD";

/// Answers with a tool call until the current run has `tools` tool results, then with
/// text; asked for a summary (a call that offers no tools), it gives one.
///
/// Which turn comes next is read from the context (counting back to the last user
/// message), so Sessions running at once each get their own ten calls.
struct RunModel {
    tool: ScriptedModel,
    answer: ScriptedModel,
    summary: ScriptedModel,
    tools: usize,
}

impl RunModel {
    fn new(tools: usize) -> Self {
        let read = Turn::new(vec![Step::tool_call(
            "files__read",
            json!({"path": "src/lib.rs"}),
        )]);
        Self {
            tool: ScriptedModel::new(Script::new(vec![read]).cycle(true))
                .with_recording(Recording::Off),
            answer: ScriptedModel::new(
                Script::new(vec![Turn::text("The file holds the crate root.")]).cycle(true),
            )
            .with_recording(Recording::Off),
            summary: ScriptedModel::new(
                Script::new(vec![Turn::text(
                    "The person asked again and again to read src/lib.rs; it holds the crate root.",
                )])
                .cycle(true),
            )
            .with_recording(Recording::Off),
            tools,
        }
    }
}

#[async_trait]
impl Model for RunModel {
    fn describe(&self) -> ModelInfo {
        self.tool.describe()
    }

    async fn stream(
        &self,
        context: ModelContext,
        options: ModelOptions,
        cancel: CancellationToken,
    ) -> Result<AssistantStream, ModelError> {
        if context.tools.is_empty() {
            return self.summary.stream(context, options, cancel).await;
        }
        let results = context
            .messages
            .iter()
            .rev()
            .take_while(|message| !matches!(message, Message::User(_)))
            .filter(|message| matches!(message, Message::ToolResult(_)))
            .count();
        if results < self.tools {
            self.tool.stream(context, options, cancel).await
        } else {
            self.answer.stream(context, options, cancel).await
        }
    }
}

/// Never answers; counts calls and wakes a waiter when `target` calls were made.
struct Stalled {
    inner: ScriptedModel,
    calls: AtomicUsize,
    target: usize,
    reached: Notify,
}

impl Stalled {
    fn new(target: usize) -> Self {
        let never = Turn::new(vec![Step::DelayMs(600_000), Step::Text("late".into())]);
        Self {
            inner: ScriptedModel::new(Script::new(vec![never]).cycle(true))
                .with_recording(Recording::Off),
            calls: AtomicUsize::new(0),
            target,
            reached: Notify::new(),
        }
    }
}

#[async_trait]
impl Model for Stalled {
    fn describe(&self) -> ModelInfo {
        self.inner.describe()
    }

    async fn stream(
        &self,
        context: ModelContext,
        options: ModelOptions,
        cancel: CancellationToken,
    ) -> Result<AssistantStream, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.target {
            self.reached.notify_one();
        }
        self.inner.stream(context, options, cancel).await
    }
}

/// The `files.read` tool: answers at once with a fixed small file.
async fn catalog() -> Arc<Catalog> {
    let read = Operation::from_fn(
        OperationName::new("read").unwrap(),
        "Reads a file.",
        |_input, _ctx| async move {
            Ok(json!({"path": "src/lib.rs", "text": "//! The crate root.\npub mod run;\n"}))
        },
    )
    .with_replay(Replay::Safe);
    let module = Module::new(ModulePath::new("files").unwrap(), "Files.")
        .with_operation(read)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("bench"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

async fn open_agent(
    path: &Path,
    model: Arc<dyn Model>,
    tools: Arc<Catalog>,
) -> (Agent, Arc<SqliteStore>) {
    let store = Arc::new(SqliteStore::open(path, durability().0).await.unwrap());
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.owner_idle = Duration::from_secs(60);
    let agent = Agent::open(store.clone(), tools, config).await.unwrap();
    (agent, store)
}

fn prompt(text: &str) -> PromptText {
    PromptText::new(text.to_owned()).unwrap()
}

/// Sends one prompt and waits for its run's terminal, watching as a client would.
async fn turn(session: &LocalSession, text: &str) {
    let mut frames = session
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    let command_id = session
        .send(prompt(text), SendOptions::default())
        .await
        .unwrap()
        .command_id;
    while let Some(frame) = frames.next().await {
        if let SessionFrame::Update(update) = frame.unwrap()
            && let Some(terminal) = update
                .terminals
                .iter()
                .find(|terminal| terminal.command_id == command_id)
        {
            assert_eq!(
                terminal.outcome,
                shiitake_protocol::TerminalOutcome::Completed,
                "{:?}",
                terminal.diagnostic
            );
            return;
        }
    }
    panic!("the frame stream ended before the run's terminal");
}

/// One run in a new Session.
async fn one_run(agent: &Agent, name: String) -> SessionId {
    let id = agent
        .create_session(RequestId::new(name).unwrap())
        .await
        .unwrap();
    turn(
        &agent.session(id.clone()),
        "Read src/lib.rs and say what it holds.",
    )
    .await;
    id
}

async fn sequential(agent: &Agent, round: usize) -> Duration {
    let started = Instant::now();
    for n in 0..SEQUENTIAL {
        one_run(agent, format!("seq-{round}-{n}")).await;
    }
    started.elapsed()
}

async fn parallel(agent: &Agent, round: usize) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = (0..PARALLEL)
        .map(|n| {
            let agent = agent.clone();
            tokio::spawn(async move { one_run(&agent, format!("par-{round}-{n}")).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

/// Sessions whose first prompt is in (their run waits on a model that never answers).
async fn warm_sessions(agent: &Agent, round: usize) -> Vec<LocalSession> {
    let mut sessions = Vec::with_capacity(PARALLEL);
    for n in 0..PARALLEL {
        let id = agent
            .create_session(RequestId::new(format!("acc-{round}-{n}")).unwrap())
            .await
            .unwrap();
        let session = agent.session(id);
        session
            .send(prompt("start"), SendOptions::default())
            .await
            .unwrap();
        sessions.push(session);
    }
    sessions
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values[values.len() / 2]
}

/// The median turn of the first and of the last [`WINDOW`] turns.
fn turn_medians(turns: &mut [Duration]) -> (Duration, Duration) {
    let mut early = turns[..WINDOW].to_vec();
    let late = median(&mut turns[TURNS - WINDOW..]);
    (median(&mut early), late)
}

/// Times [`TURNS`] follow-up turns of one Session, each one tool call then an answer.
async fn long_session(dir: &Path, tools: Arc<Catalog>) -> Vec<Duration> {
    let (agent, _) = open_agent(&dir.join("turns.db"), Arc::new(RunModel::new(1)), tools).await;
    let id = agent
        .create_session(RequestId::new("long").unwrap())
        .await
        .unwrap();
    let session = agent.session(id);
    let mut times = Vec::with_capacity(TURNS);
    for n in 0..TURNS {
        let started = Instant::now();
        turn(&session, &format!("turn {n}: read src/lib.rs again")).await;
        times.push(started.elapsed());
    }
    agent.close().await.unwrap();
    times
}

/// A stored idle Session: settled, with `messages` entries.
fn idle_header(id: &SessionId, messages: usize, at: u64) -> SessionHeader {
    SessionHeader {
        settled_at: Some(at),
        ..header(id, messages, at)
    }
}

/// The child of the restart phase: stores the Sessions, starts the runs, says `ready`
/// and waits to be killed.
async fn prepare_restart(path: &Path) {
    let store = SqliteStore::open(path, durability().0).await.unwrap();
    let mut ops = Vec::new();
    for n in 0..STORED - IN_FLIGHT {
        let id = SessionId::new(format!("ses_idle_{n:08}")).unwrap();
        ops.push(Op::CreateSession {
            header: idle_header(&id, IDLE_HISTORY, n as u64 + 1),
            request_id: None,
        });
        for m in 1..=IDLE_HISTORY {
            let message = Message::User(UserMessage::text(
                format!("message number {m} of an idle history"),
                m as u64,
            ));
            ops.push(Op::InsertEntry {
                session_id: id.clone(),
                entry: StoredEntry {
                    id: entry_id(m),
                    parent: (m > 1).then(|| entry_id(m - 1)),
                    sequence: m as u64,
                    command_id: None,
                    message,
                },
            });
        }
        if ops.len() >= 2_000 {
            store.commit(std::mem::take(&mut ops)).await.unwrap();
        }
    }
    if !ops.is_empty() {
        store.commit(ops).await.unwrap();
    }
    drop(store);
    let model = Arc::new(Stalled::new(IN_FLIGHT));
    let (agent, _) = open_agent(path, model.clone(), catalog().await).await;
    for chunk in 0..IN_FLIGHT / 100 {
        let tasks: Vec<_> = (0..100)
            .map(|n| {
                let agent = agent.clone();
                tokio::spawn(async move {
                    let id = agent
                        .create_session(RequestId::new(format!("busy-{chunk}-{n}")).unwrap())
                        .await
                        .unwrap();
                    agent
                        .session(id)
                        .send(prompt("work"), SendOptions::default())
                        .await
                        .unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    }
    model.reached.notified().await;
    println!("ready");
    std::io::stdout().flush().unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// Kills a child mid-run, reopens its database and times the resumption.
async fn restart_at_scale(dir: &Path) -> (Duration, usize, usize) {
    let path = dir.join("restart.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    child.kill().unwrap();
    child.wait().unwrap();
    let model = Arc::new(Stalled::new(IN_FLIGHT));
    let started = Instant::now();
    let (agent, _) = open_agent(&path, model.clone(), catalog().await).await;
    tokio::time::timeout(Duration::from_secs(60), model.reached.notified())
        .await
        .expect("every run resumed within a minute");
    let took = started.elapsed();
    let live = agent.live_sessions();
    let calls = model.calls.load(Ordering::SeqCst);
    agent.close().await.unwrap();
    (took, live, calls)
}

async fn profile(phase: &str, dir: &Path, tools: Arc<Catalog>) {
    if phase == "turns" {
        let mut turns = long_session(dir, tools).await;
        let (early, late) = turn_medians(&mut turns);
        println!(
            "turns: median first {WINDOW} {:.2} ms, last {WINDOW} {:.2} ms",
            early.as_secs_f64() * 1e3,
            late.as_secs_f64() * 1e3
        );
        return;
    }
    if phase == "acc" || phase == "warm" {
        let (acceptor, _) = open_agent(
            &dir.join("profile.db"),
            Arc::new(Stalled::new(usize::MAX)),
            tools,
        )
        .await;
        for round in 0..ROUNDS * 3 {
            let waiting = warm_sessions(&acceptor, round).await;
            if phase == "acc" {
                let took = many_callers(&waiting, PER_CALLER).await;
                let rate = (PARALLEL * PER_CALLER) as f64 / took.as_secs_f64();
                println!("{phase}: {rate:.0} acceptances/s");
            }
        }
        acceptor.close().await.unwrap();
        return;
    }
    let (agent, _) = open_agent(
        &dir.join("profile.db"),
        Arc::new(RunModel::new(CALLS_PER_RUN - 1)),
        tools,
    )
    .await;
    for round in 0..ROUNDS * 3 {
        let (runs, took) = if phase == "seq" {
            (SEQUENTIAL, sequential(&agent, round).await)
        } else {
            (PARALLEL, parallel(&agent, round).await)
        };
        println!("{phase}: {:.0} runs/s", runs as f64 / took.as_secs_f64());
    }
    agent.close().await.unwrap();
}

#[tokio::main]
async fn main() {
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        prepare_restart(Path::new(&path)).await;
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = catalog().await;
    if let Ok(phase) = std::env::var("SHIITAKE_BENCH_PROFILE") {
        profile(&phase, dir.path(), tools).await;
        if std::env::var_os("SHIITAKE_BENCH_KEEP").is_some() {
            println!("kept {}", dir.keep().display());
        }
        return;
    }
    let load_before = load_average();
    let mut conn = raw_connection(dir.path()).await;
    let runs_path = dir.path().join("runs.db");
    let (agent, store) = open_agent(
        &runs_path,
        Arc::new(RunModel::new(CALLS_PER_RUN - 1)),
        tools.clone(),
    )
    .await;
    let (acceptor, _) = open_agent(
        &dir.path().join("accept.db"),
        Arc::new(Stalled::new(usize::MAX)),
        tools.clone(),
    )
    .await;
    // One run before timing: the first pays for growing the files.
    let first = one_run(&agent, "warm".to_owned()).await;
    let (mut raw, mut seq, mut par, mut acc) = (
        Phase::default(),
        Phase::default(),
        Phase::default(),
        Phase::default(),
    );
    let mut commits = 0;
    for round in 0..ROUNDS {
        let waiting = warm_sessions(&acceptor, round).await;
        raw.time(raw_commits(&mut conn, RAW_CHUNK)).await;
        let before = store.commits();
        seq.time(sequential(&agent, round)).await;
        commits += store.commits() - before;
        par.time(parallel(&agent, round)).await;
        acc.time(many_callers(&waiting, PER_CALLER)).await;
    }
    let snapshot = agent
        .session(first)
        .read(ReadOptions {
            limit: Some(PageLimit::new(200).unwrap()),
            ..ReadOptions::default()
        })
        .await
        .unwrap();
    let messages = snapshot.messages.len();
    let json_bytes: usize = snapshot
        .messages
        .iter()
        .map(|message| serde_json::to_string(&message.value).unwrap().len())
        .sum();
    agent.close().await.unwrap();
    acceptor.close().await.unwrap();
    drop(store);
    let total_runs = 1 + ROUNDS * (SEQUENTIAL + PARALLEL);
    let bytes_per_run = checkpointed_bytes(&runs_path).await as f64 / total_runs as f64;
    let mut turns = long_session(dir.path(), tools).await;
    let (early_median, late_median) = turn_medians(&mut turns);
    let (restart, live, calls) = restart_at_scale(dir.path()).await;

    let commits_per_run = commits as f64 / (ROUNDS * SEQUENTIAL) as f64;
    let limit = raw.rate(RAW_CHUNK) / commits_per_run;
    let cpu_message = par.cpu_micros(PARALLEL * messages);
    let cpu_acceptance = acc.cpu_micros(PARALLEL * PER_CALLER);
    println!(
        "{ROUNDS} interleaved rounds; load average before {load_before}, after {}",
        load_average()
    );
    println!(
        "a run: {CALLS_PER_RUN} model calls, {messages} messages ({json_bytes} JSON bytes), {commits_per_run:.1} commits"
    );
    println!(
        "raw sqlx insert+commit:        {:>8.0} commits/s -> fsync-bound limit {limit:.0} runs/s",
        raw.rate(RAW_CHUNK)
    );
    println!(
        "sequential runs:               {:>8.1} runs/s    ratio vs limit {:.2}x (target >= 0.8x); CPU {:.0} µs a message",
        seq.rate(SEQUENTIAL),
        seq.rate(SEQUENTIAL) / limit,
        seq.cpu_micros(SEQUENTIAL * messages)
    );
    println!(
        "{PARALLEL} Sessions in parallel:     {:>8.1} runs/s    ratio vs sequential {:.2}x (target >= 5x)",
        par.rate(PARALLEL),
        par.rate(PARALLEL) / seq.rate(SEQUENTIAL)
    );
    println!(
        "CPU per committed message ({PARALLEL} parallel) {cpu_message:.0} µs vs acceptance ({PARALLEL} callers) {cpu_acceptance:.0} µs: ratio {:.2}x (target <= 1.5x)",
        cpu_message / cpu_acceptance
    );
    println!(
        "{PARALLEL} callers' acceptances:      {:>8.0} prompts/s",
        acc.rate(PARALLEL * PER_CALLER)
    );
    println!(
        "one Session, {TURNS} turns: median turn first {WINDOW} {:.2} ms, last {WINDOW} {:.2} ms: ratio {:.2}x (target <= 1.3x)",
        early_median.as_secs_f64() * 1e3,
        late_median.as_secs_f64() * 1e3,
        late_median.as_secs_f64() / early_median.as_secs_f64()
    );
    println!(
        "bytes per run (checkpointed): {bytes_per_run:.0} vs {json_bytes} JSON bytes: ratio {:.2}x (target <= 1.2x)",
        bytes_per_run / json_bytes as f64
    );
    println!(
        "restart: {STORED} stored Sessions, {IN_FLIGHT} in flight when killed: all resumed {:.2} s after open (target <= 2 s); {calls} model calls, {live} owners live",
        restart.as_secs_f64()
    );
}
