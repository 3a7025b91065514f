//! The server dies mid-run; a restarted server resumes the run and `watch` sees it complete.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use crate::support::{Serve, free_port, script, wait_with_timeout};
use serde_json::json;

#[test]
fn watch_resumes_across_a_killed_and_restarted_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The first model call stalls long enough to kill the server under it; the
    // call after recovery answers. The script keeps its place in the data directory
    // across the restart, so the killed call used the first turn and the resumed run
    // plays the second.
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "turns": [
                {"steps": [{"delay_ms": 1500}, {"text": "Killed before this was sent."}]},
                {"steps": [{"text": "Recovered and finished."}]}
            ]
        }),
    );
    let port = free_port();
    let mut serve = Serve::start(&data, dir.path(), port, Some(&model));

    let session = serve.new_session();
    serve.send(&session, "finish this please");

    let mut watch = serve
        .command(&["watch", &session, "--until-idle"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(first, "you: finish this please");

    // Kill the server mid-run, then start it again on the same port and data.
    std::thread::sleep(Duration::from_millis(300));
    serve.kill();
    std::thread::sleep(Duration::from_millis(300));
    let _restarted = Serve::start(&data, dir.path(), port, Some(&model));

    let rest: Vec<String> = {
        let reader = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
        let output = wait_with_timeout(watch, Duration::from_secs(60));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        reader.join().unwrap()
    };
    let printed = rest.join("\n");
    assert!(
        printed.contains("assistant: Recovered and finished."),
        "{printed}"
    );
    assert!(printed.contains("[run completed]"), "{printed}");
    assert_eq!(printed.matches("[run completed]").count(), 1, "{printed}");
}
