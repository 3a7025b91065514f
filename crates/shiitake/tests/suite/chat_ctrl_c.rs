//! Ctrl-C in `chat` aborts the running answer (a real SIGINT to the real binary).

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::{Serve, free_port, script};
use serde_json::json;

#[test]
fn ctrl_c_aborts_the_running_answer() {
    let dir = tempfile::tempdir().unwrap();
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [{"steps": [
            {"text": "Thinking it over"}, {"delay_ms": 30000}, {"text": " and never finishing."}
        ]}]}),
    );
    let serve = Serve::start(
        &dir.path().join("data"),
        dir.path(),
        free_port(),
        Some(&model),
    );
    let mut chat = serve
        .command(&["chat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    let (lines, seen) = mpsc::channel();
    let stdout = chat.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let wait_for = |want: &str| loop {
        match seen.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line.contains(want) => return line,
            Ok(_) => continue,
            Err(error) => panic!("chat never printed {want:?}: {error}"),
        }
    };
    wait_for("type a message");
    stdin.write_all(b"Think hard.\n").unwrap();
    stdin.flush().unwrap();
    // The answer streams without a line end until it finishes; give it time to start.
    std::thread::sleep(Duration::from_secs(2));
    let interrupted = Command::new("kill")
        .args(["-INT", &chat.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let abort = wait_for("[abort]");
    assert!(abort.contains("stopping the run"), "{abort}");
    wait_for("[run cancelled]");
    drop(stdin); // EOF: chat leaves once nothing runs
    let status = chat.wait().unwrap();
    assert!(status.success(), "{status}");
}
