//! Storage faults on Local (issue 46): a real `shiitake serve` whose data directory is
//! on a small filesystem the test mounts, under a steady stream of prompts whose runs
//! call a tool that is not safe to repeat.
//!
//! - `a_full_disk_pauses_runs_and_they_resume_when_space_returns`: a tmpfs filled
//!   during runs (a filler file written until `ENOSPC` and kept topped up), kept full
//!   for a few seconds while prompts are still sent, then freed;
//! - `a_database_that_refuses_writes_pauses_runs_and_they_resume`: the database and
//!   its WAL on ext4 made immutable (`chattr +i`, enforced on the descriptors `serve`
//!   holds open; a read-only remount is refused while they are open), then writable;
//! - `a_kill_while_the_disk_is_full_settles_nothing_falsely`: the same full disk, then
//!   SIGKILL of `serve`, space freed, `serve` started again on the same directory.
//!
//! Nothing is sent after the fault ends. Then every accepted prompt (one whose
//! acceptance answered `200 Accepted`) must complete exactly once with its own answer
//! (a `completed` terminal and the model's answer to that prompt, in a message of that
//! command), with no restart in the first two tests; no command row may stay pending
//! or running; no terminal is `failed`, `interrupted` or `cancelled`; each tool call has
//! one result and the tool ran (counted in a file outside the filesystem) at most once
//! per call; a refusal is `503 unavailable`, never a `500`; `serve` never panics. While
//! the fault lasts, the Sessions whose work waits say so (`activity.storageWait`, and
//! the gauge `shiitake_sessions_waiting_for_store`).
//!
//! The model is [`EchoModel`] (each answer follows from its context; it keeps nothing
//! in the data directory), the tool `mark` of an MCP server in this process. Each test
//! takes seconds: no sleeps stand for a condition, every wait polls with a deadline.
//! Without root the tests skip loudly (`support::small_fs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::echo_model::{self, EchoModel, TOOL};
use crate::support::small_fs::SmallFs;
use crate::support::{Serve, binary, mcp};
use serde_json::{Value, json};

/// Sessions the prompts go to, round robin.
const SESSIONS: usize = 3;
/// The pause between two prompts (so a Session gets one every `SESSIONS` × this).
const PACE: Duration = Duration::from_millis(40);
/// How long the model thinks before each answer: runs are in flight most of the time.
const THINK: Duration = Duration::from_millis(30);
/// How long the fault lasts once a prompt was refused (the fault is real from then on).
const HOLD: Duration = Duration::from_secs(3);
/// The longest wait for anything that must happen (it is not a bound on how fast).
const DEADLINE: Duration = Duration::from_secs(60);
/// The gauge of Sessions whose work waits for the store (core's
/// `telemetry::SESSIONS_WAITING_FOR_STORE`).
const WAITING_GAUGE: &str = "shiitake_sessions_waiting_for_store";

#[test]
fn a_full_disk_pauses_runs_and_they_resume_when_space_returns() {
    let Some(mut rig) = Rig::new(Filesystem::Tmpfs) else {
        return;
    };
    rig.start_serve();
    let load = rig.start_load();
    rig.wait_for_tool_runs(2 * SESSIONS);
    let filler = rig.fs.fill();
    load.fault_began();
    let fault = rig.hold_fault(&load);
    let sent = load.stop();
    println!("filler: {} bytes", filler.bytes());
    filler.free();
    rig.settle_and_check(&sent, &fault, Restarted::No);
}

#[test]
fn a_database_that_refuses_writes_pauses_runs_and_they_resume() {
    let Some(mut rig) = Rig::new(Filesystem::Ext4) else {
        return;
    };
    rig.start_serve();
    let load = rig.start_load();
    rig.wait_for_tool_runs(2 * SESSIONS);
    let files = [
        rig.data.join("shiitake.db"),
        rig.data.join("shiitake.db-wal"),
    ];
    rig.fs.refuse_writes(&files);
    load.fault_began();
    let fault = rig.hold_fault(&load);
    let sent = load.stop();
    rig.fs.allow_writes();
    rig.settle_and_check(&sent, &fault, Restarted::No);
}

