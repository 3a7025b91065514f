//! Three Hub processes on one database, one SIGKILLed and one paused mid-run.
//!
//! Clients drive 30 Sessions through all three processes (`examples/hub_node.rs`:
//! every run calls the unsafe tool `hub.mark` several times). Mid-run, process 0
//! is killed with SIGKILL and process 1 is paused (SIGSTOP) past its lease and
//! then continued. A subscriber on process 2 watches some of the Sessions. Then:
//!
//! - no accepted command is lost: every acknowledged prompt completes;
//! - no settled work runs again: no entry of a command follows its terminal;
//! - no double run: every `hub.mark` execution id ran once, and the paused
//!   process's stale owners were refused by the fencing token (its log says so);
//! - the killed process's Sessions are taken over within the lease period;
//! - no timer occurrence fired twice, and timers kept firing after the kill;
//! - the subscriber on process 2 saw every committed message and terminal once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::json;
use shiitake_client::{ClientOptions, ReconnectPolicy, RemoteAgent};
use shiitake_protocol::{
    AgentApi, CommandId, EntryId, ExtensionId, PromptText, ReadOptions, RequestId, SendOptions,
    SessionApi, SessionFrame, SessionId, WatchOptions,
};
use sqlx::Connection;
use support::fresh_key;

const NODE_TOKEN: &str = "hub-test-token-0123456789abcdef";
const LEASE_MS: u64 = 1500;
const STEPS: usize = 4;
const SESSIONS: usize = 30;
const PROMPTS: usize = 3;
const WATCHED: usize = 6;

/// One Hub process.
struct Node {
    child: Child,
    url: String,
    holder: String,
    log: PathBuf,
}

