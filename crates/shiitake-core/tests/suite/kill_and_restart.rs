//! Recovery across real crashes: a child process is SIGKILLed in the middle of a
//! tool call and again in the middle of a model stream, then restarted on the
//! same database file. No accepted command is lost, no settled command runs
//! again, the unsafe tool runs exactly once, and the run completes.

#![allow(clippy::unwrap_used)] // test support code outside #[test] functions

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// The `crash_harness` example, built by `cargo test` next to this test binary.
fn harness() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    debug.join("examples").join("crash_harness")
}

/// Starts a phase and waits (bounded) for a line starting with `marker`; returns it.
fn run_until(phase: &str, dir: &Path, marker: &str) -> (Child, String) {
    let mut child = Command::new(harness())
        .args([phase, dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", harness().display()));
    let stdout = child.stdout.take().unwrap();
    let (lines, seen) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        match seen.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.starts_with(marker) => return (child, line),
            Ok(_) => continue,
            Err(error) => {
                let _killed = child.kill();
                panic!("phase {phase} did not print {marker}: {error}");
            }
        }
    }
}

fn sigkill(mut child: Child) {
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the child was killed, not finished: {status}"
    );
}

#[test]
fn work_survives_kills_in_a_tool_call_and_in_a_model_stream() {
    let dir = tempfile::tempdir().unwrap();

    let (child, _) = run_until("accept", dir.path(), "TOOL_RUNNING");
    sigkill(child);
    let (child, _) = run_until("stream", dir.path(), "STREAMING");
    sigkill(child);
    let (mut child, done) = run_until("finish", dir.path(), "DONE ");
    assert!(child.wait().unwrap().success());

    let effects = std::fs::read_to_string(dir.path().join("side-effects")).unwrap();
    assert_eq!(
        effects.lines().count(),
        1,
        "the unsafe tool ran exactly once"
    );

    let report: Value = serde_json::from_str(done.trim_start_matches("DONE ")).unwrap();
    let unknown = "outcome unknown: the Agent stopped while this tool call ran, and it was not \
                   run again because it is not marked safe to repeat";
    assert_eq!(
        report["transcript"],
        json!([
            ["user", "p1"],
            ["assistant", "first done", []],
            ["user", "p2"],
            ["assistant", "", ["crash__side_effect"]],
            ["tool", "crash__side_effect", true, [{"type": "text", "text": unknown}]],
            ["assistant", "p2 recovered", []],
            ["user", "p3"],
            ["assistant", "p3 answer", []],
        ])
    );
    let outcomes: Vec<&str> = report["terminals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t[0].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        vec!["completed", "completed", "completed"],
        "each command settled once"
    );
    assert_eq!(report["pending"], json!(0));
}
