//! Slow clients do not stop `serve` for everyone (issue 32): under an open-file limit
//! set low for the test, more connections than the limit each send half a request head
//! (and more keep coming), and requests with the token are still answered (the median
//! within 1 s, every one within 3 s),
//! whether the connection bound fits the limit (the default) or was set past it (then
//! `accept` runs out of descriptors and the idlest connection makes room). A half-sent
//! head is closed at the header timeout.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{Serve, binary, free_port};

/// The open-file limit `serve` runs under.
const FILE_LIMIT: usize = 256;
/// Slow connections opened before the request with the token: more than the limit.
const SLOW_CONNECTIONS: usize = 400;
/// The liveness bound of the issue, met by the median request with the token.
const ANSWERED_WITHIN: Duration = Duration::from_secs(1);
/// The bound every such request meets: the other tests of this binary share the
/// machine's cores, so one request may lose its turn; before the fix the wait was 8 s
/// and more.
const ALWAYS_ANSWERED_WITHIN: Duration = Duration::from_secs(3);
/// Requests with the token made under attack.
const TOKEN_REQUESTS: usize = 5;
const HALF_HEAD: &[u8] = b"GET /v1/sessions HTTP/1.1\r\nhost: 127.0.0.1\r\n";

/// `serve` under `ulimit -n FILE_LIMIT`, with `args`; its stderr is collected.
fn serve_limited(data_dir: &Path, workspace: &Path, args: &[&str]) -> (Serve, Arc<Mutex<String>>) {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {FILE_LIMIT} && exec \"$0\" \"$@\""))
        .arg(binary())
        .args([
            "serve",
            "--model",
            "none",
            "--port",
            &free_port().to_string(),
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--workspace")
        .arg(workspace)
        .args(args)
        .env_remove("SHIITAKE_MODEL")
        .env_remove("SHIITAKE_LOG")
        .stderr(Stdio::piped());
    let mut serve = Serve::spawn(command, data_dir);
    let logs = serve.collect_stderr();
    (serve, logs)
}

fn address(serve: &Serve) -> String {
    serve.url.trim_start_matches("http://").to_owned()
}

/// How long a connection may take to be made before the test calls the server stuck.
const CONNECT_WITHIN: Duration = Duration::from_secs(2);

/// A connection that sent half a request head and waits.
fn slow_connection(address: &str) -> std::io::Result<TcpStream> {
    let address = address.parse().map_err(std::io::Error::other)?;
    let mut stream = TcpStream::connect_timeout(&address, CONNECT_WITHIN)?;
    stream.write_all(HALF_HEAD)?;
    Ok(stream)
}

/// Opens slow connections until `stop`, keeping them (the server closes what it must).
fn keep_attacking(address: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if let Ok(stream) = slow_connection(&address) {
                held.push(stream);
            }
            // The test process has its own limit: hold at most a few thousand.
            if held.len() > 2_000 {
                held.drain(..1_000);
            }
        }
        held.len()
    })
}

/// `GET /v1/sessions` with the token on a new connection: its status line and how long
/// the answer took.
fn request_with_token(address: &str, token: &str) -> (String, Duration) {
    let started = Instant::now();
    let mut stream =
        TcpStream::connect_timeout(&address.parse().unwrap(), Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET /v1/sessions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let elapsed = started.elapsed();
    let text = String::from_utf8_lossy(&answer);
    (text.into_owned(), elapsed)
}

/// More slow connections than the file limit, and more while the token's request runs.
fn the_token_is_answered_under_attack(serve: &Serve) {
    let token = std::fs::read_to_string(serve.data_dir.join("token")).unwrap();
    let address = address(serve);
    // Each is accepted (or at least queued) at once; one that cannot even connect means
    // the server stopped accepting.
    let mut slow: Vec<TcpStream> = (0..SLOW_CONNECTIONS)
        .map(|_| slow_connection(&address))
        .collect::<Result<_, _>>()
        .expect("a slow connection could not connect");
    assert!(slow.len() > FILE_LIMIT);
    let stop = Arc::new(AtomicBool::new(false));
    let attack = keep_attacking(address.clone(), stop.clone());
    let mut took: Vec<Duration> = (0..TOKEN_REQUESTS)
        .map(|_| {
            let (answer, elapsed) = request_with_token(&address, token.trim());
            let status = answer.lines().next().unwrap_or("");
            assert_eq!(status, "HTTP/1.1 200 OK", "after {elapsed:?}:\n{answer}");
            assert!(
                elapsed < ALWAYS_ANSWERED_WITHIN,
                "the request with the token took {elapsed:?}"
            );
            elapsed
        })
        .collect();
    took.sort();
    assert!(
        took[TOKEN_REQUESTS / 2] < ANSWERED_WITHIN,
        "the requests with the token took {took:?}"
    );
    stop.store(true, Ordering::Relaxed);
    attack.join().unwrap();
    slow.clear();
}

#[test]
fn slow_connections_past_the_file_limit_leave_a_request_with_the_token_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (serve, _logs) = serve_limited(&dir.path().join("data"), dir.path(), &[]);
    // The default bound fitted to the limit: a quarter (at least 64) kept free.
    assert!(
        serve.printed().contains(
            &"shiitake: at most 192 connections; a request head must arrive within 10 s".to_owned()
        ),
        "{:?}",
        serve.printed()
    );
    the_token_is_answered_under_attack(&serve);
}

#[test]
fn a_bound_past_the_file_limit_runs_out_of_descriptors_and_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (serve, logs) = serve_limited(
        &dir.path().join("data"),
        dir.path(),
        &["--max-connections", "2000"],
    );
    the_token_is_answered_under_attack(&serve);
    // The descriptors did run out: the path this test is for was taken.
    let logs = logs.lock().unwrap().clone();
    assert!(logs.contains("ran out of file descriptors"), "{logs}");
}

#[test]
fn a_half_sent_head_is_closed_at_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (serve, _logs) = serve_limited(
        &dir.path().join("data"),
        dir.path(),
        &["--header-timeout", "1"],
    );
    let started = Instant::now();
    let mut half = slow_connection(&address(&serve)).unwrap();
    half.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    let read = half.read(&mut buf);
    let elapsed = started.elapsed();
    assert!(
        matches!(read, Ok(0))
            || read
                .as_ref()
                .is_err_and(|error| error.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?} after {elapsed:?}"
    );
    assert!(
        elapsed >= Duration::from_secs(1),
        "closed early: {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(5), "held for {elapsed:?}");
}
