//! What `chat` prints is what happened, and nothing else: an empty answer is
//! shown as such, and control characters from the model or a tool are printed
//! as visible escapes, so neither can drive the terminal.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use crate::support::{Serve, free_port, script, stdout};
use serde_json::json;

#[test]
fn control_characters_from_the_model_and_tools_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("notes.md"),
        "\x1b[31mred alert\x1b[0m\r\nline two\x07\n",
    )
    .unwrap();
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "chunk_chars": 2,
            "turns": [
                {"steps": [
                    {"text": "\u{1b}]0;pwned\u{7}\u{1b}[2JLook\roverwritten"},
                    {"tool_call": {"name": "files__read", "arguments": {"path": "notes.md"}}},
                    {"tool_call": {"name": "rm\u{1b}[2J", "arguments": {}}}
                ]},
                {"steps": [{"text": "Done \u{1b}[1mbold\u{9b}2J \u{202e}txet"}]}
            ]
        }),
    );
    let serve = Serve::start(
        &dir.path().join("data"),
        &workspace,
        free_port(),
        Some(&model),
    );
    let output = serve.chat("Read the notes.\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(output.status.success(), "{printed}");
    // Not one raw control character (but newlines) reached the terminal.
    let raw: Vec<char> = printed
        .chars()
        .filter(|c| (c.is_control() && *c != '\n') || *c == '\u{202e}')
        .collect();
    assert!(
        raw.is_empty(),
        "raw control characters {raw:?} in:\n{printed}"
    );
    let lines: Vec<&str> = printed.lines().collect();
    assert!(
        lines.contains(&r"assistant: \x1b]0;pwned\x07\x1b[2JLook\roverwritten"),
        "{printed}"
    );
    assert!(
        lines.contains(&r"assistant: Done \x1b[1mbold\x9b2J \u{202e}txet"),
        "{printed}"
    );
    let result = lines
        .iter()
        .find(|line| line.starts_with("[tool result] files__read:"))
        .unwrap_or_else(|| panic!("no tool result in:\n{printed}"));
    // The files tools answer JSON, whose encoder escapes these already; the
    // check above holds for any tool whose text carries them raw.
    assert!(result.contains("red alert"), "{result}");
    // A tool name with an escape in it: shown escaped in the call and in the error result.
    assert!(lines.contains(&r"[tool call] rm\x1b[2J({})"), "{printed}");
    let unknown = lines
        .iter()
        .find(|line| line.starts_with(r"[tool result] rm\x1b[2J (error):"))
        .unwrap_or_else(|| panic!("no error result in:\n{printed}"));
    assert!(unknown.contains(r"\x1b[2J"), "{unknown}");
    assert!(printed.contains("[run completed]"), "{printed}");
}

#[test]
fn an_empty_answer_is_shown_as_no_text() {
    let dir = tempfile::tempdir().unwrap();
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [{"steps": [{"text": ""}]}]}),
    );
    let serve = Serve::start(
        &dir.path().join("data"),
        dir.path(),
        free_port(),
        Some(&model),
    );
    let output = serve.chat("Hello, who are you?\n", Duration::from_secs(60));
    let printed = stdout(&output);
    let lines: Vec<&str> = printed.lines().collect();
    let at = lines
        .iter()
        .position(|line| *line == "assistant: (no text)")
        .unwrap_or_else(|| panic!("no `(no text)` line in:\n{printed}"));
    assert_eq!(lines.get(at + 1), Some(&"[run completed]"), "{printed}");
}

#[test]
fn piped_output_has_no_colour_even_without_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [{"steps": [{"text": "plain"}]}]}),
    );
    let serve = Serve::start(
        &dir.path().join("data"),
        dir.path(),
        free_port(),
        Some(&model),
    );
    let mut command = serve.command(&["chat"]);
    command.env_remove("NO_COLOR").env("CLICOLOR", "1");
    let output = support::run_with_input(command, "hi\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(printed.contains("assistant: plain"), "{printed}");
    assert!(
        !printed.contains('\x1b'),
        "colour codes in a pipe:\n{printed:?}"
    );
}
