//! What the CLI tests share: driving the real `shiitake` binary (a `serve` child on a
//! free port, client commands), piped `chat` against an in-test Agent ([`chat`]), a
//! real MCP server ([`mcp`]), and the Local roster of
//! `shiitake-roster-local`'s own tests ([`roster`]).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod chat;
pub mod clients;
pub mod echo_model;
pub mod hub;
pub mod mcp;
/// The Local roster of the roster's own tests: Agents on gated scripts, served over HTTP.
#[path = "../../../shiitake-roster-local/tests/support/mod.rs"]
pub mod roster;
pub mod small_fs;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_shiitake")
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes a scripted-model JSON file and returns its `scripted:` spec.
pub fn script(dir: &Path, json: &serde_json::Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, serde_json::to_vec_pretty(json).unwrap()).unwrap();
    format!("scripted:{}", path.display())
}

/// A running `shiitake serve`; killed when dropped.
pub struct Serve {
    pub child: Child,
    pub url: String,
    pub data_dir: PathBuf,
    pub printed: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    /// Starts `serve` on `port` and waits for its "listening on" line.
    pub fn start(data_dir: &Path, workspace: &Path, port: u16, model: Option<&str>) -> Self {
        let workspace = workspace.display().to_string();
        Self::start_with(data_dir, &["--workspace", &workspace], port, model)
    }

    /// Starts `serve` with `args` besides the data directory, port and model.
    pub fn start_with(data_dir: &Path, args: &[&str], port: u16, model: Option<&str>) -> Self {
        let mut command = Command::new(binary());
        command
            .args(["serve", "--port", &port.to_string()])
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env_remove("SHIITAKE_MODEL")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // No model is `--model none`: without --model, serve would start the bundled one.
        command.args(["--model", model.unwrap_or("none")]);
        Self::spawn(command, data_dir)
    }

    /// Spawns `command` (a `serve` on `data_dir`, however it is wrapped) with its
    /// stdout piped, and waits for its "listening on" line.
    pub fn spawn(mut command: Command, data_dir: &Path) -> Self {
        command.stdout(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let printed = Arc::new(Mutex::new(Vec::new()));
        let lines = printed.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(url) = line.strip_prefix("shiitake: listening on ") {
                    let _ = tx.send(url.to_owned());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("serve printed its address");
        Self {
            child,
            url,
            data_dir: data_dir.to_path_buf(),
            printed,
        }
    }

    /// What `serve` printed on stdout so far, line by line.
    pub fn printed(&self) -> Vec<String> {
        self.printed.lock().unwrap().clone()
    }

    /// Waits until `serve` printed a line for which `wanted` holds, at most `timeout`.
    pub fn wait_printed(&self, timeout: Duration, wanted: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.printed().iter().any(|line| wanted(line)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Collects what `serve` writes on stderr (spawned with it piped) from now on.
    pub fn collect_stderr(&mut self) -> Arc<Mutex<String>> {
        let logs = Arc::new(Mutex::new(String::new()));
        let mut stderr = self.child.stderr.take().expect("stderr was piped");
        let sink = logs.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut stderr, &mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        logs
    }

    /// A client command against this server.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(binary());
        command
            .args(args)
            .arg("--url")
            .arg(&self.url)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .env("NO_COLOR", "1");
        command
    }

    /// A new Session, made by a `chat` with nothing typed: its id, read from what it printed.
    pub fn new_session(&self) -> String {
        let created = self
            .command(&["chat"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        session_id_in(&stdout(&created))
    }

    /// Sends `text` to `session` with `shiitake send`, which must succeed.
    pub fn send(&self, session: &str, text: &str) {
        let sent = self.command(&["send", session, text]).output().unwrap();
        assert!(
            sent.status.success(),
            "{}",
            String::from_utf8_lossy(&sent.stderr)
        );
    }

    /// What `shiitake watch SESSION --until-idle` printed (at most 60 s), once it ended well.
    pub fn watch_until_idle(&self, session: &str) -> String {
        let watch = self
            .command(&["watch", session, "--until-idle"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let output = wait_with_timeout(watch, Duration::from_secs(60));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout(&output)
    }

    /// Runs `chat`, typing `input` on its stdin, and returns what it printed.
    pub fn chat(&self, input: &str, timeout: Duration) -> Output {
        run_with_input(self.command(&["chat"]), input, timeout)
    }

    /// SIGKILLs the server.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The first Session id (`ses_…`) in what a client printed.
pub fn session_id_in(printed: &str) -> String {
    printed
        .split_whitespace()
        .find_map(|word| word.strip_prefix("ses_"))
        .map(|id| format!("ses_{}", id.trim_end_matches(']')))
        .unwrap_or_else(|| panic!("no session id in {printed}"))
}

/// Runs `command` with `input` on its stdin and returns what it printed.
pub fn run_with_input(mut command: Command, input: &str, timeout: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    wait_with_timeout(child, timeout)
}

/// Waits for `child`, killing it after `timeout`.
pub fn wait_with_timeout(mut child: Child, timeout: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "the command did not finish in {timeout:?}; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stdout as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The host pids of live processes whose command line holds `marker`.
pub fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            (!zombie && String::from_utf8_lossy(&cmdline).contains(marker)).then_some(pid)
        })
        .collect()
}
