//! Commands run in a Computer's root (`knapsack::exec`), with real processes: status
//! and output, the time limit and a cancel ending the whole process group (a child that
//! ignores SIGTERM included, checked from outside through /proc), what a command leaves
//! behind killed when it exits, bounded output under a flood, the environment built
//! from nothing, the working directory confined to the root, and every bad input
//! refused with its reason, at its bound and one past.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use knapsack::exec::{
    CommandLimits, CommandLine, ExecError, ExecOutput, ExecRequest, Exit, LocalCommands, Stopped,
};
use tokio_util::sync::CancellationToken;

fn commands(root: &Path, limits: CommandLimits) -> LocalCommands {
    LocalCommands::new(root, limits).unwrap()
}

fn shell(line: &str) -> ExecRequest {
    ExecRequest {
        command: CommandLine::Shell(line.to_owned()),
        cwd: None,
        timeout: None,
    }
}

async fn run(commands: &LocalCommands, request: ExecRequest) -> Result<ExecOutput, ExecError> {
    commands.exec(&request, &CancellationToken::new()).await
}

/// Whether the process `pid` is gone (or only a zombie waiting for its reaper).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state is the field after the command's name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (at most 10 s) for the pid a command wrote into `file`, and then for that
/// process to be gone; false if it is still running then.
async fn ends(file: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn a_command_answers_its_status_and_both_streams() {
    let dir = tempfile::tempdir().unwrap();
    let commands = commands(dir.path(), CommandLimits::default());
    let output = run(&commands, shell("echo out; echo err >&2; exit 3"))
        .await
        .unwrap();
    assert_eq!(output.exit, Exit::Code(3));
    assert_eq!(output.stopped, None);
    assert_eq!(output.stdout.head, "out\n");
    assert_eq!(output.stderr.head, "err\n");
    assert_eq!((output.stdout.cut_bytes, output.stdout.total_bytes), (0, 4));

    // An argv runs without a shell: its arguments are not split or expanded.
    let output = run(
        &commands,
        ExecRequest {
            command: CommandLine::Argv(vec![
                "printf".into(),
                "%s|".into(),
                "a b".into(),
                "$HOME".into(),
            ]),
            cwd: None,
            timeout: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(output.exit, Exit::Code(0));
    assert_eq!(output.stdout.head, "a b|$HOME|");

    // A signal that ends it is said as such.
    let output = run(&commands, shell("kill -TERM $$")).await.unwrap();
    assert_eq!(output.exit, Exit::Signal(15));

    // Binary output arrives as text with replacement characters.
    let output = run(&commands, shell("printf 'a\\377b'")).await.unwrap();
    assert_eq!(output.stdout.head, "a\u{FFFD}b");
    assert_eq!(output.stdout.total_bytes, 3);
}

#[tokio::test]
async fn the_time_limit_ends_the_whole_group_even_what_ignores_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let limits = CommandLimits {
        kill_grace: Duration::from_millis(300),
        ..CommandLimits::default()
    };
    let commands = commands(dir.path(), limits);
    // A child that forks twice and ignores SIGTERM, and a parent that ignores it too.
    let line = "trap '' TERM; \
                (sh -c 'trap \"\" TERM; echo $$ > grandchild.pid; exec sleep 60' &); \
                sleep 60";
    let output = run(
        &commands,
        ExecRequest {
            timeout: Some(Duration::from_millis(500)),
            ..shell(line)
        },
    )
    .await
    .unwrap();
    assert_eq!(output.stopped, Some(Stopped::TimedOut));
    assert_eq!(output.exit, Exit::Signal(9), "it ignored SIGTERM: killed");
    assert!(
        ends(&dir.path().join("grandchild.pid")).await,
        "the double-forked child outlived the command"
    );
}

#[tokio::test]
async fn a_cancel_ends_a_running_command_and_what_it_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let commands = commands(dir.path(), CommandLimits::default());
    let cancel = CancellationToken::new();
    let request = shell("sleep 60 & echo $! > child.pid; wait");
    let cancelling = {
        let cancel = cancel.clone();
        let pid_file = dir.path().join("child.pid");
        tokio::spawn(async move {
            while !pid_file.exists() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            cancel.cancel();
        })
    };
    let output = tokio::time::timeout(Duration::from_secs(30), commands.exec(&request, &cancel))
        .await
        .expect("the cancel ended the command, not its 60 s")
        .unwrap();
    cancelling.await.unwrap();
    assert_eq!(output.stopped, Some(Stopped::Cancelled));
    assert!(ends(&dir.path().join("child.pid")).await);

    // A command that exits leaving a process running in its group: that process ends
    // with it, and the call does not wait for it.
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        run(&commands, shell("sleep 60 & echo $! > left.pid")),
    )
    .await
    .expect("the call did not wait for what the command left running")
    .unwrap();
    assert_eq!(output.exit, Exit::Code(0));
    assert!(ends(&dir.path().join("left.pid")).await);
}

#[tokio::test]
async fn a_flood_of_output_is_kept_to_its_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let limits = CommandLimits {
        output_bytes: 1024,
        ..CommandLimits::default()
    };
    let commands = commands(dir.path(), limits);
    let output = run(
        &commands,
        shell("printf start; head -c 10000000 /dev/zero | tr '\\0' x; printf end"),
    )
    .await
    .unwrap();
    assert_eq!(output.exit, Exit::Code(0));
    assert_eq!(output.stdout.total_bytes, 10_000_008);
    assert_eq!(output.stdout.cut_bytes, 10_000_008 - 1024);
    assert!(output.stdout.head.starts_with("startxxx"));
    assert_eq!(output.stdout.head.len(), 512);
    assert!(output.stdout.tail.ends_with("xxxend"));
    assert_eq!(output.stdout.tail.len(), 512);
}

