//! The bundled model's profile on `serve`: a small model is offered the file tools and
//! `question` only, so a model that calls `agents.create`, `loop.start` or
//! `goal.create` anyway creates no Agent, loop or goal (the calls are answered as
//! unknown tools), while the file tools work; `--tools` lets the host offer more.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::{Serve, free_port, script, stdout};
use serde_json::{Value, json};
use shiitake_model::{ModelEnv, ModelProfile, select};

/// A script that tries to create an Agent, a loop and a goal, then reads a file.
fn eager(dir: &std::path::Path) -> String {
    let call = |name: &str, arguments: Value| json!({"steps": [{"tool_call": {"name": name, "arguments": arguments}}]});
    script(
        dir,
        &json!({"model": "scripted", "turns": [
            call("agents__create", json!({"name": "functions"})),
            call("loop__start", json!({"prompt": "again", "cadence": "*/5 * * * *"})),
            call("goal__create", json!({"objective": "keep going"})),
            call("files__read", json!({"path": "notes.txt"})),
            {"steps": [{"text": "Done."}]}
        ]}),
    )
}

/// The workspace `serve` works in: one file, `notes.txt`.
fn workspace(dir: &std::path::Path) -> std::path::PathBuf {
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "The launch is on Tuesday.\n").unwrap();
    workspace
}

fn result_line<'a>(printed: &'a str, tool: &str) -> &'a str {
    printed
        .lines()
        .find(|line| line.starts_with(&format!("[tool result] {tool}")))
        .unwrap_or_else(|| panic!("no result of {tool}:\n{printed}"))
}

#[test]
fn the_bundled_model_spec_is_small() {
    let spec = shiitake_local_model::spec(
        "http://127.0.0.1:8090/v1",
        shiitake_local_model::Weights::default(),
    );
    let model = select(&spec, &ModelEnv::default()).unwrap();
    assert_eq!(model.profile(), ModelProfile::Small, "{spec}");
}

#[test]
fn a_small_model_creates_no_agent_loop_or_goal_but_reads_files() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = workspace(dir.path());
    // The same profile as the bundled model's spec (`the_bundled_model_spec_is_small`).
    let model = format!("{}?profile=small", eager(dir.path()));
    let serve = Serve::start(
        &dir.path().join("data"),
        &workspace,
        free_port(),
        Some(&model),
    );
    assert!(
        serve.printed().iter().any(|line| line
            == "shiitake: tools all to full models, files,question to small ones such as \
                the bundled model (--tools LIST to choose)"),
        "{:?}",
        serve.printed()
    );
    let output = serve.chat(
        "Hello! In one sentence, what can you do?\n",
        Duration::from_secs(60),
    );
    let printed = stdout(&output);
    assert!(output.status.success(), "{printed}");
    for tool in ["agents__create", "loop__start", "goal__create"] {
        assert_eq!(
            result_line(&printed, tool),
            format!("[tool result] {tool} (error): no tool `{tool}` is available"),
        );
    }
    assert!(
        result_line(&printed, "files__read").contains("The launch is on Tuesday."),
        "{printed}"
    );
    assert!(printed.contains("assistant: Done."), "{printed}");
    // No Agent was created: the directory holds the default Agent only.
    let agents = serve.command(&["agents"]).output().unwrap();
    assert_eq!(stdout(&agents), "main  (default)\n");
}

#[test]
fn the_host_may_offer_a_small_model_more_with_tools() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = workspace(dir.path());
    let model = format!("{}?profile=small", eager(dir.path()));
    let workspace_arg = workspace.display().to_string();
    let serve = Serve::start_with(
        &dir.path().join("data"),
        &[
            "--workspace",
            &workspace_arg,
            "--tools",
            "files,agents.create",
        ],
        free_port(),
        Some(&model),
    );
    assert!(
        serve
            .printed()
            .iter()
            .any(|line| line == "shiitake: tools agents.create,files (every model; --tools)"),
        "{:?}",
        serve.printed()
    );
    let output = serve.chat("Make an Agent.\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(output.status.success(), "{printed}");
    assert!(
        !result_line(&printed, "agents__create").contains("(error)"),
        "{printed}"
    );
    // loop.start stays out: the host named agents.create alone.
    assert!(
        result_line(&printed, "loop__start").contains("no tool `loop__start` is available"),
        "{printed}"
    );
    let agents = serve.command(&["agents"]).output().unwrap();
    assert_eq!(stdout(&agents), "main  (default)\nfunctions\n");
}
