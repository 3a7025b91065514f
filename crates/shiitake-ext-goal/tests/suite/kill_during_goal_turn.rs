//! A restart that interrupts a goal turn resumes the turn and the goal stays live:
//! a child process is SIGKILLed while the first continuation's tool call runs, then
//! a second process opens the same SQLite file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// The `goal_crash_harness` example, built by `cargo test` next to this test binary.
fn harness() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    debug.join("examples").join("goal_crash_harness")
}

/// Starts the harness and collects its lines until one starts with `marker`.
fn run_until(args: &[&str], marker: &str) -> (Child, Vec<String>) {
    let mut child = Command::new(harness())
        .args(args)
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
    let mut collected = Vec::new();
    loop {
        match seen.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                let last = line.starts_with(marker);
                collected.push(line);
                if last {
                    return (child, collected);
                }
            }
            Err(error) => {
                let _killed = child.kill();
                let _reaped = child.wait();
                panic!("{args:?} did not print {marker}: {error}; saw {collected:?}");
            }
        }
    }
}

fn after<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines
        .iter()
        .find_map(|line| line.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix} line in {lines:?}"))
}

#[test]
fn a_goal_turn_killed_mid_tool_call_resumes_and_the_goal_stays_live() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();

    let (mut child, lines) = run_until(&["start", path], "IN_TURN");
    let session = after(&lines, "SESSION ").to_owned();
    child.kill().unwrap(); // SIGKILL on Unix
    assert!(!child.wait().unwrap().success(), "the child was killed");

    let (mut child, lines) = run_until(&["resume", path, &session], "DONE ");
    assert!(child.wait().unwrap().success());
    let opened: Value = serde_json::from_str(after(&lines, "OPEN ")).unwrap();
    assert_eq!(
        opened["status"],
        json!("live"),
        "the restart did not pause it"
    );
    assert_eq!(opened["pauseCause"], json!(null));
    assert_eq!(opened["continuations"], json!(1));

    let report: Value = serde_json::from_str(after(&lines, "DONE ")).unwrap();
    let turns = report["turns"].as_array().unwrap();
    assert_eq!(
        turns.len(),
        2,
        "the interrupted turn resumed; one more continuation"
    );
    assert_eq!(
        report["terminals"],
        json!([[turns[0], "completed"], [turns[1], "completed"]]),
        "the interrupted goal turn settled once, as itself"
    );
    assert_eq!(report["goal"]["status"], json!("achieved"));
    let steps = std::fs::read_to_string(dir.path().join("steps")).unwrap();
    assert_eq!(
        steps.lines().collect::<Vec<_>>(),
        vec!["start", "resume"],
        "the replay-safe step ran again in the resumed turn"
    );
    assert_eq!(
        report["users"],
        json!([
            "Continue working toward the goal.",
            "Continue working toward the goal.",
            "Goal achieved: Index the archive\nIndexed."
        ])
    );
}