#[test]
fn a_kill_while_the_disk_is_full_settles_nothing_falsely() {
    let Some(mut rig) = Rig::new(Filesystem::Tmpfs) else {
        return;
    };
    rig.start_serve();
    let load = rig.start_load();
    rig.wait_for_tool_runs(2 * SESSIONS);
    let filler = rig.fs.fill();
    load.fault_began();
    let fault = rig.hold_fault(&load);
    let sent = load.stop();
    rig.serve.as_mut().unwrap().kill();
    filler.free();
    rig.start_serve();
    rig.settle_and_check(&sent, &fault, Restarted::Yes);
}

/// Which filesystem holds the data directory.
enum Filesystem {
    /// A tmpfs of 24 MiB (to fill).
    Tmpfs,
    /// ext4 of 64 MiB on a loop device (to make files immutable).
    Ext4,
}

/// Whether `serve` was killed and started again during the test.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Restarted {
    No,
    Yes,
}

/// Everything a test runs on. Fields drop in order: `serve` before the filesystem it
/// holds files on, the filesystem before the directory it is mounted in.
struct Rig {
    serve: Option<Serve>,
    http: Option<Http>,
    sessions: Vec<String>,
    model: EchoModel,
    _marks_server: tokio::sync::oneshot::Sender<()>,
    marks_url: String,
    /// One line per execution of `mark`: its tag. Outside the filesystem under test.
    marks: PathBuf,
    /// `serve`'s stderr, every start appended; kept (outside the directory) when the
    /// test fails.
    log: PathBuf,
    data: PathBuf,
    workspace: PathBuf,
    fs: SmallFs,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// The filesystem mounted and the model and tool servers started; `None` (after the
    /// `SKIPPED` line) when the filesystem cannot be mounted.
    fn new(filesystem: Filesystem) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let fs = match filesystem {
            Filesystem::Tmpfs => SmallFs::tmpfs(dir.path(), 24 << 20)?,
            Filesystem::Ext4 => SmallFs::ext4(dir.path(), 64 << 20)?,
        };
        let data = fs.path().join("data");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let marks = dir.path().join("marks.txt");
        let (marks_url, marks_server) = mcp::serve_marks(marks.clone());
        let test = std::thread::current()
            .name()
            .unwrap_or("test")
            .rsplit("::")
            .next()
            .unwrap()
            .to_owned();
        let log = std::env::temp_dir().join(format!("{test}-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        Some(Self {
            serve: None,
            http: None,
            sessions: Vec::new(),
            model: EchoModel::start(THINK),
            _marks_server: marks_server,
            marks_url,
            marks,
            log,
            data,
            workspace,
            fs,
            _dir: dir,
        })
    }

    /// Starts `serve` (again, after a kill) and waits until the `marks` tool is there;
    /// makes the Sessions on the first start.
    fn start_serve(&mut self) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(binary());
        command
            .args([
                "serve",
                "--port",
                "0",
                "--metrics",
                "--model",
                &self.model.spec,
            ])
            .arg("--data-dir")
            .arg(&self.data)
            .arg("--workspace")
            .arg(&self.workspace)
            .arg("--mcp")
            .arg(format!("marks={}", self.marks_url))
            .env_remove("SHIITAKE_MODEL")
            .env("SHIITAKE_LOG", "info")
            .stderr(log);
        let serve = Serve::spawn(command, &self.data);
        assert!(
            serve.wait_printed(DEADLINE, |line| line
                .starts_with("shiitake: MCP server connected: marks")),
            "the marks server never connected; {}",
            self.log_excerpt()
        );
        let token = std::fs::read_to_string(self.data.join("token")).unwrap();
        let http = Http {
            address: serve
                .url
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned(),
            token: token.trim().to_owned(),
        };
        if self.sessions.is_empty() {
            self.sessions = (0..SESSIONS)
                .map(|k| {
                    let (status, body) = http.call(
                        "POST",
                        "/v1/sessions",
                        Some(&json!({"requestId": format!("session-{k}")})),
                    );
                    assert_eq!(status, 200, "{body}");
                    body["sessionId"].as_str().unwrap().to_owned()
                })
                .collect();
        }
        self.serve = Some(serve);
        self.http = Some(http);
    }

    fn http(&self) -> &Http {
        self.http.as_ref().unwrap()
    }

    /// Starts sending prompts, one every [`PACE`], to the Sessions in turn.
    fn start_load(&self) -> Load {
        Load::start(self.http().clone(), self.sessions.clone())
    }

    /// Waits until `mark` ran `n` times: runs are under way.
    fn wait_for_tool_runs(&self, n: usize) {
        let ran = poll(DEADLINE, || {
            (self.marks_by_tag().values().sum::<usize>() >= n).then_some(())
        });
        assert!(
            ran.is_some(),
            "no run called the tool; {}",
            self.log_excerpt()
        );
    }

    /// Once the fault is on: waits for the first refused prompt (the fault is real),
    /// then for [`HOLD`] keeps looking at every Session and the metrics.
    fn hold_fault(&self, load: &Load) -> Fault {
        let began = Instant::now();
        let refused = poll(DEADLINE, || {
            (load.refused.load(Ordering::Relaxed) > 0).then_some(())
        });
        assert!(
            refused.is_some(),
            "no prompt was refused in {DEADLINE:?} of the fault: the store never failed a \
             write, so nothing was tested; {}",
            self.log_excerpt()
        );
        let mut fault = Fault {
            first_refusal_after: began.elapsed(),
            ..Fault::default()
        };
        let until = Instant::now() + HOLD;
        while Instant::now() < until {
            for session in &self.sessions {
                match self.http().request(
                    "GET",
                    &format!("/v1/sessions/{session}/snapshot?limit=1"),
                    None,
                ) {
                    Ok((200, body)) => {
                        let snapshot: Value = serde_json::from_str(&body).unwrap();
                        if !snapshot["activity"]["storageWait"].is_null() {
                            fault.storage_waits_seen += 1;
                        }
                    }
                    Ok((status, body)) => fault.read_failures.push(format!("{status} {body}")),
                    Err(error) => fault.read_failures.push(error.to_string()),
                }
            }
            if let Ok((200, scrape)) = self.http().request("GET", "/metrics", None) {
                let waiting = sample(&scrape, WAITING_GAUGE).unwrap_or(0.0);
                fault.most_waiting = fault.most_waiting.max(waiting);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        fault.lasted = began.elapsed();
        fault
    }

    /// After the fault: waits (nothing more is sent) until every accepted prompt has a
    /// terminal and every Session is idle, then checks everything.
    fn settle_and_check(&mut self, sent: &[Sent], fault: &Fault, restarted: Restarted) {
        let healing = Instant::now();
        let accepted: Vec<&Sent> = sent
            .iter()
            .filter(|sent| sent.command().is_some())
            .collect();
        let settled = poll(DEADLINE, || {
            let histories: Vec<History> = self
                .sessions
                .iter()
                .map(|session| History::read(self.http(), session))
                .collect();
            let idle = histories.iter().all(History::idle);
            let all_terminals = accepted.iter().all(|sent| {
                histories[sent.session]
                    .terminals_of(sent.command().unwrap())
                    .next()
                    .is_some()
            });
            (idle && all_terminals).then_some(histories)
        });
        let healed_in = healing.elapsed();
        let is_settled = settled.is_some();
        let histories = settled.unwrap_or_else(|| {
            self.sessions
                .iter()
                .map(|session| History::read(self.http(), session))
                .collect()
        });
        let waiting_after = self
            .http()
            .request("GET", "/metrics", None)
            .ok()
            .and_then(|(_, scrape)| sample(&scrape, WAITING_GAUGE));
        let serve_alive = self
            .serve
            .as_mut()
            .is_some_and(|serve| serve.child.try_wait().unwrap().is_none());
        let violations = Violations::find(&Findings {
            sent,
            histories: &histories,
            marks: &self.marks_by_tag(),
            database: &self.data.join("shiitake.db"),
            log: &std::fs::read_to_string(&self.log).unwrap_or_default(),
            fault,
            waiting_after,
            restarted,
            serve_alive,
        });
        let refused = sent.iter().filter(|sent| sent.command().is_none()).count();
        let during = accepted.iter().filter(|sent| sent.during_fault).count();
        let unknown: usize = histories.iter().map(History::unknown_outcomes).sum();
        println!(
            "{} prompts sent, {} accepted ({during} while faulted), {refused} refused; first \
             refusal {:?} into the fault, which lasted {:?}; storageWait seen {} times, \
             {WAITING_GAUGE} at most {}, {waiting_after:?} after; settled {} in {healed_in:?} \
             after the fault ended; {unknown} tool results 'outcome unknown'; {} model calls; \
             {} log lines",
            sent.len(),
            accepted.len(),
            fault.first_refusal_after,
            fault.lasted,
            fault.storage_waits_seen,
            fault.most_waiting,
            if is_settled { "" } else { "NOT (deadline)" },
            self.model.calls().len(),
            std::fs::read_to_string(&self.log)
                .unwrap_or_default()
                .lines()
                .count(),
        );
        assert_eq!(
            violations,
            Violations::default(),
            "settled: {is_settled}; {}",
            self.log_excerpt()
        );
        assert!(
            is_settled,
            "not settled in {DEADLINE:?}; {}",
            self.log_excerpt()
        );
        let _ = std::fs::remove_file(&self.log);
    }

    /// Executions of `mark` so far, by tag.
    fn marks_by_tag(&self) -> BTreeMap<String, usize> {
        let mut marks = BTreeMap::new();
        for tag in std::fs::read_to_string(&self.marks)
            .unwrap_or_default()
            .lines()
        {
            *marks.entry(tag.to_owned()).or_default() += 1;
        }
        marks
    }

    /// Where `serve`'s log is, and its warnings and errors (at most 40 distinct lines).
    fn log_excerpt(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut seen = BTreeSet::new();
        let lines: Vec<&str> = log
            .lines()
            .filter(|line| {
                line.contains("WARN") || line.contains("ERROR") || line.contains("panicked at")
            })
            .filter(|line| seen.insert(strip_log_prefix(line)))
            .take(40)
            .collect();
        format!(
            "serve's log is {} ({} lines); its distinct warnings and errors:\n{}",
            self.log.display(),
            log.lines().count(),
            lines.join("\n")
        )
    }
}

/// A log line without its timestamp, to tell lines apart by what they say.
fn strip_log_prefix(line: &str) -> String {
    line.split_once(' ')
        .map_or(line, |(_, rest)| rest)
        .to_owned()
}

/// What was seen while the fault lasted.
#[derive(Debug, Default)]
struct Fault {
    first_refusal_after: Duration,
    lasted: Duration,
    /// Snapshots that showed `activity.storageWait`.
    storage_waits_seen: usize,
    /// The most Sessions the gauge said were waiting.
    most_waiting: f64,
    /// Snapshot reads that failed while the fault lasted.
    read_failures: Vec<String>,
}

/// One prompt sent and how it was answered.
#[derive(Clone, Debug)]
struct Sent {
    session: usize,
    text: String,
    answer: Answer,
    during_fault: bool,
}

impl Sent {
    fn command(&self) -> Option<&str> {
        match &self.answer {
            Answer::Accepted(command) => Some(command),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
enum Answer {
    /// `200 Accepted`, with the command id.
    Accepted(String),
    /// Any other status: the status and the body.
    Refused(u16, String),
    /// No answer (the connection failed).
    Unanswered(String),
}

/// Prompts sent on a thread of their own until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    faulted: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
    thread: JoinHandle<Vec<Sent>>,
}

impl Load {
    fn start(http: Http, sessions: Vec<String>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let faulted = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (stop, faulted, refused) = (stop.clone(), faulted.clone(), refused.clone());
            std::thread::spawn(move || {
                let mut sent = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let session = n % sessions.len();
                    let text = format!("prompt {n} to session {session}");
                    let during_fault = faulted.load(Ordering::Relaxed);
                    let command = json!({"type": "prompt", "requestId": format!("rq-{n}"),
                        "text": text, "delivery": "followUp"});
                    let path = format!("/v1/sessions/{}/commands", sessions[session]);
                    let answer = match http.request("POST", &path, Some(&command)) {
                        Ok((200, body)) => {
                            let body: Value = serde_json::from_str(&body).unwrap();
                            Answer::Accepted(body["commandId"].as_str().unwrap().to_owned())
                        }
                        Ok((status, body)) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                            Answer::Refused(status, body)
                        }
                        Err(error) => Answer::Unanswered(error.to_string()),
                    };
                    sent.push(Sent {
                        session,
                        text,
                        answer,
                        during_fault,
                    });
                    n += 1;
                    std::thread::sleep(PACE);
                }
                sent
            })
        };
        Self {
            stop,
            faulted,
            refused,
            thread,
        }
    }

    /// Marks the prompts sent from now on as sent during the fault.
    fn fault_began(&self) {
        self.faulted.store(true, Ordering::Relaxed);
    }

    /// Stops sending and returns every prompt sent: nothing is sent after this.
    fn stop(self) -> Vec<Sent> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// Every message and terminal of one Session, and what it is doing now.
struct History {
    messages: Vec<Value>,
    terminals: Vec<Value>,
    activity: Value,
    pending: usize,
}

impl History {
    /// Reads the whole Session, page by page from the newest.
    fn read(http: &Http, session: &str) -> Self {
        let mut history = Self {
            messages: Vec::new(),
            terminals: Vec::new(),
            activity: Value::Null,
            pending: 0,
        };
        let mut before: Option<String> = None;
        loop {
            let path = match &before {
                Some(cursor) => {
                    format!("/v1/sessions/{session}/snapshot?limit=200&before={cursor}")
                }
                None => format!("/v1/sessions/{session}/snapshot?limit=200"),
            };
            let (status, page) = http.call("GET", &path, None);
            assert_eq!(status, 200, "reading {session}: {page}");
            if before.is_none() {
                history.activity = page["activity"].clone();
                history.pending = page["pending"]["prompts"].as_array().map_or(0, Vec::len);
            }
            let mut messages = page["messages"].as_array().cloned().unwrap_or_default();
            messages.append(&mut history.messages);
            history.messages = messages;
            let mut terminals = page["terminals"].as_array().cloned().unwrap_or_default();
            terminals.append(&mut history.terminals);
            history.terminals = terminals;
            match (&page["hasMore"], page["oldestCursor"].as_str()) {
                (Value::Bool(true), Some(cursor)) => before = Some(cursor.to_owned()),
                _ => return history,
            }
        }
    }

    fn idle(&self) -> bool {
        self.activity["queue"]["state"] == "idle" && self.pending == 0
    }

    fn terminals_of<'a>(&'a self, command: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.terminals
            .iter()
            .filter(move |terminal| terminal["commandId"] == command)
    }

    fn messages_of<'a>(&'a self, command: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.messages
            .iter()
            .filter(move |message| message["commandId"] == command)
    }

    fn unknown_outcomes(&self) -> usize {
        self.messages
            .iter()
            .filter(|message| result_kind(&message["value"]) == Some(ResultKind::Unknown))
            .count()
    }
}

