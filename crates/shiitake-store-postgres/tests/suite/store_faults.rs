//! Faults of the database itself under a loaded Hub (issue 46, "Storage faults"):
//! PostgreSQL restarted (`-m immediate`, `-m fast`), stopped past the lease and
//! started, its connections taken by another role, and one process cut off from it.
//!
//! Each scenario runs on a PostgreSQL cluster of its own (`support/own_cluster.rs`):
//! three `hub_node` processes, 12 Sessions, each prompted again as soon as its last
//! prompt settles (every run calls the unsafe `hub.mark` three times), a subscriber
//! per Session on a process other than the one that created it. Once every Session
//! has settled two prompts, the fault; then the load goes on until every Session has
//! settled two prompts accepted after the fault (45 s at most), stops, and the test
//! checks:
//!
//! - every acknowledged prompt settled `completed` with exactly one answer of its own
//!   (the model's `done`, an assistant message of that command);
//! - no command ended otherwise (`failed`, `interrupted`), none is left `pending` or
//!   `running`, and the database holds no command no client was told about;
//! - nothing ran twice: each `hub.mark` execution id once in the marks file, and no
//!   entry of a command after its terminal;
//! - each subscriber saw every committed message and terminal from its first on, once
//!   each and in order, with no `reset`, and its stream never failed;
//! - each process wrote at most `40 + 2.4 × seconds of outage` log lines while the
//!   database was out: issue 46's 100 lines for 25 s, read as 40 lines of state
//!   changes (a component or an owner going down and up, which do not grow with
//!   time) plus 60 reminders per 25 s. The server's `request failed` line, one per
//!   failed client request, grows with the clients, not the outage, and is counted
//!   apart (in the summary);
//! - the listener's reconnection was counted (`shiitake_hub_notify_reconnects_total`)
//!   on every process whose connections were cut;
//! - where no process died (every scenario but the partition) no Session was taken
//!   over (`shiitake_hub_takeovers_total`, summed over the processes) and no command
//!   counted a recovery.
//!
//! Findings are gathered into one [`Findings`] and compared whole with none, so a
//! failure lists everything that went wrong, after a summary line (and the commonest
//! lines each process logged during the outage). The node logs and the server's are
//! kept when a scenario fails (or always, with `SHIITAKE_KEEP_FAILOVER=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::cluster::{
    Cluster, Committed, Node, NodeSpec, Seen, Watchers, committed, create_sessions, node_binary,
    scratch, spawn_node_env, watch_all,
};
use crate::support::own_cluster::OwnCluster;
use crate::support::prompt_load::{Load, Prompt};
use crate::support::proxy::Proxy;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiitake_protocol::SessionId;
use shiitake_protocol::message::{AssistantContent, Message};
use sqlx::{Connection, Executor, PgConnection, Row};

const SESSIONS: usize = 12;
const STEPS: usize = 3;
/// The production lease: a restart shorter than it lapses none.
const LEASE_MS: u64 = 10_000;
/// How long the database stays stopped in the scenario that outlasts the lease: the
/// issue's 25 s, two and a half leases.
const STOPPED_FOR: Duration = Duration::from_secs(25);
/// Room for three processes (10 to 14 connections each) and the other role.
const MAX_CONNECTIONS: u32 = 64;
/// How long the other role holds the server full, and the proxy refuses.
const HELD_FOR: Duration = Duration::from_secs(5);
/// Prompts every Session settles before the fault, and after it.
const EACH: usize = 2;
/// How long the load may take to settle [`EACH`] prompts of every Session after the fault.
const HEALING: Duration = Duration::from_secs(45);
/// How long the drivers wait for their last prompts once the load stops.
const LAST_PROMPTS: Duration = Duration::from_secs(20);

/// What happens to the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `pg_ctl restart -m immediate`: every backend killed, crash recovery.
    RestartImmediate,
    /// `pg_ctl restart -m fast`: every backend ended, a checkpoint, a start.
    RestartFast,
    /// `pg_ctl stop -m fast`, the lease and 3 s more, `pg_ctl start`.
    StopPastLease,
    /// Another role takes every free connection, the Hub's own are ended (else it
    /// would keep them and never meet the full server), held for [`HELD_FOR`].
    Exhausted,
    /// Process 2 reaches the database through a proxy that ends its connections and
    /// refuses new ones for [`HELD_FOR`].
    Partition,
}

