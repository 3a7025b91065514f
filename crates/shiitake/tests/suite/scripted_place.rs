//! `serve --model scripted:<path>` builds a model per run, yet the script plays on:
//! each run takes the next turn, and a restarted server goes on where it stopped
//! (the place is kept in the data directory).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::{Serve, free_port, script, stdout};
use serde_json::json;

#[test]
fn a_script_plays_on_across_runs_and_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [{"text": "Turn one."}]},
            {"steps": [{"text": "Turn two."}]},
            {"steps": [{"text": "Turn three."}]}
        ]}),
    );
    let port = free_port();
    let mut serve = Serve::start(&data, dir.path(), port, Some(&model));
    let first = stdout(&serve.chat("hello\n", Duration::from_secs(60)));
    assert!(first.contains("Turn one."), "{first}");
    // The same Session again: its next run plays the next turn.
    let session = first
        .split_whitespace()
        .find_map(|word| word.strip_prefix("ses_"))
        .map(|id| format!("ses_{}", id.trim_end_matches(']')))
        .unwrap_or_else(|| panic!("no session id in {first}"));
    let chat = |serve: &Serve, line: &str| {
        let mut command = serve.command(&["chat", "--session", &session]);
        command.env("NO_COLOR", "1");
        stdout(&crate::support::run_with_input(
            command,
            line,
            Duration::from_secs(60),
        ))
    };
    let second = chat(&serve, "again\n");
    assert!(second.contains("Turn two."), "{second}");
    serve.kill();

    let restarted = Serve::start(&data, dir.path(), port, Some(&model));
    let third = chat(&restarted, "once more\n");
    assert!(third.contains("Turn three."), "{third}");
    assert!(
        data.join("scripted").is_dir(),
        "the place lives in the data directory"
    );
}
