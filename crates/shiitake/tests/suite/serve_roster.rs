//! `shiitake serve` runs the Local roster: `--skills` roots give `skill.load`,
//! `--computer` directories become Home's Computers (a person chooses among several
//! with `/home`), `agents` lists the directory, and a malformed `--computer` ends
//! `serve` with a message naming it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use crate::support::{Serve, binary, free_port, script, stdout, wait_with_timeout};
use serde_json::json;

/// A skills root with one skill, and two Computers with one file each.
fn layout(dir: &std::path::Path) -> (String, String, String) {
    let skills = dir.join("skills");
    std::fs::create_dir_all(skills.join("release-notes")).unwrap();
    std::fs::write(
        skills.join("release-notes/SKILL.md"),
        "---\nname: release-notes\ndescription: Writes release notes.\n---\n\
         Group changes by crate; lead with what users notice.\n",
    )
    .unwrap();
    let notes = dir.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("todo.md"), "Ship the roster on Friday.\n").unwrap();
    let code = dir.join("code");
    std::fs::create_dir_all(&code).unwrap();
    std::fs::write(code.join("main.rs"), "fn main() { println!(\"hello\"); }\n").unwrap();
    (
        skills.display().to_string(),
        format!("notes={}", notes.display()),
        format!("code={}", code.display()),
    )
}

#[test]
fn skills_and_computers_reach_the_runs_of_the_local_roster() {
    let dir = tempfile::tempdir().unwrap();
    let (skills, notes, code) = layout(dir.path());
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [{"tool_call": {"name": "skill__load", "arguments": {"name": "release-notes"}}}]},
            {"steps": [{"tool_call": {"name": "files__read", "arguments": {"path": "todo.md"}}}]},
            {"steps": [{"tool_call": {"name": "files__read",
                                      "arguments": {"path": "computer://code/main.rs"}}}]},
            {"steps": [{"text": "Read the skill, the notes and the code."}]}
        ]}),
    );
    let serve = Serve::start_with(
        &dir.path().join("data"),
        &[
            "--skills",
            &skills,
            "--computer",
            &notes,
            "--computer",
            &code,
        ],
        free_port(),
        Some(&model),
    );
    assert!(
        serve
            .printed()
            .iter()
            .any(|line| line == "shiitake: skills: 1"),
        "{:?}",
        serve.printed()
    );
    assert!(
        serve
            .printed()
            .iter()
            .any(|line| line == "shiitake: agents main"),
        "{:?}",
        serve.printed()
    );

    let agents = serve.command(&["agents"]).output().unwrap();
    assert_eq!(stdout(&agents), "main  (default)\n");

    // Two Computers: none is Home until a person chooses; then the run reads both.
    // (The choice is made in a chat of its own: a chat that runs `/home` and sends a
    // prompt from one pipe can leave before the run, when the choice's update frame
    // arrives after the prompt was sent and resets chat's count of waiting prompts.)
    let chose = serve.chat("/home notes\n", Duration::from_secs(60));
    assert!(
        stdout(&chose).contains("\"by\":\"person\""),
        "{}",
        stdout(&chose)
    );
    let output = serve.chat("Write the release notes.\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(
        output.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = |tool: &str, needle: &str| {
        printed.lines().any(|line| {
            line.starts_with(&format!("[tool result] {tool}:")) && line.contains(needle)
        })
    };
    assert!(
        result("skill__load", "lead with what users notice"),
        "{printed}"
    );
    assert!(
        result("files__read", "Ship the roster on Friday."),
        "{printed}"
    );
    assert!(result("files__read", "println!"), "{printed}");
    assert!(
        printed.contains("assistant: Read the skill, the notes and the code."),
        "{printed}"
    );
}

#[test]
fn a_malformed_computer_or_a_missing_directory_stops_serve_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let run = |computer: &str| {
        let child = Command::new(binary())
            .args([
                "serve",
                "--port",
                &free_port().to_string(),
                "--model",
                "none",
            ])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--computer", computer])
            .env_remove("SHIITAKE_MODEL")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_with_timeout(child, Duration::from_secs(30))
    };
    let malformed = run("notes");
    assert!(!malformed.status.success());
    let said = String::from_utf8_lossy(&malformed.stderr);
    assert!(said.contains("expected NAME=DIR"), "{said}");

    let missing = dir.path().join("not-there");
    let missing = run(&format!("notes={}", missing.display()));
    assert!(!missing.status.success());
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        said.contains("--computer") && said.contains("not-there"),
        "{said}"
    );
}
