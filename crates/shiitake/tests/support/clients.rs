//! The protocols' official clients (`cargo xtask clients`) against a `serve`: a scene
//! of a workspace, a scripted model and the `serve` playing it, and a client script of
//! `tests/support/` run to its end, read as the JSON lines it printed.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use shiitake_test_services::Service;

use super::{Serve, free_port, script, wait_with_timeout};

/// The clients' Python, a workspace with `notes.txt` (`PURPLE-42`), and a `serve` on it
/// playing a scripted model.
pub struct Scene {
    pub python: PathBuf,
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub port: u16,
    pub model: String,
    pub serve: Serve,
}

impl Scene {
    /// The scene with a model playing `turns`; `None` after the skip line when the
    /// clients' Python is missing.
    pub fn start(turns: &Value) -> Option<Self> {
        let python = Service::clients_python()?;
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(workspace.join("notes.txt"), "PURPLE-42\n").unwrap();
        let model = script(dir.path(), turns);
        let port = free_port();
        let serve = Serve::start(&dir.path().join("data"), &workspace, port, Some(&model));
        Some(Self {
            python,
            dir,
            workspace,
            port,
            model,
            serve,
        })
    }

    /// The operator's token of this scene's `serve`.
    pub fn token(&self) -> String {
        let token = std::fs::read_to_string(self.serve.data_dir.join("token")).unwrap();
        token.trim().to_owned()
    }

    /// `serve` killed with SIGKILL and started again on the same data directory.
    pub fn restart(&mut self) {
        self.serve.kill();
        self.serve = Serve::start(
            &self.dir.path().join("data"),
            &self.workspace,
            self.port,
            Some(&self.model),
        );
    }
}

/// Runs `tests/support/<client>` with `python` and `args`, within `timeout`: the JSON
/// lines it printed. A failed run fails the test with what it printed.
pub fn json_lines<I, S>(python: &Path, client: &str, args: I, timeout: Duration) -> Vec<Value>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(client);
    let child = Command::new(python)
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_with_timeout(child, timeout);
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{client} failed: {printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    printed
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}
