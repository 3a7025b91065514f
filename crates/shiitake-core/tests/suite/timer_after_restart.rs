//! A timer set before a crash fires once after the restart: a real child process
//! is SIGKILLed after arming the timer and the Agent reopens after it came due.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn harness() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join("timer_harness")
}

/// Runs a phase to its first line of output; returns the child and that line.
fn first_line(phase: &str, dir: &Path) -> (std::process::Child, String) {
    let mut child = Command::new(harness())
        .args([phase, dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", harness().display()));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().to_owned())
}

#[test]
fn an_overdue_timer_fires_once_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (mut armed, line) = first_line("arm", dir.path());
    assert_eq!(line, "ARMED");
    armed.kill().unwrap(); // SIGKILL before the timer is due
    armed.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1200)); // now it is overdue

    let (mut watcher, line) = first_line("watch", dir.path());
    assert!(watcher.wait().unwrap().success());
    assert_eq!(line, "FIRED 1", "the overdue timer fired on open");

    let (mut again, line) = first_line("watch", dir.path());
    assert!(again.wait().unwrap().success());
    assert_eq!(line, "FIRED 1", "a second restart does not fire it again");
}
