//! The Local host's hardening (issue 22): one data directory per process, a private data
//! directory, an allowlist of models, a workspace that is never `$HOME` or `/`, SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{Serve, binary, free_port, script, stdout, wait_with_timeout};
use serde_json::json;

/// A `serve` that is expected to refuse to start: its output once it has exited.
fn serve_refused(data_dir: &Path, workspace: Option<&Path>, cwd: &Path) -> std::process::Output {
    let mut command = Command::new(binary());
    command
        .args(["serve", "--model", "none", "--port"])
        .arg(free_port().to_string())
        .arg("--data-dir")
        .arg(data_dir)
        .current_dir(cwd)
        .env_remove("SHIITAKE_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(workspace) = workspace {
        command.arg("--workspace").arg(workspace);
    }
    wait_with_timeout(command.spawn().unwrap(), Duration::from_secs(20))
}

#[test]
fn a_second_serve_on_the_same_data_directory_exits_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let first = Serve::start(&data, dir.path(), free_port(), None);

    let second = serve_refused(&data, Some(dir.path()), dir.path());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("pid {}", first.child.id())),
        "the message names the holder: {stderr}"
    );
    assert!(
        !stdout(&second).contains("listening on"),
        "{}",
        stdout(&second)
    );

    // The first server still answers.
    let listed = first.command(&["sessions"]).output().unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
}

#[cfg(unix)]
#[test]
fn the_data_directory_and_its_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let set = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };

    // A fresh data directory is created private.
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh").join("data");
    let serve = Serve::start(&fresh, dir.path(), free_port(), None);
    assert_eq!(mode(&fresh), 0o700);
    assert_eq!(mode(&fresh.join("token")), 0o600);
    drop(serve);

    // One that a person opened up is tightened at the next start, files and all.
    set(&fresh, 0o755);
    for name in ["token", "shiitake.db", "shiitake.db-wal", "shiitake.db-shm"] {
        let path = fresh.join(name);
        if path.exists() {
            set(&path, 0o644);
        }
    }
    let _serve = Serve::start(&fresh, dir.path(), free_port(), None);
    assert_eq!(mode(&fresh), 0o700);
    for name in ["token", "shiitake.db", "shiitake.db-wal", "shiitake.db-shm"] {
        let path = fresh.join(name);
        if path.exists() {
            assert_eq!(mode(&path), 0o600, "{name}");
        }
    }
    assert!(fresh.join("shiitake.db").exists());
}

#[test]
fn serve_without_a_workspace_refuses_home_and_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let data = dir.path().join("data");
    for cwd in [home.as_path(), Path::new("/")] {
        let mut command = Command::new(binary());
        command
            .args(["serve", "--model", "none", "--port"])
            .arg(free_port().to_string())
            .arg("--data-dir")
            .arg(&data)
            .current_dir(cwd)
            .env("HOME", &home)
            .env_remove("SHIITAKE_MODEL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let output = wait_with_timeout(command.spawn().unwrap(), Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{}: {stderr}", cwd.display());
        assert!(stderr.contains("--workspace"), "{stderr}");
    }
    // An ordinary directory is used, and said so.
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut command = Command::new(binary());
    command
        .args(["serve", "--model", "none", "--port"])
        .arg(free_port().to_string())
        .arg("--data-dir")
        .arg(&data)
        .current_dir(&project)
        .env("HOME", &home)
        .env_remove("SHIITAKE_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut printed = String::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap())) {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("shiitake: listening on ") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let project = std::fs::canonicalize(&project).unwrap();
    assert!(
        printed.contains(&format!(
            "shiitake: computer workspace at {}",
            project.display()
        )),
        "{printed}"
    );
}

