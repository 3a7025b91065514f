//! `serve --database`: a bad value is refused before anything starts, and two
//! `serve` processes on one PostgreSQL database share their Sessions, each with
//! the token from the environment (not from its data directory).
//!
//! The PostgreSQL test reads `SHIITAKE_TEST_POSTGRES_URL` (`cargo xtask test`
//! sets it); without it, or when it does not answer, it prints one `SKIPPED` line,
//! or fails when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::hub::test_database;
use crate::support::{binary, script};
use serde_json::json;
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_protocol::{AgentApi, PromptText, ReadOptions, RequestId, SendOptions, SessionApi};

const TOKEN: &str = "serve-database-token-0123456789";

#[test]
fn an_unknown_database_scheme_is_refused_without_echoing_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(binary())
        .args(["serve", "--port", "0", "--model", "none"])
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--database", "mysql://root:hunter2@db/agents"])
        .env_remove("SHIITAKE_DATABASE")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--database takes sqlite:PATH or postgres://"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "the password leaked: {stderr}");
    // Nothing was created for a refused start.
    assert!(!dir.path().join("token").exists());
}

#[test]
fn sqlite_path_is_used_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("elsewhere.db");
    let mut serve = start(
        &dir.path().join("data"),
        &format!("sqlite:{}", file.display()),
        "default",
        None,
    );
    assert!(
        file.exists(),
        "the store was not opened at {}",
        file.display()
    );
    assert!(!dir.path().join("data").join("shiitake.db").exists());
    stop(&mut serve.0);
}

/// A `serve` child and the address it printed.
struct Served(Child, String);

