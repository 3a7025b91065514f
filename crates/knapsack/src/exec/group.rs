//! A command's process group: every process it starts (that does not leave the group on
//! purpose) is signalled together, so a timeout, a cancel or a dropped call ends the
//! whole command, not only its first process.

use rustix::process::{Pid, Signal, kill_process_group};

/// The group of a spawned command, killed whole when dropped unless it was reaped and
/// emptied first.
#[derive(Debug)]
pub(crate) struct Group {
    pid: Option<Pid>,
}

impl Group {
    /// The group led by the process `pid` (spawned with `process_group(0)`).
    pub(crate) fn led_by(pid: Option<u32>) -> Self {
        Self {
            pid: pid
                .and_then(|pid| i32::try_from(pid).ok())
                .and_then(Pid::from_raw),
        }
    }

    /// Asks every process of the group to stop (`SIGTERM`).
    pub(crate) fn terminate(&self) {
        self.signal(Signal::TERM);
    }

    /// Ends every process of the group (`SIGKILL`).
    pub(crate) fn kill(&self) {
        self.signal(Signal::KILL);
    }

    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid {
            // The group may be gone already (every process exited): nothing to do.
            if let Err(error) = kill_process_group(pid, signal) {
                tracing::trace!(%error, "signalling a command's process group");
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}