#[test]
fn the_file_tools_cannot_reach_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let model = script(
        dir.path(),
        &json!({
            "model": "scripted",
            "turns": [
                {"steps": [{"tool_call": {"name": "files__read", "arguments": {"path": "data/token"}}}]},
                {"steps": [{"tool_call": {"name": "files__grep", "arguments": {"pattern": "[0-9a-f]{64}"}}}]},
                {"steps": [{"text": "done"}]}
            ]
        }),
    );
    let serve = Serve::start(&data, dir.path(), free_port(), Some(&model));
    let token = std::fs::read_to_string(data.join("token")).unwrap();
    let output = serve.chat("read the token\n", Duration::from_secs(60));
    let printed = format!(
        "{}{}",
        stdout(&output),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(printed.contains("done"), "{printed}");
    assert!(
        !printed.contains(token.trim()),
        "the token leaked: {printed}"
    );
    let snapshot = serve.command(&["sessions"]).output().unwrap();
    assert!(snapshot.status.success());
}

#[cfg(unix)]
#[test]
fn sigterm_closes_the_agent_like_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut command = Command::new(binary());
    command
        .args(["serve", "--model", "none", "--port"])
        .arg(free_port().to_string())
        .arg("--data-dir")
        .arg(&data)
        .arg("--workspace")
        .arg(dir.path())
        .env_remove("SHIITAKE_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("shiitake: listening on ") {
            break;
        }
    }
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let reader = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let output = wait_with_timeout(child, Duration::from_secs(20));
    printed.push_str(&reader.join().unwrap().join("\n"));
    assert!(
        output.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        printed.contains("shiitake: terminated: stopping"),
        "{printed}"
    );
    assert!(printed.contains("shiitake: the Agents closed"), "{printed}");
}

#[test]
fn a_log_filter_that_does_not_parse_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(binary())
        .args(["sessions", "--url", "http://127.0.0.1:9", "--token"])
        .arg("0123456789abcdef0123")
        .arg("--data-dir")
        .arg(dir.path())
        .env("SHIITAKE_LOG", "shiitake=loud")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("SHIITAKE_LOG"), "{stderr}");
}

#[test]
fn a_session_may_choose_only_the_models_the_host_allows() {
    use shiitake_client::{ClientOptions, RemoteAgent};
    use shiitake_protocol::{
        AgentApi, ErrorCode, ModelPreference, ModelSpec, RequestId, SessionApi,
    };

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [{"steps": [{"text": "hi"}]}]}),
    );
    let allowed = "openai-compatible:http://127.0.0.1:9/v1#allowed";
    let port = free_port();
    let mut command = Command::new(binary());
    command
        .args([
            "serve",
            "--port",
            &port.to_string(),
            "--model",
            &model,
            "--allow-model",
            allowed,
        ])
        .arg("--data-dir")
        .arg(&data)
        .arg("--workspace")
        .arg(dir.path())
        .env_remove("SHIITAKE_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_COMPATIBLE_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let child = command.spawn().unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Kill(child);
    let out = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("shiitake: listening on ") {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("serve started");
    let token = std::fs::read_to_string(data.join("token")).unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let agent = RemoteAgent::new(ClientOptions::new(url).with_token(token.trim())).unwrap();
        let id = agent
            .create_session(RequestId::new("r1").unwrap())
            .await
            .unwrap();
        let session = agent.session(id);
        let preference = |spec: &str| ModelPreference {
            model: ModelSpec::new(spec).unwrap(),
            reasoning: None,
        };
        for refused in [
            "scripted:/etc/passwd",
            "openai-compatible:http://any-host.invalid/v1#m",
            "openai:gpt-4o",
            "anthropic:claude-sonnet-4-5",
            "openai-compatible:http://127.0.0.1:9/v1#allowed2",
        ] {
            let error = session
                .set_model_preference(preference(refused))
                .await
                .err();
            assert_eq!(
                error.map(|e| e.code),
                Some(ErrorCode::NotGranted),
                "{refused}"
            );
        }
        assert_eq!(session.model_preference().await.unwrap(), None);
        for granted in [model.as_str(), allowed] {
            session
                .set_model_preference(preference(granted))
                .await
                .unwrap();
            assert_eq!(
                session.model_preference().await.unwrap(),
                Some(preference(granted))
            );
        }
    });
}
