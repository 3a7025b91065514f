//! Computers that run commands, end to end against the release binary: a scripted model
//! writes a file and a script with `commands.exec`, runs the script, which reads the
//! file, and reads its output; and a `serve` killed with SIGKILL while a command runs
//! leaves no process of it behind, and after the restart the call is answered "outcome
//! unknown", never run again. Both in the sandbox (bubblewrap), as `serve` runs them by
//! default.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use knapsack::exec::{Sandbox, SandboxPolicy};
use serde_json::json;
use shiitake_test_services::{Missing, Service};

use crate::support::{
    Serve, free_port, processes_with, run_with_input, script, session_id_in, stdout,
};

/// Whether the sandbox can be had here: `false` after the skip line (a failure under
/// SHIITAKE_REQUIRE_SERVICES).
fn sandbox_here() -> bool {
    let found = Sandbox::detect(SandboxPolicy::default())
        .map(|_| ())
        .map_err(|error| Missing::new(error.to_string()));
    Service::Sandbox.check(found).is_some()
}

fn serve(dir: &Path, workspace: &Path, port: u16, model: &str) -> Serve {
    let workspace = workspace.display().to_string();
    Serve::start_with(
        &dir.join("data"),
        &["--workspace", &workspace, "--approve", "allow"],
        port,
        Some(model),
    )
}

#[test]
fn a_model_writes_a_script_runs_it_and_reads_what_it_printed() {
    if !sandbox_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let write = "printf 'hello from the data\\n' > input.txt && \
                 printf '#!/bin/sh\\nread line < input.txt\\necho \"read: $line\"\\nexit 3\\n' > read.sh && \
                 chmod +x read.sh";
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "turns": [
                {"steps": [{"tool_call": {"name": "commands__exec", "arguments": {"command": write}}}]},
                {"steps": [{"tool_call": {"name": "commands__exec", "arguments": {"argv": ["./read.sh"]}}}]},
                {"steps": [{"text": "The script read the data."}]}
            ]
        }),
    );
    let serve = serve(dir.path(), &workspace, free_port(), &model);
    assert!(
        serve
            .printed()
            .iter()
            .any(|line| line.contains("commands run in the sandbox")
                && line.contains("processes")
                && !line.contains("  ")),
        "the start says how commands run and what bounds their processes: {:?}",
        serve.printed()
    );
    let output = serve.chat("Run the script.\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(output.status.success(), "{printed}");
    let results: Vec<&str> = printed
        .lines()
        .filter(|line| line.starts_with("[tool result] commands__exec:"))
        .collect();
    assert_eq!(results.len(), 2, "{printed}");
    assert!(
        results[0].contains(": exit 0 in ") && results[0].ends_with(" on workspace"),
        "{}",
        results[0]
    );
    assert!(results[1].contains(": exit 3 in "), "{}", results[1]);
    // The script's output, once (live while it ran, or under its result).
    let read = printed
        .lines()
        .filter(|line| *line == "  | read: hello from the data")
        .count();
    assert_eq!(read, 1, "{printed}");
    assert!(
        printed.contains("assistant: The script read the data."),
        "{printed}"
    );
    // What the command wrote is in the Computer's directory, seen from outside.
    assert_eq!(
        std::fs::read_to_string(workspace.join("input.txt")).unwrap(),
        "hello from the data\n"
    );
}

