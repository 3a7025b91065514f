//! Two Agent processes on one SQLite file race for 100 occurrences: each is
//! admitted exactly once and its prompt runs once, in one of the two processes.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::*;
use serde_json::Value;

const OCCURRENCES: usize = 100;

fn harness() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join("race_harness")
}

fn output(child: std::process::Child) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(harness())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", harness().display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_admit_each_of_100_occurrences_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let db = path.to_str().unwrap();
    let n = OCCURRENCES.to_string();
    let setup = output(spawn(&["setup", db, &n, "2500"]));
    assert_eq!(setup.trim(), "READY");

    // Both processes open before the occurrences come due, then race for them.
    let a = spawn(&["run", db, &n]);
    let b = spawn(&["run", db, &n]);
    let runs: Vec<usize> = [output(a), output(b)]
        .iter()
        .map(|out| {
            out.trim()
                .strip_prefix("RUNS ")
                .unwrap_or_else(|| panic!("{out}"))
                .parse()
                .unwrap()
        })
        .collect();
    eprintln!("runs served by each process: {runs:?}");
    assert_eq!(
        runs.iter().sum::<usize>(),
        OCCURRENCES,
        "each prompt ran once"
    );
    assert!(
        runs.iter().all(|k| *k > 0),
        "both processes took part: {runs:?}"
    );

    let commands = admitted_commands(&path).await;
    assert_eq!(
        commands.len(),
        OCCURRENCES,
        "each occurrence admitted exactly once"
    );
    let mut keys: Vec<&String> = commands.iter().map(|c| &c.0).collect();
    keys.dedup();
    assert_eq!(keys.len(), OCCURRENCES);
    let mut sessions: Vec<&String> = commands.iter().map(|c| &c.1).collect();
    sessions.sort();
    sessions.dedup();
    assert_eq!(sessions.len(), OCCURRENCES, "one occurrence per Session");

    let rows: Vec<String> =
        sqlx::query_scalar("SELECT value FROM extension_rows WHERE collection = 'schedules'")
            .fetch_all(&mut connect(&path).await)
            .await
            .unwrap();
    assert_eq!(rows.len(), OCCURRENCES);
    for row in rows {
        let schedule: Value = serde_json::from_str(&row).unwrap();
        assert_eq!(
            (&schedule["status"], &schedule["admitted"]),
            (&Value::from("done"), &Value::from(1)),
            "{schedule}"
        );
    }
    assert_eq!(almanac_timers(&path).await, 0, "no timer or delivery left");
}