#[tokio::test]
async fn the_environment_holds_only_what_the_host_names() {
    let dir = tempfile::tempdir().unwrap();
    let env_of = |output: ExecOutput| -> Vec<String> {
        let mut names: Vec<String> = output
            .stdout
            .head
            .lines()
            .filter_map(|line| line.split_once('=').map(|(name, _)| name.to_owned()))
            .collect();
        names.sort();
        names
    };
    let request = ExecRequest {
        command: CommandLine::Argv(vec!["env".into()]),
        cwd: None,
        timeout: None,
    };
    // Cargo runs tests with CARGO_* in their environment: none reaches the command.
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
    let bare = env_of(
        run(
            &commands(dir.path(), CommandLimits::default()),
            request.clone(),
        )
        .await
        .unwrap(),
    );
    let allowed = ["HOME", "LANG", "LC_ALL", "PATH", "TERM", "TZ"];
    assert!(
        bare.iter().all(|name| allowed.contains(&name.as_str())),
        "{bare:?}"
    );
    assert!(bare.contains(&"HOME".to_owned()) && bare.contains(&"PATH".to_owned()));
    let limits = CommandLimits {
        pass_env: vec!["CARGO_PKG_NAME".into()],
        ..CommandLimits::default()
    };
    let passed = run(&commands(dir.path(), limits), request).await.unwrap();
    assert!(
        passed.stdout.head.contains("CARGO_PKG_NAME=knapsack"),
        "{}",
        passed.stdout.head
    );
}

#[tokio::test]
async fn the_working_directory_stays_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("file"), "").unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
    let commands = commands(&root, CommandLimits::default());
    let at = |cwd: &str| ExecRequest {
        cwd: Some(cwd.to_owned()),
        ..shell("pwd -P")
    };
    let output = run(&commands, at("sub")).await.unwrap();
    let real = std::fs::canonicalize(root.join("sub")).unwrap();
    assert_eq!(output.stdout.head.trim_end(), real.to_str().unwrap());
    let real_root = std::fs::canonicalize(&root).unwrap();
    let absolute = real_root.join("sub");
    assert_eq!(
        run(&commands, at(absolute.to_str().unwrap()))
            .await
            .unwrap()
            .exit,
        Exit::Code(0)
    );
    for escape in ["..", "../root/../..", "/etc", "out", "out/sub"] {
        assert!(
            matches!(
                run(&commands, at(escape)).await,
                Err(ExecError::OutsideRoot { .. })
            ),
            "{escape}"
        );
    }
    assert!(matches!(
        run(&commands, at("file")).await,
        Err(ExecError::NotADirectory { .. })
    ));
    assert!(matches!(
        run(&commands, at("missing")).await,
        Err(ExecError::NotADirectory { .. })
    ));
}

#[tokio::test]
async fn bad_commands_are_refused_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let limits = CommandLimits {
        max_command_bytes: 16,
        max_timeout: Duration::from_secs(5),
        ..CommandLimits::default()
    };
    let commands = commands(dir.path(), limits);
    let argv = |argv: &[&str]| ExecRequest {
        command: CommandLine::Argv(argv.iter().map(|a| (*a).to_owned()).collect()),
        cwd: None,
        timeout: None,
    };
    let refused = |result: Result<ExecOutput, ExecError>| match result {
        Err(ExecError::Invalid { reason }) => reason,
        other => panic!("not refused: {other:?}"),
    };
    assert_eq!(
        refused(run(&commands, argv(&[])).await),
        "the argv is empty"
    );
    assert_eq!(
        refused(run(&commands, argv(&[""])).await),
        "the program's name is empty"
    );
    assert_eq!(
        refused(run(&commands, argv(&["echo", "a\0b"])).await),
        "an argument contains a NUL byte"
    );
    assert_eq!(
        refused(run(&commands, shell("  ")).await),
        "the shell line is empty"
    );
    // 16 bytes in all is the bound: `echo` and 12 bytes run, 13 do not.
    assert_eq!(
        run(&commands, argv(&["echo", "123456789012"]))
            .await
            .unwrap()
            .exit,
        Exit::Code(0)
    );
    assert!(refused(run(&commands, argv(&["echo", "1234567890123"])).await).contains("17 bytes"));
    // The time limit: zero and above the host's are refused, the host's is not.
    let timed = |timeout| ExecRequest {
        timeout: Some(timeout),
        ..argv(&["true"])
    };
    assert_eq!(
        refused(run(&commands, timed(Duration::ZERO)).await),
        "the time limit is zero"
    );
    assert_eq!(
        run(&commands, timed(Duration::from_secs(5)))
            .await
            .unwrap()
            .exit,
        Exit::Code(0)
    );
    assert!(refused(run(&commands, timed(Duration::from_millis(5001))).await).contains("above"));
    // A program that does not exist.
    assert!(matches!(
        run(&commands, argv(&["nope-x"])).await,
        Err(ExecError::Spawn { .. })
    ));
}