#[test]
fn a_command_running_when_serve_is_killed_dies_with_it_and_is_not_run_again() {
    if !sandbox_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let marker = format!("{}.{}", 400 + std::process::id() % 100, std::process::id());
    let line = format!(
        "echo ran >> runs.txt; (setsid sleep {marker} &); sleep {marker}; echo never >> runs.txt"
    );
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "turns": [
                {"steps": [{"tool_call": {"name": "commands__exec", "arguments": {"command": line}}}]},
                {"steps": [{"text": "I cannot tell whether it finished."}]}
            ]
        }),
    );
    let port = free_port();
    let mut first = serve(dir.path(), &workspace, port, &model);
    let session = first.new_session();
    first.send(&session, "run the long one");
    // The command runs: it wrote its line and its two sleeps are up (one in a session of
    // its own). The sandbox's own processes hold the marker in their arguments too.
    let deadline = Instant::now() + Duration::from_secs(30);
    let sleeping = || {
        processes_with(&marker)
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| cmdline.starts_with(b"sleep\0"))
            })
            .count()
    };
    while sleeping() < 2 || !workspace.join("runs.txt").exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }

    first.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_with(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind by the killed serve: {:?}",
            processes_with(&marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let restarted = serve(dir.path(), &workspace, port, &model);
    let printed = restarted.watch_until_idle(&session);
    assert!(printed.contains("outcome unknown"), "{printed}");
    assert!(
        printed.contains("assistant: I cannot tell whether it finished."),
        "{printed}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("runs.txt")).unwrap(),
        "ran\n",
        "run once, never again, and never to its end"
    );
    assert!(processes_with(&marker).is_empty());
}

#[test]
fn a_command_rule_lets_one_command_run_and_the_next_waits_for_a_person() {
    if !sandbox_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "turns": [
                {"steps": [{"tool_call": {"name": "commands__exec", "arguments": {"command": "touch made.txt && ls"}}}]},
                {"steps": [{"tool_call": {"name": "commands__exec", "arguments": {"command": "rm made.txt"}}}]},
                {"steps": [{"text": "Removed."}]}
            ]
        }),
    );
    let workspace_arg = workspace.display().to_string();
    // The Local default asks before commands; the rule allows `touch`, and `ls` only reads.
    let serve = Serve::start_with(
        &dir.path().join("data"),
        &[
            "--workspace",
            &workspace_arg,
            "--approve-command",
            "touch *=allow",
        ],
        free_port(),
        Some(&model),
    );
    assert!(
        serve
            .printed()
            .iter()
            .any(|line| line.contains("command touch *=allow")),
        "{:?}",
        serve.printed()
    );
    let session = serve.new_session();
    serve.send(&session, "make it, then remove it");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = stdout(&serve.command(&["sessions"]).output().unwrap());
        if listed
            .lines()
            .any(|line| line.starts_with("needs_you") && line.contains(&session))
        {
            break;
        }
        assert!(Instant::now() < deadline, "the rm never waited: {listed}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        workspace.join("made.txt").exists(),
        "touch ran without asking, rm waits"
    );
    // The question a person answers names the command, where it runs and that it has no
    // network; allowed once, it runs.
    let asked = stdout(&run_with_input(
        serve.command(&["chat", "--session", &session]),
        "/approve\n1\ny\n/quit\n",
        Duration::from_secs(60),
    ));
    let question = asked
        .lines()
        .find(|line| line.contains("approve commands__exec?") && line.contains("(the host asks"))
        .unwrap_or_else(|| panic!("no question in {asked}"));
    assert!(question.contains("rm made.txt"), "{question}");
    for fact in [
        "computer: workspace",
        "cwd: computer://workspace/ (its root)",
        "network: off",
        "sandbox: on",
    ] {
        assert!(question.contains(fact), "{fact} in {question}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while workspace.join("made.txt").exists() {
        assert!(
            Instant::now() < deadline,
            "the allowed rm never ran: {asked}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn chat_shows_a_running_commands_output_before_its_result() {
    if !sandbox_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let ticks = "for i in 1 2 3; do echo tick $i; sleep 0.4; done";
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "turns": [
                {"steps": [{"tool_call": {"name": "commands__exec", "arguments": {"command": ticks}}}]},
                {"steps": [{"text": "Ticked."}]}
            ]
        }),
    );
    let serve = serve(dir.path(), &workspace, free_port(), &model);
    let output = serve.chat("Tick.\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(output.status.success(), "{printed}");
    let lines: Vec<&str> = printed.lines().collect();
    let at = |wanted: &str| {
        lines
            .iter()
            .position(|line| line.starts_with(wanted))
            .unwrap_or_else(|| panic!("no {wanted:?} in:\n{printed}"))
    };
    let (first, second, result) = (
        at("  | tick 1"),
        at("  | tick 2"),
        at("[tool result] commands__exec"),
    );
    assert!(first < second && second < result, "{printed}");
    let third = lines.iter().filter(|line| **line == "  | tick 3").count();
    assert_eq!(third, 1, "each line once: {printed}");
}