/// The `hub_node` example, built now: `cargo test -p shiitake-store-postgres --test all --
/// suite::failover::` alone does not build examples, and a stale node would test old code.
fn node_binary() -> PathBuf {
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

fn spawn_node(database: &str, key: &str, effects: &Path, name: &str) -> Node {
    let log = effects.join(format!("{name}.log"));
    let mut child = Command::new(node_binary())
        .args([
            database,
            key,
            &LEASE_MS.to_string(),
            effects.to_str().unwrap(),
            &STEPS.to_string(),
        ])
        .env(
            "RUST_LOG",
            std::env::var("SHIITAKE_NODE_LOG").unwrap_or_else(|_| "warn".to_owned()),
        )
        .stdout(Stdio::piped())
        .stderr(File::create(&log).unwrap())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", node_binary().display()));
    let stdout = child.stdout.take().unwrap();
    let (ready, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("READY ") && ready.send(line).is_err() {
                break;
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
    }
}

fn signal(node: &Node, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &node.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} failed");
}

fn client(url: &str) -> RemoteAgent {
    let options = ClientOptions::new(url)
        .with_token(NODE_TOKEN)
        .with_reconnect(ReconnectPolicy {
            initial_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(500),
            max_attempts: 100,
        });
    RemoteAgent::new(options).unwrap()
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The three processes as the drivers see them.
struct Cluster {
    clients: Vec<RemoteAgent>,
    alive: Vec<AtomicBool>,
}

impl Cluster {
    /// Runs `call` against the processes from `start` on, skipping dead ones and
    /// moving on after a failure or a stall, until one answers.
    async fn call<T, F, Fut>(&self, start: usize, call: F) -> T
    where
        F: Fn(RemoteAgent) -> Fut,
        Fut: std::future::Future<Output = Result<T, shiitake_protocol::ShiitakeError>>,
    {
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut attempt = start;
        loop {
            assert!(Instant::now() < deadline, "no process answered for 90 s");
            let index = attempt % self.clients.len();
            attempt += 1;
            if !self.alive[index].load(Ordering::SeqCst) {
                continue;
            }
            let client = self.clients[index].clone();
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

/// What the subscriber on process 2 received for one Session.
#[derive(Default)]
struct Seen {
    messages: Vec<(u64, EntryId)>,
    terminals: Vec<CommandId>,
    resets: usize,
}

async fn subscribe(client: RemoteAgent, session: SessionId, seen: Arc<Mutex<Seen>>) {
    let watch = client
        .session(session)
        .watch(WatchOptions::default())
        .await
        .unwrap();
    {
        let mut seen = seen.lock().unwrap();
        for message in &watch.snapshot.messages {
            seen.messages.push((message.sequence, message.id.clone()));
        }
        seen.terminals.extend(
            watch
                .snapshot
                .terminals
                .iter()
                .map(|t| t.command_id.clone()),
        );
    }
    let mut changes = watch.changes;
    while let Some(frame) = changes.next().await {
        let mut seen = seen.lock().unwrap();
        match frame {
            Ok(SessionFrame::Update(update)) => {
                for message in &update.messages {
                    seen.messages.push((message.sequence, message.id.clone()));
                }
                seen.terminals
                    .extend(update.terminals.iter().map(|t| t.command_id.clone()));
            }
            Ok(SessionFrame::Reset(reset)) => {
                seen.resets += 1;
                seen.messages = reset
                    .baseline
                    .messages
                    .iter()
                    .map(|m| (m.sequence, m.id.clone()))
                    .collect();
                seen.terminals = reset
                    .baseline
                    .terminals
                    .iter()
                    .map(|t| t.command_id.clone())
                    .collect();
            }
            Ok(SessionFrame::Progress(_)) => {}
            Err(error) => panic!("the subscription on the surviving process failed: {error}"),
        }
    }
}

/// Drives one Session: `PROMPTS` prompts one after the other, each sent through
/// another process, each waited for until it settles.
async fn drive(cluster: Arc<Cluster>, index: usize, session: SessionId) -> Vec<CommandId> {
    let mut accepted = Vec::new();
    for prompt in 0..PROMPTS {
        let request = RequestId::new(format!("s{index}-p{prompt}")).unwrap();
        let text = PromptText::new(format!("prompt {prompt} of session {index}")).unwrap();
        let id = session.clone();
        let acceptance = cluster
            .call(index + prompt, |client| {
                let (id, text, request) = (id.clone(), text.clone(), request.clone());
                async move {
                    let options = SendOptions {
                        delivery: None,
                        request_id: Some(request),
                    };
                    client.session(id).send(text, options).await
                }
            })
            .await;
        let command = acceptance.command_id;
        accepted.push(command.clone());
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let id = session.clone();
            let snapshot = cluster
                .call(index + prompt + 1, |client| {
                    let id = id.clone();
                    async move { client.session(id).read(ReadOptions::default()).await }
                })
                .await;
            if snapshot.terminals.iter().any(|t| t.command_id == command) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "command {command} of session {index} never settled"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    accepted
}

async fn query_rows(database: &str, sql: &str, key: &str) -> Vec<sqlx::postgres::PgRow> {
    let mut conn = sqlx::PgConnection::connect(database).await.unwrap();
    sqlx::query(sql)
        .bind(key)
        .fetch_all(&mut conn)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_survive_a_killed_and_a_paused_process() {
    let Some(database) = support::url() else {
        return;
    };
    use sqlx::Row;
    let key = fresh_key();
    let scratch = tempfile::tempdir().unwrap();
    // SHIITAKE_KEEP_FAILOVER=1 keeps the node logs and marks for a look afterwards.
    let (effects, _scratch): (PathBuf, Option<tempfile::TempDir>) =
        if std::env::var_os("SHIITAKE_KEEP_FAILOVER").is_some() {
            let kept = scratch.keep();
            eprintln!("keeping {}", kept.display());
            (kept, None)
        } else {
            (scratch.path().to_owned(), Some(scratch))
        };
    let mut nodes: Vec<Node> = (0..3)
        .map(|n| {
            spawn_node(
                &database,
                key.as_str(),
                effects.as_path(),
                &format!("node{n}"),
            )
        })
        .collect();
    let cluster = Arc::new(Cluster {
        clients: nodes.iter().map(|node| client(&node.url)).collect(),
        alive: (0..3).map(|_| AtomicBool::new(true)).collect(),
    });

    // Three Agent-scope timers firing every second, armed through process 1.
    let ticker = ExtensionId::new("example-ticker").unwrap();
    cluster.clients[1]
        .call_extension(
            &ticker,
            "arm",
            json!({"count": 3, "cadence": "* * * * * *", "requestId": "arm-once"}),
        )
        .await
        .unwrap();

    let mut sessions = Vec::new();
    for index in 0..SESSIONS {
        let request = RequestId::new(format!("create-{index}")).unwrap();
        let id = cluster.clients[index % 3]
            .create_session(request)
            .await
            .unwrap();
        sessions.push(id);
    }
    let seen: Vec<Arc<Mutex<Seen>>> = (0..WATCHED).map(|_| Arc::default()).collect();
    let subscribers: Vec<_> = sessions
        .iter()
        .take(WATCHED)
        .zip(&seen)
        .map(|(id, seen)| {
            tokio::spawn(subscribe(
                cluster.clients[2].clone(),
                id.clone(),
                seen.clone(),
            ))
        })
        .collect();

    let drivers: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(index, id)| tokio::spawn(drive(cluster.clone(), index, id.clone())))
        .collect();

    // Mid-run: kill process 0 and pause process 1; process 2 takes over the killed
    // Sessions; process 1 is continued past its lease.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed_at_ms = now_ms();
    eprintln!("killing process 0 at {killed_at_ms}");
    cluster.alive[0].store(false, Ordering::SeqCst);
    nodes[0].child.kill().unwrap();
    let killed = Instant::now();
    nodes[0].child.wait().unwrap();
    // Pause process 1 at once, while its runs are mid-flight: a run that finished
    // before the pause would leave nothing for the fencing token to refuse.
    signal(&nodes[1], "-STOP");
    let paused = Instant::now();
    let victim = nodes[0].holder.clone();
    let held_by_victim = "SELECT count(*) FROM session_leases l JOIN sessions s \
         ON s.agent_id = l.agent_id AND s.id = l.session_id \
         WHERE l.agent_id = $1 AND s.open_from IS NOT NULL AND l.holder = $2";
    let taken_over = loop {
        let mut conn = sqlx::PgConnection::connect(&database).await.unwrap();
        let count: i64 = sqlx::query_scalar(held_by_victim)
            .bind(key.as_str())
            .bind(&victim)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        if count == 0 {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "{count} Sessions of the killed process were never taken over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("the killed process's Sessions were taken over after {taken_over:?}");
    assert!(
        taken_over <= Duration::from_millis(LEASE_MS + 1000),
        "taken over after {taken_over:?}, lease {LEASE_MS} ms"
    );

    // Continue process 1 once its leases have long expired and been taken over.
    let pause = Duration::from_millis(LEASE_MS * 2);
    tokio::time::sleep(pause.saturating_sub(paused.elapsed())).await;
    signal(&nodes[1], "-CONT");

    let mut accepted = Vec::new();
    for driver in drivers {
        accepted.extend(driver.await.unwrap());
    }
    assert_eq!(accepted.len(), SESSIONS * PROMPTS);

    // Every watched Session's subscriber catches up with the database.
    let committed = |session: &SessionId| {
        let database = database.clone();
        let key = key.clone();
        let session = session.clone();
        async move {
            let mut conn = sqlx::PgConnection::connect(&database).await.unwrap();
            let entries: Vec<(i64, String)> = sqlx::query_as(
                "SELECT sequence, id FROM entries WHERE agent_id = $1 AND session_id = $2 \
                 ORDER BY sequence",
            )
            .bind(key.as_str())
            .bind(session.as_str())
            .fetch_all(&mut conn)
            .await
            .unwrap();
            let terminals: Vec<String> = sqlx::query_scalar(
                "SELECT command_id FROM terminals WHERE agent_id = $1 AND session_id = $2 \
                 ORDER BY sequence",
            )
            .bind(key.as_str())
            .bind(session.as_str())
            .fetch_all(&mut conn)
            .await
            .unwrap();
            (entries, terminals)
        }
    };
    for (session, seen) in sessions.iter().zip(&seen) {
        let (entries, terminals) = committed(session).await;
        let expected: Vec<(u64, EntryId)> = entries
            .iter()
            .map(|(sequence, id)| (u64::try_from(*sequence).unwrap(), EntryId::new(id).unwrap()))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let caught_up = {
                let seen = seen.lock().unwrap();
                seen.messages.len() >= expected.len() && seen.terminals.len() >= terminals.len()
            };
            if caught_up || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen.messages, expected,
            "session {session}: messages seen on process 2"
        );
        let seen_terminals: Vec<String> = seen
            .terminals
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect();
        assert_eq!(
            seen_terminals, terminals,
            "session {session}: terminals seen on process 2"
        );
        assert_eq!(
            seen.resets, 0,
            "session {session}: the subscriber was reset"
        );
    }
    for subscriber in subscribers {
        subscriber.abort();
    }

    // Let the timers fire a little longer, then stop everything.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for node in nodes.iter_mut().skip(1) {
        node.child.kill().unwrap();
        node.child.wait().unwrap();
    }

    // No accepted command lost: each is settled with a completed terminal.
    let rows = query_rows(
        &database,
        "SELECT c.id, c.state, t.outcome FROM commands c LEFT JOIN terminals t \
           ON t.agent_id = c.agent_id AND t.session_id = c.session_id AND t.command_id = c.id \
         WHERE c.agent_id = $1",
        key.as_str(),
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
    for command in &accepted {
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

    // No settled work ran again: nothing of a command was committed after its terminal.
    let late = query_rows(
        &database,
        "SELECT e.id FROM entries e JOIN terminals t ON t.agent_id = e.agent_id \
           AND t.session_id = e.session_id AND t.command_id = e.command_id \
         WHERE e.agent_id = $1 AND e.sequence > t.sequence",
        key.as_str(),
    )
    .await;
    assert!(
        late.is_empty(),
        "{} entries after their terminal",
        late.len()
    );

    // No double run: each execution of the unsafe tool happened once.
    let marks = std::fs::read_to_string(effects.as_path().join("marks")).unwrap();
    let mut executions = HashSet::new();
    for line in marks.lines() {
        assert!(executions.insert(line.to_owned()), "{line} ran twice");
    }
    assert!(executions.len() <= SESSIONS * PROMPTS * STEPS);
    assert!(executions.len() >= SESSIONS * PROMPTS * STEPS / 2);
    let paused_log = std::fs::read_to_string(&nodes[1].log).unwrap();
    assert!(
        paused_log.contains("fencing token rejected"),
        "the paused process never had a commit fenced; its log:\n{paused_log}"
    );

    // No timer occurrence fired twice, and the survivors kept firing after the kill.
    let fired = query_rows(
        &database,
        "SELECT key FROM extension_rows WHERE agent_id = $1 \
           AND extension_id = 'example-ticker' AND collection = 'fired'",
        key.as_str(),
    )
    .await;
    let mut occurrences: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in &fired {
        let key: String = row.get(0);
        let mut parts = key.splitn(3, '@');
        let (timer, due, process) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        occurrences
            .entry(format!("{timer}@{due}"))
            .or_default()
            .push(process.to_owned());
    }
    let twice: Vec<_> = occurrences
        .iter()
        .filter(|(_, processes)| processes.len() > 1)
        .collect();
    assert!(twice.is_empty(), "fired twice: {twice:?}");
    let after_kill = occurrences
        .keys()
        .filter(|occurrence| {
            let due: u64 = occurrence.split('@').nth(1).unwrap().parse().unwrap();
            due > killed_at_ms
        })
        .count();
    assert!(after_kill >= 3, "only {after_kill} firings after the kill");
}
