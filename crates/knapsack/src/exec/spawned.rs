//! A command started as a child of the host in a process group of its own, and the wait
//! for its end: its time limit or a cancel stop the whole group (`SIGTERM`, `SIGKILL`
//! after the grace), and what it leaves running in the group is killed when it ends.

use std::time::{Duration, Instant};

use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use super::group::Group;
use super::{ExecError, Exit, Stopped};

/// A command started by `LocalCommands::spawn`: its child, its group and what the wait
/// needs to say how it ended.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) group: Group,
    pub(crate) program: String,
    pub(crate) started: Instant,
    pub(crate) kill_grace: Duration,
    pub(crate) sandboxed: bool,
    /// The command's `pids` cgroup, removed once the command is done with.
    pub(crate) _cgroup: Option<super::pids::CommandCgroup>,
}

impl Spawned {
    /// Waits for the command to end, its time limit or `cancel`: how it ended, whether
    /// the host stopped it, and how long it ran. What it left running in its group is
    /// killed.
    pub(crate) async fn wait(
        &mut self,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<(Exit, Option<Stopped>, u64), ExecError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let (status, stopped) = tokio::select! {
            status = self.child.wait() => (status, None),
            () = tokio::time::sleep_until(deadline) => (self.stop().await, Some(Stopped::TimedOut)),
            () = cancel.cancelled() => (self.stop().await, Some(Stopped::Cancelled)),
        };
        // What the command left running in its group ends with it.
        self.group.kill();
        let duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let exit = match status {
            Ok(status) if self.sandboxed => from_sandbox(exit_of(status)),
            Ok(status) => exit_of(status),
            Err(error) => {
                return Err(ExecError::Spawn {
                    program: self.program.clone(),
                    detail: format!("waiting for it failed: {error}"),
                });
            }
        };
        Ok((exit, stopped, duration_ms))
    }

    /// Asks the group to stop, and kills it after the grace.
    async fn stop(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.group.terminate();
        match tokio::time::timeout(self.kill_grace, self.child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                self.group.kill();
                self.child.wait().await
            }
        }
    }
}

/// How `status` says the command ended.
fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        // Neither: stopped or continued, which `wait` does not report.
        (None, None) => Exit::Signal(0),
    }
}

/// How a command run in the sandbox ended: bubblewrap exits with the command's status,
/// and with 128 + the signal's number when a signal ended it (as a shell reports it),
/// so such a status is read as that signal.
fn from_sandbox(exit: Exit) -> Exit {
    match exit {
        Exit::Code(code) if (129..=128 + 64).contains(&code) => Exit::Signal(code - 128),
        other => other,
    }
}