/// Without bubblewrap `serve` offers no command and says so at start; `--sandbox off`
/// offers them unconfined and says that. The model's call is then answered as a tool that
/// does not exist, never run.
#[test]
fn without_a_sandbox_serve_offers_no_commands_unless_told_to_run_them_unconfined() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    // A search path with `sh` and `prlimit` but no `bwrap`.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for program in ["sh", "prlimit", "touch"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(program))
            .find(|path| path.exists())
            .unwrap();
        std::os::unix::fs::symlink(found, bin.join(program)).unwrap();
    }
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "turns": [
                {"steps": [{"tool_call": {"name": "commands__exec", "arguments": {"command": "touch ran"}}}]},
                {"steps": [{"text": "No commands here."}]}
            ]
        }),
    );
    let start = |data: &str, extra: &[&str]| {
        let mut command = std::process::Command::new(crate::support::binary());
        command
            .args(["serve", "--port", &free_port().to_string(), "--data-dir"])
            .arg(dir.path().join(data))
            .arg("--workspace")
            .arg(&workspace)
            .args(["--model", &model, "--approve", "allow"])
            .args(extra)
            .env("PATH", &bin)
            .env_remove("SHIITAKE_MODEL")
            .stderr(Stdio::inherit());
        Serve::spawn(command, &dir.path().join(data))
    };
    let off = start("data", &[]);
    let said = off.printed();
    assert!(
        said.iter().any(
            |line| line.contains("commands off: the sandbox cannot be had here")
                && line.contains("bwrap")
        ),
        "{said:?}"
    );
    let output = off.chat("Touch it.\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(
        printed.contains("no tool `commands__exec` is available"),
        "{printed}"
    );
    assert!(!workspace.join("ran").exists());
    drop(off);

    let unconfined = start("data2", &["--sandbox", "off"]);
    assert!(
        unconfined
            .printed()
            .iter()
            .any(|line| line.contains("commands run UNCONFINED")),
        "{:?}",
        unconfined.printed()
    );
}

#[test]
fn a_background_job_of_a_killed_serve_is_listed_lost_after_the_restart() {
    if !sandbox_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let marker = format!("{}.{}", 500 + std::process::id() % 100, std::process::id());
    let line = format!("sleep {marker}");
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "turns": [
                {"steps": [{"tool_call": {"name": "commands__exec", "arguments": {"command": line, "background": true}}}]},
                {"steps": [{"text": "Started."}]},
                {"steps": [{"tool_call": {"name": "jobs__list", "arguments": {}}}]},
                {"steps": [{"text": "It was lost."}]}
            ]
        }),
    );
    let port = free_port();
    let mut first = serve(dir.path(), &workspace, port, &model);
    let output = first.chat("Start the server.\n", Duration::from_secs(60));
    let printed = stdout(&output);
    assert!(printed.contains("started on workspace: sleep"), "{printed}");
    let session = session_id_in(&printed);
    assert!(!processes_with(&marker).is_empty(), "the job runs");
    let jobs = |serve: &Serve| {
        let output = run_with_input(
            serve.command(&["chat", "--session", &session]),
            "/jobs\n/quit\n",
            Duration::from_secs(60),
        );
        let printed = stdout(&output);
        printed
            .lines()
            .find(|line| line.starts_with("[/jobs]"))
            .unwrap_or_else(|| panic!("no /jobs answer in {printed}"))
            .to_owned()
    };
    let listed = jobs(&first);
    assert!(listed.contains("\"state\":\"running\""), "{listed}");
    assert!(listed.contains(&format!("sleep {marker}")), "{listed}");
    assert!(listed.contains("\"kill\":\"/kill job-"), "{listed}");

    first.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_with(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the job outlived its host");
        std::thread::sleep(Duration::from_millis(20));
    }

    let restarted = serve(dir.path(), &workspace, port, &model);
    restarted.send(&session, "what runs?");
    let printed = restarted.watch_until_idle(&session);
    let listed = printed
        .lines()
        .find(|line| line.starts_with("[tool result] jobs__list:"))
        .unwrap_or_else(|| panic!("no listing in {printed}"));
    assert!(listed.contains("\"jobs\":[]"), "{listed}");
    assert!(listed.contains("\"lost\":true"), "{listed}");
    assert!(listed.contains(&format!("sleep {marker}")), "{listed}");
    let listed = jobs(&restarted);
    assert!(listed.contains("\"state\":\"lost\""), "{listed}");
    assert!(!listed.contains("\"kill\""), "{listed}");
}