/// What a tool result says of the call it answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ResultKind {
    /// `mark` ran and answered.
    Ran,
    /// "outcome unknown": the call may have run, and is not run again.
    Unknown,
    /// Any other error (the tool was not there, ...).
    Other,
}

/// The kind of a message that is a tool result; `None` for other messages.
fn result_kind(value: &Value) -> Option<ResultKind> {
    if value["role"] != "toolResult" {
        return None;
    }
    let text = echo_model::text(&value["content"]);
    Some(if text.starts_with("outcome unknown") {
        ResultKind::Unknown
    } else if text.contains("marked") && value["isError"] != true {
        ResultKind::Ran
    } else {
        ResultKind::Other
    })
}

/// The text of an assistant message's text blocks.
fn assistant_text(value: &Value) -> String {
    value["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect()
}

/// What the checks look at.
struct Findings<'a> {
    sent: &'a [Sent],
    histories: &'a [History],
    marks: &'a BTreeMap<String, usize>,
    database: &'a Path,
    log: &'a str,
    fault: &'a Fault,
    waiting_after: Option<f64>,
    restarted: Restarted,
    serve_alive: bool,
}

/// Everything that went wrong, each list naming the prompts or rows concerned; the
/// test passes when all are empty.
#[derive(Debug, Default, PartialEq, Eq)]
struct Violations {
    /// Accepted prompts missing from their Session's transcript.
    lost: Vec<String>,
    /// Accepted prompts in their transcript more than once.
    doubled: Vec<String>,
    /// Accepted prompts without exactly one terminal, or whose terminal is not
    /// `completed`.
    not_completed_once: Vec<String>,
    /// Prompts settled `completed` without the model's answer to them in a message of
    /// their own command (before the terminal).
    completed_without_own_answer: Vec<String>,
    /// Terminals `failed`, `interrupted` or `cancelled`, of any command.
    bad_terminals: Vec<String>,
    /// Command rows still `pending` or `running` in the database, and terminals a
    /// command has more than one of.
    unsettled_rows: Vec<String>,
    /// The database's `PRAGMA integrity_check`, when it is not `ok`.
    integrity: Vec<String>,
    /// Prompts refused (503) that still ran: their prompt is in a transcript.
    refused_yet_run: Vec<String>,
    /// Tool calls without exactly one result.
    tool_calls_not_answered_once: Vec<String>,
    /// Accepted prompts whose runs committed a number of tool calls they should not
    /// have (one each; without a restart the tool is always offered).
    wrong_number_of_calls: Vec<String>,
    /// Tags `mark` ran for more often than the tool calls committed for them, or for
    /// no accepted prompt: a call run twice, or a run of work never acknowledged.
    ran_twice: Vec<String>,
    /// Results that say the tool ran though it never did, and (without a restart,
    /// where every committed call runs to its end) committed calls that never ran.
    results_unlike_runs: Vec<String>,
    /// Refusals other than `503` with code `unavailable`, and prompts not answered.
    unexpected_answers: Vec<String>,
    /// Lines of `serve`'s log where it panicked.
    panics: Vec<String>,
    /// `serve` exited though nothing stopped it (without a restart).
    serve_died: Vec<String>,
    /// The pause not shown: no snapshot with `activity.storageWait` and no waiting
    /// Session on the gauge while the fault lasted, or either still set after.
    pause_not_shown: Vec<String>,
}

