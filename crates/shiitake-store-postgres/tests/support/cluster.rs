//! Hub processes for the multi-process tests and the Hub benchmark's failover
//! phases (`examples/hub_bench/`, which includes this file): `examples/hub_node.rs`
//! children on one database, clients that move on from a dead or stalled process,
//! Sessions driven through all of them, subscribers that record what they saw, and
//! the checks every such run makes on the database afterwards.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use shiitake_client::{ClientOptions, ReconnectPolicy, RemoteAgent};
use shiitake_protocol::{
    AgentApi, CommandId, EntryId, PromptText, ReadOptions, RequestId, SendOptions, SessionApi,
    SessionFrame, SessionId, SessionMessage, SessionTerminal, WatchOptions,
};
use sqlx::{Connection, Row};

/// The token of every `hub_node`.
pub const NODE_TOKEN: &str = "hub-test-token-0123456789abcdef";

/// How a test's nodes run.
#[derive(Clone, Copy, Debug)]
pub struct NodeSpec {
    /// The lease period, in milliseconds.
    pub lease_ms: u64,
    /// `hub.mark` calls per run.
    pub steps: usize,
    /// The heartbeat, in milliseconds; `None` is the store's default for the lease.
    pub heartbeat_ms: Option<u64>,
    /// Whether `hub.mark` records each execution in `<dir>/marks` (else it does
    /// nothing, as the throughput benchmark wants).
    pub marks: bool,
}

impl NodeSpec {
    /// Nodes with leases of `lease_ms`, runs of `steps` marks, the default
    /// heartbeat, recording marks.
    pub fn new(lease_ms: u64, steps: usize) -> Self {
        Self {
            lease_ms,
            steps,
            heartbeat_ms: None,
            marks: true,
        }
    }
}

/// One Hub process.
pub struct Node {
    pub child: Child,
    pub url: String,
    pub holder: String,
    pub log: PathBuf,
    /// Lines it printed on stdout after `READY` (`DRAINED`).
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for Node {
    /// A test that fails midway leaves no process behind.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) && self.child.kill().is_ok() {
            // Reaped; how it ended does not matter any more.
            drop(self.child.wait());
        }
    }
}

impl Node {
    /// Sends `signal` (`-STOP`, `-CONT`, `-TERM`) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} failed");
    }

    /// SIGTERM, then waits for the process to drain and exit; its exit status and how
    /// long that took.
    pub fn drain(&mut self) -> (std::process::ExitStatus, Duration) {
        let started = Instant::now();
        self.signal("-TERM");
        let status = self.child.wait().unwrap();
        (status, started.elapsed())
    }

    /// SIGKILL, and reaps it.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// What it wrote on stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The value of the unlabelled counter or gauge `name` in its `GET /metrics`
    /// (started with `HUB_NODE_METRICS=1`); 0 when it was never recorded, as the
    /// recorder renders only what was.
    pub async fn metric(&self, name: &str) -> f64 {
        let scrape = http_get(&self.url, "/metrics").await;
        scrape
            .lines()
            .filter(|line| !line.starts_with('#'))
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .map_or(0.0, |value| value.trim().parse().unwrap())
    }
}

/// `GET path` of the node at `base` (`http://host:port`) with the node token: the body
/// of a 200 answer.
pub async fn http_get(base: &str, path: &str) -> String {
    let response = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(NODE_TOKEN)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// The `hub_node` example, built now: `cargo test -p shiitake-store-postgres --test all --
/// suite::failover::` alone does not build examples, and a stale node would test old code.
pub fn node_binary() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "-p",
                "shiitake-store-postgres",
                "--example",
                "hub_node",
            ])
            .status()
            .unwrap();
        assert!(status.success(), "cargo build --example hub_node failed");
    });
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    debug.join("examples").join("hub_node")
}

/// Starts a `hub_node` of `key` (built now) and waits for its `READY`; its stderr
/// goes to `<dir>/<name>.log`, its marks to `<dir>/marks`.
pub fn spawn_node(database: &str, key: &str, dir: &Path, name: &str, spec: NodeSpec) -> Node {
    spawn_node_at(&node_binary(), database, key, dir, name, spec)
}

/// [`spawn_node`] with the `hub_node` at `binary` (the benchmark's release build).
pub fn spawn_node_at(
    binary: &Path,
    database: &str,
    key: &str,
    dir: &Path,
    name: &str,
    spec: NodeSpec,
) -> Node {
    spawn_node_env(binary, database, key, dir, name, spec, &[])
}