impl Fault {
    /// The processes whose connections the fault cuts: each must count its
    /// listener's reconnection.
    fn cut(self) -> Vec<usize> {
        if self == Self::Partition {
            vec![2]
        } else {
            vec![0, 1, 2]
        }
    }

    /// Whether a process looks dead to the others, so its Sessions may be taken over.
    fn takeovers_allowed(self) -> bool {
        self == Self::Partition
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_immediate_restart_loses_nothing_and_takes_nothing_over() {
    run(Fault::RestartImmediate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fast_restart_loses_nothing_and_takes_nothing_over() {
    run(Fault::RestartFast).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_past_the_lease_loses_nothing_and_takes_nothing_over() {
    run(Fault::StopPastLease).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exhausted_connections_lose_nothing_and_take_nothing_over() {
    run(Fault::Exhausted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partitioned_process_loses_nothing() {
    run(Fault::Partition).await;
}

/// The processes, the database and the scratch directory of one scenario; on a
/// failure the logs are kept.
struct Rig {
    nodes: Vec<Node>,
    proxy: Option<Proxy>,
    pg: OwnCluster,
    dir: PathBuf,
    scratch: Option<tempfile::TempDir>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if matches!(node.child.try_wait(), Ok(None)) {
                node.kill();
            }
        }
        if std::thread::panicking() || self.scratch.is_none() {
            self.pg.keep_log_in(&self.dir);
            if let Some(scratch) = self.scratch.take() {
                eprintln!(
                    "the node and server logs are kept in {}",
                    scratch.keep().display()
                );
            }
        }
    }
}

/// What the fault did.
struct Outage {
    /// From the fault's first blow until the database served every process again.
    lasted: Duration,
    /// What the summary says of it.
    note: String,
}

/// The commonest lines each process wrote during the outage, and how many.
struct Logged {
    /// Lines written during the outage, the server's per-request lines left out.
    own: Vec<usize>,
    /// The server's `request failed` lines during the outage.
    requests: Vec<usize>,
    /// Lines written from the end of the outage until the stop.
    after: Vec<usize>,
    digest: Vec<Vec<(usize, String)>>,
}

/// Everything that went wrong; a clean run finds nothing.
#[derive(Debug, Default, PartialEq, Eq)]
struct Findings {
    /// Prompts a driver could not have acknowledged, or that no read showed settled.
    load: Vec<String>,
    /// Sessions that settled fewer than [`EACH`] prompts accepted after the fault.
    not_healed: Vec<String>,
    /// Acknowledged commands with no terminal, and commands left `pending` or `running`.
    unsettled: Vec<String>,
    /// Commands that ended other than `completed`.
    not_completed: Vec<String>,
    /// Completed commands without exactly one answer of their own.
    answers: Vec<String>,
    /// Commands in the database that no client was told about.
    unacknowledged: Vec<String>,
    /// Entries committed after their command's terminal.
    after_terminal: Vec<String>,
    /// `hub.mark` executions recorded more than once.
    ran_twice: Vec<String>,
    /// Subscribers reset, repeated, behind, or cut off.
    subscribers: Vec<String>,
    /// Processes that logged more than the bound during the outage.
    noisy: Vec<String>,
    /// Processes whose listener reconnection was not counted.
    reconnects_uncounted: Vec<String>,
    /// Takeovers and recoveries where no process died.
    taken_over: Vec<String>,
}

/// At most a dozen items of a finding, and how many more there were.
fn capped(mut items: Vec<String>) -> Vec<String> {
    if items.len() > 12 {
        let more = items.len() - 12;
        items.truncate(12);
        items.push(format!("… and {more} more"));
    }
    items
}

async fn run(fault: Fault) {
    let Some(pg) = OwnCluster::start(MAX_CONNECTIONS).await else {
        return;
    };
    let (dir, scratch) = scratch();
    let proxy = if fault == Fault::Partition {
        Some(Proxy::start(pg.port()).await)
    } else {
        None
    };
    let key = support::fresh_key();
    let spec = NodeSpec::new(LEASE_MS, STEPS);
    let binary = node_binary();
    let nodes: Vec<Node> = (0..3)
        .map(|n| {
            let url = match &proxy {
                Some(proxy) if n == 2 => pg.hub_url_via(proxy.port()),
                _ => pg.hub_url(),
            };
            let name = format!("node{n}");
            let env = [("HUB_NODE_METRICS", "1")];
            tokio::task::block_in_place(|| {
                spawn_node_env(&binary, &url, key.as_str(), &dir, &name, spec, &env)
            })
        })
        .collect();
    let rig = Rig {
        nodes,
        proxy,
        pg,
        dir,
        scratch,
    };
    let cluster = Arc::new(Cluster::new(&rig.nodes));
    let sessions = create_sessions(&cluster, SESSIONS).await;
    // Session i, created through process i % 3, is watched on process (i + 1) % 3.
    let watchers: Vec<(usize, Watchers)> = (0..3)
        .map(|process| {
            let watched: Vec<SessionId> = (0..SESSIONS)
                .filter(|i| (i + 1) % 3 == process)
                .map(|i| sessions[i].clone())
                .collect();
            (process, watch_all(&cluster, process, &watched))
        })
        .collect();
    let started = Instant::now();
    let (load, drivers) = Load::start(cluster.clone(), &sessions);
    let cold = load
        .wait_for_each(started, EACH, Duration::from_secs(60))
        .await;
    assert!(
        cold.is_empty(),
        "Sessions {cold:?} settled no prompts before the fault"
    );

    let marks_before: Vec<u64> = rig.nodes.iter().map(log_length).collect();
    let outage = inflict(fault, &rig).await;
    let healed_from = Instant::now();
    let marks_after: Vec<u64> = rig.nodes.iter().map(log_length).collect();
    let behind = load.wait_for_each(healed_from, EACH, HEALING).await;
    let prompts = load.stop(drivers, LAST_PROMPTS).await;
    let marks_end: Vec<u64> = rig.nodes.iter().map(log_length).collect();

    let admin = rig.pg.admin_url();
    let mut findings = Findings {
        not_healed: behind
            .iter()
            .map(|i| format!("session {i} ({})", sessions[*i]))
            .collect(),
        load: prompts
            .iter()
            .filter_map(|p| Some(format!("{}: {}", p.request, p.gave_up.as_ref()?)))
            .collect(),
        ..Findings::default()
    };
    let mut frames = 0;
    for (process, watched) in watchers {
        for (session, seen, task) in watched {
            let (problems, seen_frames) =
                judge_subscriber(&admin, key.as_str(), process, &session, &seen).await;
            findings.subscribers.extend(problems);
            frames += seen_frames;
            task.abort();
        }
    }

    let mut metrics = BTreeMap::new();
    for name in [
        "shiitake_hub_takeovers_total",
        "shiitake_hub_fenced_commits_total",
        "shiitake_hub_notify_reconnects_total",
    ] {
        let mut values = Vec::new();
        for node in &rig.nodes {
            let value = tokio::time::timeout(Duration::from_secs(10), node.metric(name))
                .await
                .unwrap_or_else(|_| panic!("{} did not answer GET /metrics", node.url));
            values.push(value);
        }
        metrics.insert(name, values);
    }
    let takeovers = &metrics["shiitake_hub_takeovers_total"];
    let reconnects = &metrics["shiitake_hub_notify_reconnects_total"];
    for process in fault.cut() {
        if reconnects[process] < 1.0 {
            findings.reconnects_uncounted.push(format!(
                "process {process}: shiitake_hub_notify_reconnects_total {}",
                reconnects[process]
            ));
        }
    }

    let tally = check_database(&admin, key.as_str(), &rig.dir, &prompts, &mut findings).await;
    if !fault.takeovers_allowed() {
        let taken: f64 = takeovers.iter().sum();
        if taken > 0.0 {
            findings.taken_over.push(format!(
                "{taken} takeovers (by process {takeovers:?}) though no process died"
            ));
        }
        if tally.recoveries > 0 {
            findings.taken_over.push(format!(
                "{} recoveries counted on {} commands though no process died",
                tally.recoveries, tally.recovered
            ));
        }
    }

    let logged = read_logs(&rig.nodes, &marks_before, &marks_after, &marks_end);
    let bound = log_bound(outage.lasted);
    for (process, lines) in logged.own.iter().enumerate() {
        if *lines > bound {
            findings.noisy.push(format!(
                "process {process}: {lines} lines in an outage of {:.1} s (bound {bound})",
                outage.lasted.as_secs_f64()
            ));
        }
    }

    let acknowledged = prompts.iter().filter(|p| p.command.is_some()).count();
    let longest = |of: fn(&Prompt) -> Option<Duration>| {
        prompts.iter().filter_map(of).max().unwrap_or_default()
    };
    eprintln!(
        "store_faults {fault:?}: {}; outage {:.1} s. Prompts: {} sent, {acknowledged} \
         acknowledged, {} completed with one answer; longest wait for an acknowledgement \
         {:.1} s, for a settle {:.1} s. Takeovers {takeovers:?}, recoveries {} (on {} \
         commands), fenced commits {:?}, listener reconnects {reconnects:?}. Log lines during \
         the outage {:?} (bound {bound}; plus the server's per-request lines {:?}), from its \
         end until the stop {:?}. Subscribers saw {frames} frames. Marks {}.",
        outage.note,
        outage.lasted.as_secs_f64(),
        prompts.len(),
        tally.completed,
        longest(|p| Some(p.accepted_at? - p.sent_at)).as_secs_f64(),
        longest(|p| Some(p.settled_at? - p.accepted_at?)).as_secs_f64(),
        tally.recoveries,
        tally.recovered,
        metrics["shiitake_hub_fenced_commits_total"],
        logged.own,
        logged.requests,
        logged.after,
        tally.marks,
    );
    for (process, digest) in logged.digest.iter().enumerate() {
        for (count, line) in digest {
            eprintln!("  process {process} during the outage, {count}×: {line}");
        }
    }
    findings = Findings {
        load: capped(findings.load),
        not_healed: capped(findings.not_healed),
        unsettled: capped(findings.unsettled),
        not_completed: capped(findings.not_completed),
        answers: capped(findings.answers),
        unacknowledged: capped(findings.unacknowledged),
        after_terminal: capped(findings.after_terminal),
        ran_twice: capped(findings.ran_twice),
        subscribers: capped(findings.subscribers),
        ..findings
    };
    assert_eq!(findings, Findings::default(), "{fault:?}: what went wrong");
}

/// The log lines a process may write in an outage of `lasted` (see the module doc).
fn log_bound(lasted: Duration) -> usize {
    40 + (lasted.as_secs_f64() * 2.4).ceil() as usize
}

/// Does the fault; returns once it is over (the database serves every process again).
async fn inflict(fault: Fault, rig: &Rig) -> Outage {
    let pg = &rig.pg;
    let began = Instant::now();
    let note = match fault {
        Fault::RestartImmediate => {
            tokio::task::block_in_place(|| pg.restart("immediate"));
            "pg_ctl restart -m immediate".to_owned()
        }
        Fault::RestartFast => {
            tokio::task::block_in_place(|| pg.restart("fast"));
            "pg_ctl restart -m fast".to_owned()
        }
        Fault::StopPastLease => {
            tokio::task::block_in_place(|| pg.stop("fast"));
            let down = Instant::now();
            // The fault itself: down for two and a half leases.
            tokio::time::sleep(STOPPED_FOR).await;
            tokio::task::block_in_place(|| pg.start_server());
            format!(
                "pg_ctl stop -m fast, down {:.1} s (lease {LEASE_MS} ms), pg_ctl start",
                down.elapsed().as_secs_f64()
            )
        }
        Fault::Exhausted => exhaust(pg).await,
        Fault::Partition => {
            let proxy = rig.proxy.as_ref().unwrap();
            let cut = proxy.cut().await;
            assert!(
                cut > 0,
                "process 2 had no connection through the proxy to cut"
            );
            tokio::time::sleep(HELD_FOR).await;
            proxy.heal().await;
            format!(
                "process 2 cut off for {:.1} s ({cut} connections ended, new ones refused)",
                began.elapsed().as_secs_f64()
            )
        }
    };
    Outage {
        lasted: began.elapsed(),
        note,
    }
}

/// The other role `hog` takes every free connection, the Hub's are ended and the
/// hog takes the freed ones as they come, for [`HELD_FOR`]; then it lets go. The
/// fault must reach the Hub: the server must have refused the role `hub` at least once.
async fn exhaust(pg: &OwnCluster) -> String {
    let mut admin = PgConnection::connect(&pg.admin_url()).await.unwrap();
    admin.execute("CREATE ROLE hog LOGIN").await.unwrap();
    let hog = pg.url("hog", "postgres");
    let refused_before = hub_refusals(&pg.server_log());
    let mut held = fill(&hog).await;
    let began = Instant::now();
    let ended: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE usename = 'hub') AS ended",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    // Several at once, so the other role takes most of what the Hub let go.
    let refills: Vec<_> = (0..8)
        .map(|_| tokio::spawn(fill_owned(hog.clone())))
        .collect();
    for refill in refills {
        held.extend(refill.await.unwrap());
    }
    let taken = held.len();
    tokio::time::sleep(HELD_FOR.saturating_sub(began.elapsed())).await;
    for conn in held {
        conn.close().await.unwrap();
    }
    let refused = hub_refusals(&pg.server_log()) - refused_before;
    assert!(
        refused > 0,
        "the full server never refused the Hub (it ended {ended} of its connections); the \
         fault did not reach it"
    );
    format!(
        "another role held {taken} connections for {:.1} s, {ended} of the Hub's ended, the \
         Hub refused {refused} times",
        began.elapsed().as_secs_f64()
    )
}

/// Connections of `url` opened one after another until the server refuses one for
/// want of slots.
async fn fill(url: &str) -> Vec<PgConnection> {
    let mut held = Vec::new();
    loop {
        match PgConnection::connect(url).await {
            Ok(conn) => held.push(conn),
            Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some("53300") => {
                return held;
            }
            Err(error) => panic!("the other role's connection failed otherwise: {error}"),
        }
    }
}

async fn fill_owned(url: String) -> Vec<PgConnection> {
    fill(&url).await
}

/// How many connections of the role `hub` the server refused for want of slots.
fn hub_refusals(log: &str) -> usize {
    log.lines()
        .filter(|line| line.contains("] hub FATAL:"))
        .filter(|line| {
            line.contains("too many clients") || line.contains("connection slots are reserved")
        })
        .count()
}

/// What the database holds, judged: fills `findings`' database parts.
struct Tally {
    completed: usize,
    recoveries: i64,
    recovered: usize,
    marks: usize,
}

async fn check_database(
    admin: &str,
    key: &str,
    effects: &Path,
    prompts: &[Prompt],
    findings: &mut Findings,
) -> Tally {
    let mut conn = PgConnection::connect(admin).await.unwrap();
    let rows = sqlx::query(
        "SELECT c.id, c.request_id, c.state, c.recoveries, t.outcome, t.diagnostic \
         FROM commands c LEFT JOIN terminals t ON t.agent_id = c.agent_id \
           AND t.session_id = c.session_id AND t.command_id = c.id \
         WHERE c.agent_id = $1 ORDER BY c.session_id, c.accepted_sequence",
    )
    .bind(key)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut answers: HashMap<String, usize> = HashMap::new();
    let entries = sqlx::query(
        "SELECT command_id, message FROM entries WHERE agent_id = $1 AND command_id IS NOT NULL",
    )
    .bind(key)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for entry in &entries {
        let message = shiitake_store_sql::packed::unpack(&entry.get::<Vec<u8>, _>(1)).unwrap();
        if is_answer(&message) {
            *answers.entry(entry.get(0)).or_default() += 1;
        }
    }
    let acknowledged: HashMap<String, &Prompt> = prompts
        .iter()
        .filter_map(|p| Some((p.command.as_ref()?.as_str().to_owned(), p)))
        .collect();
    let mut tally = Tally {
        completed: 0,
        recoveries: 0,
        recovered: 0,
        marks: 0,
    };
    let mut stored = HashSet::new();
    for row in &rows {
        let id: String = row.get(0);
        let request: Option<String> = row.get(1);
        let state: String = row.get(2);
        let recoveries: i64 = row.get(3);
        let outcome: Option<String> = row.get(4);
        let diagnostic: Option<String> = row.get(5);
        let named = format!("{id} ({})", request.as_deref().unwrap_or("no request id"));
        tally.recoveries += recoveries;
        tally.recovered += usize::from(recoveries > 0);
        if state != "settled" || outcome.is_none() {
            findings.unsettled.push(format!(
                "{named}: state {state}, {} terminal, recoveries {recoveries}",
                outcome.as_deref().unwrap_or("no")
            ));
        }
        match outcome.as_deref() {
            Some("completed") | None => {}
            Some(other) => findings.not_completed.push(format!(
                "{named}: {other}: {}",
                diagnostic.as_deref().unwrap_or("no diagnostic")
            )),
        }
        if !acknowledged.contains_key(&id) {
            let why = prompts
                .iter()
                .find(|p| Some(&p.request) == request.as_ref())
                .and_then(|p| p.gave_up.clone())
                .unwrap_or_else(|| "never sent by a driver".to_owned());
            findings.unacknowledged.push(format!("{named}: {why}"));
        }
        if outcome.as_deref() == Some("completed") {
            let answered = answers.get(&id).copied().unwrap_or(0);
            if answered == 1 {
                tally.completed += usize::from(acknowledged.contains_key(&id));
            } else {
                findings.answers.push(format!(
                    "{named}: completed with {answered} answers of its own, recoveries \
                     {recoveries}"
                ));
            }
        }
        stored.insert(id);
    }
    for (id, prompt) in &acknowledged {
        if !stored.contains(id) {
            findings.unsettled.push(format!(
                "{id} ({}): acknowledged but not in the database",
                prompt.request
            ));
        }
    }
    let late = sqlx::query(
        "SELECT e.command_id, e.sequence FROM entries e JOIN terminals t \
           ON t.agent_id = e.agent_id AND t.session_id = e.session_id \
           AND t.command_id = e.command_id \
         WHERE e.agent_id = $1 AND e.sequence > t.sequence",
    )
    .bind(key)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    findings.after_terminal = late
        .iter()
        .map(|row| format!("{} at {}", row.get::<String, _>(0), row.get::<i64, _>(1)))
        .collect();
    let marks = std::fs::read_to_string(effects.join("marks")).unwrap_or_default();
    let mut seen = HashMap::<&str, usize>::new();
    for line in marks.lines() {
        *seen.entry(line).or_default() += 1;
        tally.marks += 1;
    }
    findings.ran_twice = seen
        .into_iter()
        .filter(|(_, times)| *times > 1)
        .map(|(execution, times)| format!("{execution} ran {times} times"))
        .collect();
    findings.ran_twice.sort();
    tally
}

/// Whether `message` is the model's answer to a prompt (`done`, no tool call).
fn is_answer(message: &Message) -> bool {
    let Message::Assistant(assistant) = message else {
        return false;
    };
    !assistant.content.is_empty()
        && assistant
            .content
            .iter()
            .all(|block| matches!(block, AssistantContent::Text(text) if text.text == "done"))
}

/// Waits (15 s at most) for the subscriber of `session` on `process` to see what the
/// database holds, then judges what it saw; what went wrong, and the frames it saw.
async fn judge_subscriber(
    admin: &str,
    key: &str,
    process: usize,
    session: &SessionId,
    seen: &std::sync::Mutex<Seen>,
) -> (Vec<String>, usize) {
    let held = committed(admin, key, session).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let caught_up = {
            let seen = seen.lock().unwrap();
            seen.messages.last().map(|(s, _)| *s) >= held.0.last().map(|(s, _)| *s)
                && seen.terminals.last().map(|(s, _)| *s) >= held.1.last().map(|(s, _)| *s)
        };
        if caught_up || seen.lock().unwrap().cut || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = seen.lock().unwrap();
    let frames = seen.messages.len() + seen.terminals.len();
    (judge_seen(process, session, &seen, &held), frames)
}

/// What a subscriber got wrong against what the database holds.
fn judge_seen(process: usize, session: &SessionId, seen: &Seen, held: &Committed) -> Vec<String> {
    let who = format!("{session} watched on process {process}");
    let mut problems = Vec::new();
    if seen.resets > 0 {
        problems.push(format!("{who}: reset {} times", seen.resets));
    }
    if seen.cut {
        problems.push(format!("{who}: its stream failed"));
    }
    let Some(from) = seen.messages.first().map(|(sequence, _)| *sequence) else {
        problems.push(format!("{who}: saw no message"));
        return problems;
    };
    let mut times = BTreeMap::<u64, usize>::new();
    for (sequence, _) in &seen.messages {
        *times.entry(*sequence).or_default() += 1;
    }
    let repeated: Vec<u64> = times
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(s, _)| *s)
        .collect();
    if !repeated.is_empty() {
        problems.push(format!("{who}: saw entries at {repeated:?} more than once"));
    }
    let expected: Vec<_> = held.0.iter().filter(|(s, _)| *s >= from).cloned().collect();
    let missed: Vec<u64> = expected
        .iter()
        .filter(|entry| !seen.messages.contains(entry))
        .map(|(s, _)| *s)
        .collect();
    if !missed.is_empty() {
        problems.push(format!("{who}: missed the entries at {missed:?}"));
    }
    let foreign: Vec<u64> = seen
        .messages
        .iter()
        .filter(|entry| !expected.contains(entry))
        .map(|(s, _)| *s)
        .collect();
    if !foreign.is_empty() {
        problems.push(format!(
            "{who}: saw entries at {foreign:?} the database does not hold"
        ));
    }
    if repeated.is_empty() && missed.is_empty() && foreign.is_empty() && seen.messages != expected {
        problems.push(format!("{who}: saw the entries out of order"));
    }
    let seen_terminals: Vec<(u64, String)> = seen
        .terminals
        .iter()
        .filter(|(s, _)| *s >= from)
        .map(|(s, id)| (*s, id.as_str().to_owned()))
        .collect();
    let held_terminals: Vec<(u64, String)> =
        held.1.iter().filter(|(s, _)| *s >= from).cloned().collect();
    if seen_terminals != held_terminals {
        let missed: Vec<&str> = held_terminals
            .iter()
            .filter(|t| !seen_terminals.contains(t))
            .map(|(_, id)| id.as_str())
            .collect();
        problems.push(format!(
            "{who}: saw {} terminals where the database holds {} (missed {missed:?})",
            seen_terminals.len(),
            held_terminals.len(),
        ));
    }
    problems
}

/// A node's log's length in bytes now.
fn log_length(node: &Node) -> u64 {
    std::fs::metadata(&node.log).map_or(0, |meta| meta.len())
}

/// The lines of each node's log between the marks, counted and digested.
fn read_logs(nodes: &[Node], before: &[u64], after: &[u64], end: &[u64]) -> Logged {
    let mut logged = Logged {
        own: Vec::new(),
        requests: Vec::new(),
        after: Vec::new(),
        digest: Vec::new(),
    };
    for (n, node) in nodes.iter().enumerate() {
        let bytes = std::fs::read(&node.log).unwrap_or_default();
        let slice = |from: u64, to: u64| {
            let (from, to) = (usize::try_from(from).unwrap(), usize::try_from(to).unwrap());
            String::from_utf8_lossy(&bytes[from.min(bytes.len())..to.min(bytes.len())]).into_owned()
        };
        let during = slice(before[n], after[n]);
        let (requests, own): (Vec<&str>, Vec<&str>) =
            during.lines().partition(|line| is_request_line(line));
        logged.own.push(own.len());
        logged.requests.push(requests.len());
        logged.after.push(slice(after[n], end[n]).lines().count());
        let mut counts = HashMap::<String, usize>::new();
        for line in own {
            *counts.entry(shape(line)).or_default() += 1;
        }
        let mut digest: Vec<(usize, String)> = counts.into_iter().map(|(l, c)| (c, l)).collect();
        digest.sort_by(|a, b| b.cmp(a));
        digest.truncate(6);
        logged.digest.push(digest);
    }
    logged
}

/// The server's line for one failed client request.
fn is_request_line(line: &str) -> bool {
    line.contains("shiitake_server") && line.contains("request failed")
}

/// A log line without its colours, its timestamp and its numbers, cut at 160
/// characters: lines of one kind look alike.
fn shape(line: &str) -> String {
    let mut plain = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence ends with a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else if c.is_ascii_digit() {
            if !plain.ends_with('#') {
                plain.push('#');
            }
        } else {
            plain.push(c);
        }
    }
    let plain = plain
        .split_once(' ')
        .map_or(plain.as_str(), |(_, rest)| rest)
        .trim();
    plain.chars().take(160).collect()
}