impl Violations {
    fn find(f: &Findings<'_>) -> Self {
        let mut v = Self::default();
        let mut tags_accepted = BTreeSet::new();
        for sent in f.sent {
            let history = &f.histories[sent.session];
            let prompts = history
                .messages
                .iter()
                .filter(|message| {
                    message["value"]["role"] == "user"
                        && echo_model::text(&message["value"]["content"]) == sent.text
                })
                .count();
            let Some(command) = sent.command() else {
                match &sent.answer {
                    Answer::Refused(503, body)
                        if serde_json::from_str::<Value>(body)
                            .is_ok_and(|body| body["code"] == "unavailable") => {}
                    Answer::Refused(status, body) => v
                        .unexpected_answers
                        .push(format!("{}: {status} {body}", sent.text)),
                    Answer::Unanswered(error) => v
                        .unexpected_answers
                        .push(format!("{}: no answer: {error}", sent.text)),
                    Answer::Accepted(_) => unreachable!("an accepted prompt has a command"),
                }
                if prompts > 0 {
                    v.refused_yet_run.push(sent.text.clone());
                }
                continue;
            };
            tags_accepted.insert(sent.text.clone());
            match prompts {
                0 => v.lost.push(format!("{} ({command})", sent.text)),
                1 => {}
                n => v
                    .doubled
                    .push(format!("{} ({command}) {n} times", sent.text)),
            }
            let terminals: Vec<&Value> = history.terminals_of(command).collect();
            let completed = match terminals.as_slice() {
                [terminal] if terminal["outcome"] == "completed" => Some(*terminal),
                _ => {
                    let outcomes: Vec<String> = terminals
                        .iter()
                        .map(|terminal| {
                            format!("{} {}", terminal["outcome"], terminal["diagnostic"])
                        })
                        .collect();
                    v.not_completed_once
                        .push(format!("{} ({command}): {outcomes:?}", sent.text));
                    None
                }
            };
            let own_answer = format!("answer to {}", sent.text);
            if let Some(terminal) = completed {
                let answered = history.messages_of(command).any(|message| {
                    message["value"]["role"] == "assistant"
                        && message["value"]["stopReason"] == "stop"
                        && assistant_text(&message["value"]) == own_answer
                        && message["sequence"].as_u64() < terminal["sequence"].as_u64()
                });
                if !answered {
                    let roles: Vec<String> = history
                        .messages_of(command)
                        .map(|message| describe(&message["value"]))
                        .collect();
                    v.completed_without_own_answer
                        .push(format!("{} ({command}): {roles:?}", sent.text));
                }
            }
            check_tools(&mut v, f, history, command, &sent.text);
        }
        for history in f.histories {
            for terminal in &history.terminals {
                if terminal["outcome"] != "completed" {
                    v.bad_terminals.push(terminal.to_string());
                }
            }
        }
        for (tag, ran) in f.marks {
            if !tags_accepted.contains(tag) {
                v.ran_twice
                    .push(format!("{tag}: ran {ran} times for no accepted prompt"));
            }
        }
        check_database(&mut v, f.database);
        for line in f.log.lines().filter(|line| line.contains("panicked at")) {
            v.panics.push(line.to_owned());
        }
        if f.restarted == Restarted::No && !f.serve_alive {
            v.serve_died.push("serve is not running".to_owned());
        }
        check_pause_shown(&mut v, f);
        v
    }
}