impl Drop for Served {
    fn drop(&mut self) {
        stop(&mut self.0);
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts `serve` on a free port; with `token`, it comes from `SHIITAKE_TOKEN`.
fn start(data_dir: &Path, database: &str, agent: &str, token: Option<&str>) -> Served {
    start_with_model(data_dir, database, agent, token, "none")
}

fn start_with_model(
    data_dir: &Path,
    database: &str,
    agent: &str,
    token: Option<&str>,
    model: &str,
) -> Served {
    let mut command = Command::new(binary());
    command
        .args(["serve", "--port", "0", "--model", model])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--database", database, "--agent", agent])
        .arg("--workspace")
        .arg(data_dir.parent().unwrap())
        .env_remove("SHIITAKE_DATABASE")
        .env_remove("SHIITAKE_AGENT")
        .env_remove("SHIITAKE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(token) = token {
        command.env("SHIITAKE_TOKEN", token);
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Some(url) = line.strip_prefix("shiitake: listening on ") {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("serve printed its address");
    Served(child, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_postgres_share_sessions() {
    let Some(database) = test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [{"steps": [{"text": "answered on the hub"}]}]}),
    );
    let agent = format!("cli-{}", std::process::id());
    let first = start_with_model(
        &dir.path().join("a"),
        &database,
        &agent,
        Some(TOKEN),
        &model,
    );
    let second = start_with_model(
        &dir.path().join("b"),
        &database,
        &agent,
        Some(TOKEN),
        &model,
    );
    // The token came from the environment: neither data directory holds one.
    assert!(!dir.path().join("a").join("token").exists());
    assert!(!dir.path().join("b").join("token").exists());

    let client = |url: &str| RemoteAgent::new(ClientOptions::new(url).with_token(TOKEN)).unwrap();
    let (a, b) = (client(&first.1), client(&second.1));
    // Each process runs the Hub roster: the shared set, Home, Subagents, agents tools.
    let mut running: Vec<String> = b
        .list_extensions()
        .await
        .unwrap()
        .into_iter()
        .map(|status| status.extension_id.as_str().to_owned())
        .collect();
    running.sort();
    assert_eq!(
        running,
        [
            "botanical-agent-almanac",
            "botanical-agent-home",
            "botanical-session-agents",
            "botanical-session-goal",
            "botanical-session-loop",
            "botanical-session-plan",
            "botanical-session-question",
            "botanical-session-subagents",
            "shiitake-session-approval",
        ]
    );
    let session = a
        .create_session(RequestId::new(format!("create-{agent}")).unwrap())
        .await
        .unwrap();
    let accepted = a
        .session(session.clone())
        .send(PromptText::new("hello").unwrap(), SendOptions::default())
        .await
        .unwrap();

    // The other process reads the Session and the run's result.
    let deadline = Instant::now() + Duration::from_secs(30);
    let snapshot = loop {
        let snapshot = b
            .session(session.clone())
            .read(ReadOptions::default())
            .await
            .unwrap();
        if snapshot
            .terminals
            .iter()
            .any(|terminal| terminal.command_id == accepted.command_id)
        {
            break snapshot;
        }
        assert!(Instant::now() < deadline, "the run never settled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let texts: Vec<String> = snapshot
        .messages
        .iter()
        .filter_map(|message| match &message.value {
            shiitake_protocol::message::Message::Assistant(assistant) => Some(assistant.text()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec!["answered on the hub".to_owned()]);

    // The CLI's own client lists it through the other process.
    let listed = Command::new(binary())
        .args(["sessions", "--url", &second.1, "--token", TOKEN])
        .arg("--data-dir")
        .arg(dir.path().join("b"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains(session.as_str()),
        "{listed:?}"
    );

    // Another token is refused by both.
    let stranger = RemoteAgent::new(
        ClientOptions::new(&second.1).with_token("not-the-token-0123456789abcdef"),
    )
    .unwrap();
    assert!(
        stranger
            .session(session.clone())
            .read(ReadOptions::default())
            .await
            .is_err()
    );
}

/// A TCP proxy to the test database whose forwarding can be stalled: while stalled,
/// bytes are neither read nor written in either direction and the sockets stay open,
/// as with a database host that stopped answering (no reset, nothing refused).
struct StallingProxy {
    port: u16,
    stalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StallingProxy {
    fn start(upstream: u16) -> Self {
        use std::sync::atomic::AtomicBool;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stalled = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stalled.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let flag = flag.clone();
                    std::thread::spawn(move || forward(from, to, &flag));
                }
            }
        });
        Self { port, stalled }
    }

    fn stall(&self) {
        self.stalled
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either closes; holds while `stalled`.
fn forward(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    stalled: &std::sync::atomic::AtomicBool,
) {
    use std::io::{Read, Write};
    let mut buffer = [0u8; 16 * 1024];
    loop {
        while stalled.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        while stalled.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if to.write_all(&buffer[..read]).is_err() {
            return;
        }
    }
}

/// SIGTERM while the database does not answer: stopping cannot hand anything over or
/// close the store, and `--drain-timeout` bounds it; `serve` says so and exits.
#[test]
fn a_sigterm_while_the_database_does_not_answer_exits_after_the_drain_timeout() {
    let Some(database) = test_database() else {
        return;
    };
    let upstream: u16 = database
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .expect("the test database's URL has a port");
    let proxy = StallingProxy::start(upstream);
    let through = database.replacen(&format!(":{upstream}/"), &format!(":{}/", proxy.port), 1);
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut child = Command::new(binary())
        .args([
            "serve",
            "--port",
            "0",
            "--model",
            "none",
            "--drain-timeout",
            "1s",
        ])
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--database", &through, "--agent", "stalled"])
        .arg("--workspace")
        .arg(dir.path())
        .env_remove("SHIITAKE_DATABASE")
        .env_remove("SHIITAKE_AGENT")
        .env("SHIITAKE_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let _ = tx.send(line);
        }
    });
    let mut printed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Serving: its last line before it serves is the web page's link.
    while !printed
        .iter()
        .any(|line: &String| line.starts_with("shiitake: web page: "))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        printed.push(rx.recv_timeout(left).expect("serve started"));
    }
    proxy.stall();
    let pid = child.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    // Far beyond the 1 s asked for: a stop that waited on the database would hang
    // for the network's timeouts (minutes).
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(1)) {
        printed.push(line);
    }
    let Some(status) = exited else {
        stop(&mut child);
        panic!("serve did not exit within 30 s of SIGTERM: {printed:#?}");
    };
    assert!(status.success(), "{status}: {printed:#?}");
    assert!(
        printed
            .iter()
            .any(|line| line.contains("did not close within 1 s (--drain-timeout")),
        "{printed:#?}"
    );
}