/// [`spawn_node_at`] with variables added to the child's environment
/// (`HUB_NODE_METRICS=1` serves `GET /metrics`).
pub fn spawn_node_env(
    binary: &Path,
    database: &str,
    key: &str,
    dir: &Path,
    name: &str,
    spec: NodeSpec,
    env: &[(&str, &str)],
) -> Node {
    let log = dir.join(format!("{name}.log"));
    let effects = if spec.marks {
        dir.to_str().unwrap()
    } else {
        "-"
    };
    let mut command = Command::new(binary);
    command
        .args([
            database,
            key,
            &spec.lease_ms.to_string(),
            effects,
            &spec.steps.to_string(),
        ])
        .args(spec.heartbeat_ms.map(|ms| ms.to_string()))
        .env(
            "RUST_LOG",
            std::env::var("SHIITAKE_NODE_LOG").unwrap_or_else(|_| "warn".to_owned()),
        )
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap(),
        );
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
    let stdout = child.stdout.take().unwrap();
    let (ready, seen) = std::sync::mpsc::channel();
    let (later, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut ready = Some(ready);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match ready.take() {
                Some(tell) if line.starts_with("READY ") => {
                    if tell.send(line).is_err() {
                        break;
                    }
                }
                Some(tell) => ready = Some(tell),
                None => {
                    if later.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let line = seen
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{name} did not start; see {}", log.display()));
    let mut parts = line.split(' ').skip(1);
    let url = parts.next().unwrap().to_owned();
    let holder = parts.next().unwrap().to_owned();
    Node {
        child,
        url,
        holder,
        log,
        lines,
    }
}

/// Starts three nodes (`node0`..`node2`, with [`spawn_node_at`]) and the cluster of them.
pub fn start_three(
    binary: &Path,
    database: &str,
    key: &str,
    dir: &Path,
    spec: NodeSpec,
) -> (Vec<Node>, Arc<Cluster>) {
    let nodes: Vec<Node> = (0..3)
        .map(|n| spawn_node_at(binary, database, key, dir, &format!("node{n}"), spec))
        .collect();
    let cluster = Arc::new(Cluster::new(&nodes));
    (nodes, cluster)
}

/// Creates `count` Sessions, the `i`-th through process `i % 3`.
pub async fn create_sessions(cluster: &Cluster, count: usize) -> Vec<SessionId> {
    let mut sessions = Vec::with_capacity(count);
    for index in 0..count {
        let request = RequestId::new(format!("create-{index}")).unwrap();
        sessions.push(
            cluster
                .client(index % 3)
                .create_session(request)
                .await
                .unwrap(),
        );
    }
    sessions
}

/// Drives each of `sessions` with [`drive_until`] until `stop`.
pub fn drive_all(
    cluster: &Arc<Cluster>,
    sessions: &[SessionId],
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<(CommandId, Duration)>>> {
    sessions
        .iter()
        .enumerate()
        .map(|(index, id)| {
            tokio::spawn(drive_until(
                cluster.clone(),
                index,
                id.clone(),
                stop.clone(),
            ))
        })
        .collect()
}

/// Stops the drivers and gathers every prompt they had acknowledged, with how long
/// its acceptance took.
pub async fn stop_driving(
    stop: &AtomicBool,
    drivers: Vec<tokio::task::JoinHandle<Vec<(CommandId, Duration)>>>,
) -> Vec<(CommandId, Duration)> {
    stop.store(true, Ordering::SeqCst);
    let mut accepted = Vec::new();
    for driver in drivers {
        accepted.extend(driver.await.unwrap());
    }
    accepted
}

/// Subscribers, one per Session, on process `process`.
pub type Watchers = Vec<(SessionId, Arc<Mutex<Seen>>, tokio::task::JoinHandle<()>)>;

/// Starts a subscriber on process `process` for each of `sessions`.
pub fn watch_all(cluster: &Cluster, process: usize, sessions: &[SessionId]) -> Watchers {
    sessions
        .iter()
        .map(|session| {
            let seen: Arc<Mutex<Seen>> = Arc::default();
            let task = tokio::spawn(subscribe(
                cluster.client(process),
                session.clone(),
                seen.clone(),
            ));
            (session.clone(), seen, task)
        })
        .collect()
}

/// Checks each subscriber against the database up to what it has seen now (see
/// [`assert_saw_everything`]), then stops it; the frames it had seen.
pub async fn check_and_stop(database: &str, key: &str, watchers: Watchers) -> usize {
    let mut frames = 0;
    for (session, seen, task) in watchers {
        // What it saw up to now, then the database, which holds at least that much.
        let through = seen
            .lock()
            .unwrap()
            .messages
            .last()
            .map(|(sequence, _)| *sequence);
        assert!(
            through.is_some(),
            "session {session}: its subscriber saw nothing"
        );
        let committed = committed(database, key, &session).await;
        let seen = seen.lock().unwrap();
        assert!(
            !seen.cut,
            "session {session}: the subscription failed on a surviving process"
        );
        assert_saw_everything(&session, &seen, &committed, through);
        frames += seen.messages.len() + seen.terminals.len();
        task.abort();
    }
    frames
}

/// A client of one node that retries quickly.
pub fn client(url: &str) -> RemoteAgent {
    let options = ClientOptions::new(url)
        .with_token(NODE_TOKEN)
        .with_reconnect(ReconnectPolicy {
            initial_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(500),
            max_attempts: 100,
        });
    RemoteAgent::new(options).unwrap()
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The processes as the drivers see them; a restarted process gets a new client.
pub struct Cluster {
    clients: Mutex<Vec<RemoteAgent>>,
    alive: Vec<AtomicBool>,
}

impl Cluster {
    pub fn new(nodes: &[Node]) -> Self {
        Self {
            clients: Mutex::new(nodes.iter().map(|node| client(&node.url)).collect()),
            alive: nodes.iter().map(|_| AtomicBool::new(true)).collect(),
        }
    }

    /// The client of process `index`.
    pub fn client(&self, index: usize) -> RemoteAgent {
        self.clients.lock().unwrap()[index].clone()
    }

    /// Marks process `index` up (with its new address) or down.
    pub fn set(&self, index: usize, url: Option<&str>) {
        if let Some(url) = url {
            self.clients.lock().unwrap()[index] = client(url);
        }
        self.alive[index].store(url.is_some(), Ordering::SeqCst);
    }

    /// Runs `call` against the processes from `start` on, skipping dead ones and
    /// moving on after a failure or a stall, until one answers.
    pub async fn call<T, F, Fut>(&self, start: usize, call: F) -> T
    where
        F: Fn(RemoteAgent) -> Fut,
        Fut: std::future::Future<Output = Result<T, shiitake_protocol::ShiitakeError>>,
    {
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut attempt = start;
        loop {
            assert!(Instant::now() < deadline, "no process answered for 90 s");
            let index = attempt % self.alive.len();
            attempt += 1;
            if !self.alive[index].load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            let client = self.client(index);
            match tokio::time::timeout(Duration::from_secs(4), call(client)).await {
                Ok(Ok(value)) => return value,
                Ok(Err(error)) => {
                    eprintln!("process {index} answered {error}; trying the next");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(_) => eprintln!("process {index} stalled; trying the next"),
            }
        }
    }
}

/// Sends one prompt through the cluster (the same request id on every attempt) and
/// waits until it settles; its command id.
pub async fn prompt_and_settle(
    cluster: &Cluster,
    start: usize,
    session: &SessionId,
    request: &str,
    text: &str,
) -> CommandId {
    prompt_timed(cluster, start, session, request, text).await.0
}

/// [`prompt_and_settle`], also saying how long the prompt took to be accepted
/// (retries on other processes included).
pub async fn prompt_timed(
    cluster: &Cluster,
    start: usize,
    session: &SessionId,
    request: &str,
    text: &str,
) -> (CommandId, Duration) {
    let request = RequestId::new(request).unwrap();
    let text = PromptText::new(text).unwrap();
    let sent = Instant::now();
    let acceptance = cluster
        .call(start, |client| {
            let (id, text, request) = (session.clone(), text.clone(), request.clone());
            async move {
                let options = SendOptions {
                    delivery: None,
                    request_id: Some(request),
                };
                client.session(id).send(text, options).await
            }
        })
        .await;
    let accepted_after = sent.elapsed();
    let command = acceptance.command_id;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let snapshot = cluster
            .call(start + 1, |client| {
                let id = session.clone();
                async move { client.session(id).read(ReadOptions::default()).await }
            })
            .await;
        if snapshot.terminals.iter().any(|t| t.command_id == command) {
            return (command, accepted_after);
        }
        assert!(
            Instant::now() < deadline,
            "command {command} of {session} never settled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Drives one Session: `prompts` prompts one after the other, each sent through
/// another process, each waited for until it settles.
pub async fn drive(
    cluster: Arc<Cluster>,
    index: usize,
    session: SessionId,
    prompts: usize,
) -> Vec<CommandId> {
    let mut accepted = Vec::new();
    for prompt in 0..prompts {
        let command = prompt_and_settle(
            &cluster,
            index + prompt,
            &session,
            &format!("s{index}-p{prompt}"),
            &format!("prompt {prompt} of session {index}"),
        )
        .await;
        accepted.push(command);
    }
    accepted
}

/// Prompts one after the other on `session` until `stop`, each through another
/// process; every command and how long its acceptance took.
pub async fn drive_until(
    cluster: Arc<Cluster>,
    index: usize,
    session: SessionId,
    stop: Arc<AtomicBool>,
) -> Vec<(CommandId, Duration)> {
    let mut accepted = Vec::new();
    let mut prompt = 0;
    while !stop.load(Ordering::SeqCst) {
        let prompted = prompt_timed(
            &cluster,
            index + prompt,
            &session,
            &format!("s{index}-p{prompt}"),
            &format!("prompt {prompt} of session {index}"),
        )
        .await;
        accepted.push(prompted);
        prompt += 1;
    }
    accepted
}

/// What a subscriber received for one Session.
#[derive(Default)]
pub struct Seen {
    pub messages: Vec<(u64, EntryId)>,
    pub terminals: Vec<(u64, CommandId)>,
    pub resets: usize,
    /// The stream failed (its process went away).
    pub cut: bool,
}

/// Watches `session` through `client`, recording every message and terminal, until
/// the stream ends or fails.
pub async fn subscribe(client: RemoteAgent, session: SessionId, seen: Arc<Mutex<Seen>>) {
    let watch = client
        .session(session)
        .watch(WatchOptions::default())
        .await
        .unwrap();
    seen.lock()
        .unwrap()
        .record(&watch.snapshot.messages, &watch.snapshot.terminals);
    let mut changes = watch.changes;
    while let Some(frame) = changes.next().await {
        let mut seen = seen.lock().unwrap();
        match frame {
            Ok(SessionFrame::Update(update)) => seen.record(&update.messages, &update.terminals),
            Ok(SessionFrame::Reset(reset)) => {
                seen.resets += 1;
                seen.messages.clear();
                seen.terminals.clear();
                seen.record(&reset.baseline.messages, &reset.baseline.terminals);
            }
            Ok(SessionFrame::Progress(_)) => {}
            Err(_) => {
                seen.cut = true;
                return;
            }
        }
    }
}

impl Seen {
    fn record(&mut self, messages: &[SessionMessage], terminals: &[SessionTerminal]) {
        self.messages
            .extend(messages.iter().map(|m| (m.sequence, m.id.clone())));
        self.terminals
            .extend(terminals.iter().map(|t| (t.sequence, t.command_id.clone())));
    }
}

/// Runs one query of `key`'s rows on a fresh connection.
pub async fn query_rows(database: &str, sql: &str, key: &str) -> Vec<sqlx::postgres::PgRow> {
    let mut conn = sqlx::PgConnection::connect(database).await.unwrap();
    sqlx::query(sql)
        .bind(key)
        .fetch_all(&mut conn)
        .await
        .unwrap()
}

/// A Session's committed entries (sequence, id) and terminals (sequence, command), in order.
pub type Committed = (Vec<(u64, EntryId)>, Vec<(u64, String)>);

/// Reads a Session's [`Committed`] rows straight from the database.
pub async fn committed(database: &str, key: &str, session: &SessionId) -> Committed {
    let mut conn = sqlx::PgConnection::connect(database).await.unwrap();
    let entries: Vec<(i64, String)> = sqlx::query_as(
        "SELECT sequence, id FROM entries WHERE agent_id = $1 AND session_id = $2 \
         ORDER BY sequence",
    )
    .bind(key)
    .bind(session.as_str())
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let terminals: Vec<(i64, String)> = sqlx::query_as(
        "SELECT sequence, command_id FROM terminals WHERE agent_id = $1 AND session_id = $2 \
         ORDER BY sequence",
    )
    .bind(key)
    .bind(session.as_str())
    .fetch_all(&mut conn)
    .await
    .unwrap();
    (
        entries
            .into_iter()
            .map(|(sequence, id)| (u64::try_from(sequence).unwrap(), EntryId::new(id).unwrap()))
            .collect(),
        terminals
            .into_iter()
            .map(|(sequence, id)| (u64::try_from(sequence).unwrap(), id))
            .collect(),
    )
}

/// Checks that a subscriber saw, once each and in order, every message and terminal
/// committed from its first message on, up to `through` (a sequence; `None`: all),
/// with no reset.
pub fn assert_saw_everything(
    session: &SessionId,
    seen: &Seen,
    committed: &Committed,
    through: Option<u64>,
) {
    let (entries, terminals) = committed;
    let from = seen.messages.first().map_or(0, |(sequence, _)| *sequence);
    let through = through.unwrap_or(u64::MAX);
    let expected: Vec<(u64, EntryId)> = entries
        .iter()
        .filter(|(sequence, _)| *sequence >= from && *sequence <= through)
        .cloned()
        .collect();
    let messages: Vec<(u64, EntryId)> = seen
        .messages
        .iter()
        .filter(|(sequence, _)| *sequence <= through)
        .cloned()
        .collect();
    assert_eq!(messages, expected, "session {session}: messages seen");
    let in_range = |sequence: u64| sequence >= from && sequence <= through;
    let seen_terminals: Vec<(u64, String)> = seen
        .terminals
        .iter()
        .filter(|(sequence, _)| in_range(*sequence))
        .map(|(sequence, id)| (*sequence, id.as_str().to_owned()))
        .collect();
    let expected_terminals: Vec<(u64, String)> = terminals
        .iter()
        .filter(|(sequence, _)| in_range(*sequence))
        .cloned()
        .collect();
    assert_eq!(
        seen_terminals, expected_terminals,
        "session {session}: terminals seen"
    );
    assert_eq!(
        seen.resets, 0,
        "session {session}: the subscriber was reset"
    );
}

/// Checks the database after a run: every acknowledged command settled `completed`
/// and none was stored without being acknowledged; nothing of a command was committed
/// after its terminal; every execution of the unsafe `hub.mark` ran once. Returns the
/// recoveries counted per command.
pub async fn assert_nothing_lost_or_doubled(
    database: &str,
    key: &str,
    effects: &Path,
    accepted: &[CommandId],
) -> HashMap<String, i64> {
    let rows = query_rows(
        database,
        "SELECT c.id, c.state, t.outcome, c.recoveries FROM commands c LEFT JOIN terminals t \
           ON t.agent_id = c.agent_id AND t.session_id = c.session_id AND t.command_id = c.id \
         WHERE c.agent_id = $1 AND c.origin IS NULL",
        key,
    )
    .await;
    let outcomes: HashMap<String, (String, Option<String>)> = rows
        .iter()
        .map(|row| {
            (
                row.get::<String, _>(0),
                (row.get::<String, _>(1), row.get::<Option<String>, _>(2)),
            )
        })
        .collect();
    for command in accepted {
        assert_eq!(
            outcomes.get(command.as_str()),
            Some(&("settled".to_owned(), Some("completed".to_owned()))),
            "command {command}"
        );
    }
    assert_eq!(
        outcomes.len(),
        accepted.len(),
        "every stored command was acknowledged once"
    );
    let late = query_rows(
        database,
        "SELECT e.id FROM entries e JOIN terminals t ON t.agent_id = e.agent_id \
           AND t.session_id = e.session_id AND t.command_id = e.command_id \
         WHERE e.agent_id = $1 AND e.sequence > t.sequence",
        key,
    )
    .await;
    assert!(
        late.is_empty(),
        "{} entries after their terminal",
        late.len()
    );
    let marks = std::fs::read_to_string(effects.join("marks")).unwrap_or_default();
    let mut executions = HashSet::new();
    for line in marks.lines() {
        assert!(executions.insert(line.to_owned()), "{line} ran twice");
    }
    rows.iter()
        .map(|row| (row.get::<String, _>(0), row.get::<i64, _>(3)))
        .collect()
}

/// How many `hub.mark` executions were recorded.
pub fn marks(effects: &Path) -> usize {
    std::fs::read_to_string(effects.join("marks"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// A scratch directory for node logs and marks; `SHIITAKE_KEEP_FAILOVER=1` keeps it
/// (its path is printed) for a look afterwards.
pub fn scratch() -> (PathBuf, Option<tempfile::TempDir>) {
    let scratch = tempfile::tempdir().unwrap();
    if std::env::var_os("SHIITAKE_KEEP_FAILOVER").is_some() {
        let kept = scratch.keep();
        eprintln!("keeping {}", kept.display());
        (kept, None)
    } else {
        (scratch.path().to_owned(), Some(scratch))
    }
}

/// An empty file to create before the nodes append to it.
pub fn touch(path: &Path) {
    File::create(path).unwrap();
}