/// The tool calls of one accepted prompt: each answered once, `mark` run once for each
/// (at most once after a kill), a result saying it ran only where it did.
fn check_tools(v: &mut Violations, f: &Findings<'_>, history: &History, command: &str, tag: &str) {
    let mut calls = Vec::new();
    for message in history.messages_of(command) {
        for block in message["value"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "toolCall" {
                calls.push(block["id"].as_str().unwrap_or_default().to_owned());
                if block["name"] != TOOL || block["arguments"]["tag"] != tag {
                    v.wrong_number_of_calls
                        .push(format!("{tag}: a call of another prompt's tool: {block}"));
                }
            }
        }
    }
    let mut ran_results = 0;
    for call in &calls {
        let results: Vec<ResultKind> = history
            .messages_of(command)
            .filter(|message| message["value"]["toolCallId"] == call.as_str())
            .filter_map(|message| result_kind(&message["value"]))
            .collect();
        if results.len() != 1 {
            v.tool_calls_not_answered_once
                .push(format!("{tag}: call {call} answered {results:?}"));
        }
        ran_results += results
            .iter()
            .filter(|kind| **kind == ResultKind::Ran)
            .count();
    }
    let expected_calls = match f.restarted {
        Restarted::No => calls.len() == 1,
        // A run that started after the restart, before the tool's server connected,
        // was not offered the tool.
        Restarted::Yes => calls.len() <= 1,
    };
    if !expected_calls {
        v.wrong_number_of_calls
            .push(format!("{tag}: {} tool calls {calls:?}", calls.len()));
    }
    let ran = f.marks.get(tag).copied().unwrap_or(0);
    if ran > calls.len() {
        v.ran_twice.push(format!(
            "{tag}: ran {ran} times for {} committed calls",
            calls.len()
        ));
    }
    if ran < ran_results || (f.restarted == Restarted::No && ran < calls.len()) {
        v.results_unlike_runs.push(format!(
            "{tag}: ran {ran} times; {} calls, {ran_results} results saying it ran",
            calls.len()
        ));
    }
}

