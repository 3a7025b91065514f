//! A person's first conversation: `serve` as a child process, `chat` on piped stdin.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::{Serve, free_port, script, stdout};
use serde_json::json;

#[test]
fn chat_streams_the_answer_and_shows_the_tool_call() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.md"), "the launch is on Tuesday\n").unwrap();
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "chunk_chars": 3,
            "chunk_delay_ms": 5,
            "turns": [
                {"steps": [
                    {"text": "Let me look at the notes."},
                    {"tool_call": {"name": "files__read", "arguments": {"path": "notes.md"}}}
                ]},
                {"steps": [{"text": "The notes say the launch is on Tuesday."}]}
            ]
        }),
    );
    let serve = Serve::start(
        &dir.path().join("data"),
        &workspace,
        free_port(),
        Some(&model),
    );
    let output = serve.chat("When is the launch?\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(
        output.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = printed.lines().collect();
    let expected = [
        "assistant: Let me look at the notes.",
        "[tool call] files__read({\"path\":\"notes.md\"})",
        "[tool] running files__read",
        "assistant: The notes say the launch is on Tuesday.",
        "[run completed]",
    ];
    let mut at = 0;
    for want in expected {
        let found = lines[at..].iter().position(|line| *line == want);
        let Some(found) = found else {
            panic!("missing {want:?} after line {at} in:\n{printed}");
        };
        at += found + 1;
    }
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("[tool result] files__read:")
                && line.contains("the launch is on Tuesday")),
        "{printed}"
    );

    // The conversation is in the inbox, titled by its first prompt.
    let listed = serve.command(&["sessions"]).output().unwrap();
    let listed = stdout(&listed);
    assert!(listed.starts_with("done"), "{listed}");
    assert!(listed.contains("When is the launch?"), "{listed}");
}

#[test]
fn without_a_model_the_run_fails_saying_how_to_configure_one() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("data"), dir.path(), free_port(), None);
    let output = serve.chat("hello?\n", Duration::from_secs(60));
    let printed = stdout(&output);
    let failed = printed
        .lines()
        .find(|line| line.starts_with("[run failed]"))
        .unwrap_or_else(|| panic!("no failed run in:\n{printed}"));
    assert!(failed.contains("--model"), "{failed}");
    assert!(failed.contains("SHIITAKE_MODEL"), "{failed}");
    assert!(failed.contains("docs/models.md"), "{failed}");
}

#[test]
fn a_wrong_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("data"), dir.path(), free_port(), None);
    let output = serve
        .command(&["sessions", "--token", "definitely-not-the-token"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("not_granted"), "{error}");
}

#[test]
fn a_retried_model_call_is_announced() {
    let dir = tempfile::tempdir().unwrap();
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [{"fail": {"status": 503, "message": "the provider is overloaded"}}]},
            {"steps": [{"text": "Here after one retry."}]}
        ]}),
    );
    let serve = Serve::start(
        &dir.path().join("data"),
        dir.path(),
        free_port(),
        Some(&model),
    );
    let output = serve.chat("hello?\n", Duration::from_secs(60));
    let printed = stdout(&output);
    let retry = printed
        .lines()
        .find(|line| line.starts_with("[retry]"))
        .unwrap_or_else(|| panic!("no retry notice in:\n{printed}"));
    assert!(retry.starts_with("[retry] attempt 2/"), "{retry}");
    assert!(retry.contains("overloaded"), "{retry}");
    assert!(
        printed.contains("assistant: Here after one retry."),
        "{printed}"
    );
    assert!(printed.contains("[run completed]"), "{printed}");
}