/// The database's own word: no command row left open, no command with two terminals,
/// the file intact. Opened read-only beside `serve`.
fn check_database(v: &mut Violations, path: &Path) {
    let db =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut open = db
        .prepare("SELECT session_id, id, state, kind FROM commands WHERE state <> 'settled'")
        .unwrap();
    let rows = open
        .query_map([], |row| {
            Ok(format!(
                "{} {} {} {}",
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?
            ))
        })
        .unwrap();
    v.unsettled_rows.extend(rows.map(Result::unwrap));
    let mut twice = db
        .prepare(
            "SELECT command_id, COUNT(*) FROM terminals GROUP BY session_id, command_id \
             HAVING COUNT(*) > 1",
        )
        .unwrap();
    let rows = twice
        .query_map([], |row| {
            Ok(format!(
                "{} has {} terminals",
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?
            ))
        })
        .unwrap();
    v.unsettled_rows.extend(rows.map(Result::unwrap));
    let integrity: String = db
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    if integrity != "ok" {
        v.integrity.push(integrity);
    }
}

/// The pause shown while it lasted (a snapshot's `activity.storageWait`, the gauge) and
/// not after.
fn check_pause_shown(v: &mut Violations, f: &Findings<'_>) {
    if f.fault.storage_waits_seen == 0 {
        v.pause_not_shown
            .push("no snapshot showed activity.storageWait while the fault lasted".to_owned());
    }
    if f.fault.most_waiting < 1.0 {
        v.pause_not_shown.push(format!(
            "{WAITING_GAUGE} was never above 0 while the fault lasted"
        ));
    }
    if let Some(waiting) = f.waiting_after.filter(|waiting| *waiting != 0.0) {
        v.pause_not_shown.push(format!(
            "{WAITING_GAUGE} is {waiting} after the Sessions settled"
        ));
    }
    for history in f.histories {
        if !history.activity["storageWait"].is_null() {
            v.pause_not_shown.push(format!(
                "storageWait still set after the Sessions settled: {}",
                history.activity
            ));
        }
    }
    if !f.fault.read_failures.is_empty() {
        v.pause_not_shown.push(format!(
            "{} snapshot reads failed while the fault lasted, e.g. {}",
            f.fault.read_failures.len(),
            f.fault.read_failures[0]
        ));
    }
}

/// A message in a few words: its role and what it holds.
fn describe(value: &Value) -> String {
    match value["role"].as_str() {
        Some("assistant") => format!(
            "assistant({}, {:?})",
            value["stopReason"].as_str().unwrap_or("?"),
            assistant_text(value)
        ),
        Some("toolResult") => format!("toolResult({:?})", result_kind(value)),
        Some(role) => role.to_owned(),
        None => "?".to_owned(),
    }
}

/// Plain HTTP/1.1 to `serve`, one connection a request, so every status is seen as
/// sent (a client library would turn them into errors).
#[derive(Clone)]
struct Http {
    address: String,
    token: String,
}

impl Http {
    /// One request; the status and the body.
    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> std::io::Result<(u16, String)> {
        let mut stream = TcpStream::connect(&self.address)?;
        stream.set_read_timeout(Some(DEADLINE))?;
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.address,
            self.token,
            body.len()
        )?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let response = String::from_utf8_lossy(&response);
        let (head, body) = response
            .split_once("\r\n\r\n")
            .ok_or_else(|| std::io::Error::other(format!("no head in {response:?}")))?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|status| status.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no status in {head:?}")))?;
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        Ok((
            status,
            if chunked {
                dechunk(body)
            } else {
                body.to_owned()
            },
        ))
    }

    /// One request whose answer is JSON; panics when there is no answer.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, body) = self
            .request(method, path, body)
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"));
        let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
        (status, value)
    }
}

/// A chunked body's content.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The value of the unlabelled sample `name` in a Prometheus text scrape.
fn sample(scrape: &str, name: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        (series == name).then(|| value.parse().ok()).flatten()
    })
}

/// Polls `ready` every 50 ms until it gives a value, at most `deadline`.
fn poll<T>(deadline: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + deadline;
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        if Instant::now() > until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
