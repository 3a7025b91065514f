//! [`LocalCommands`]: commands run as child processes of the host, in a directory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::capture::{Capture, Captured};
use super::group::Group;
use super::jobs::{JobId, JobOutput, JobSummary, Jobs};
use super::sandbox::Sandbox;
use super::spawned::Spawned;
use super::{CommandLimits, CommandLine, ExecError, ExecOutput, ExecRequest};
use crate::error::FilesError;
use crate::local::resolve::Root;

/// Handed each piece of a command's output as it is read (`exec_watched`).
pub type OutputWatcher = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// How long the output of a command that exited is still read: a process that left its
/// group (and so was not killed with it) may hold the pipes open for ever.
const DRAIN: Duration = Duration::from_millis(500);

/// Commands run in a directory on this machine (see the module documentation).
#[derive(Debug, Clone)]
pub struct LocalCommands {
    root: Root,
    real_root: PathBuf,
    limits: CommandLimits,
    /// Where its commands run confined; `None` runs them as plain children of the host.
    sandbox: Option<Arc<Sandbox>>,
    /// Its background jobs.
    jobs: Arc<Jobs>,
}

impl LocalCommands {
    /// Commands run in `root` (which must be a directory) within `limits`.
    pub fn new(root: &Path, limits: CommandLimits) -> std::io::Result<Self> {
        let real_root = std::fs::canonicalize(root)?;
        let jobs = Arc::new(Jobs::new(&limits));
        Ok(Self {
            root: Root::new(&real_root)?,
            real_root,
            limits,
            sandbox: None,
            jobs,
        })
    }

    /// The same, its commands run in `sandbox`.
    #[must_use]
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(Arc::new(sandbox));
        self
    }

    /// The sandbox its commands run in, if any.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        self.sandbox.as_deref()
    }

    /// The bounds its commands run within.
    pub fn limits(&self) -> &CommandLimits {
        &self.limits
    }

    /// Runs `request` to its end, its time limit, or `cancel`, whichever comes first.
    pub async fn exec(
        &self,
        request: &ExecRequest,
        cancel: &CancellationToken,
    ) -> Result<ExecOutput, ExecError> {
        self.exec_watched(request, cancel, None).await
    }

    /// [`exec`](Self::exec), handing `watcher` each piece of output as it comes (both
    /// streams), so a caller can show a running command's output live.
    pub async fn exec_watched(
        &self,
        request: &ExecRequest,
        cancel: &CancellationToken,
        watcher: Option<OutputWatcher>,
    ) -> Result<ExecOutput, ExecError> {
        let timeout = self.timeout(request.timeout)?;
        let mut spawned = self.spawn(request)?;
        let limit = self.limits.output_bytes;
        let stdout = Reader::start(spawned.child.stdout.take(), limit, watcher.clone());
        let stderr = Reader::start(spawned.child.stderr.take(), limit, watcher);
        let (exit, stopped, duration_ms) = spawned.wait(timeout, cancel).await?;
        Ok(ExecOutput {
            exit,
            stopped,
            duration_ms,
            stdout: stdout.finish().await,
            stderr: stderr.finish().await,
        })
    }

    /// Starts `request` as a background job of `owner`: the call answers at once, the
    /// command runs until it ends, its time limit (the host's longest when it names
    /// none) or [`kill_job`](Self::kill_job).
    pub fn start_job(&self, request: &ExecRequest, owner: &str) -> Result<JobSummary, ExecError> {
        let timeout = match request.timeout {
            None => self.limits.max_timeout,
            Some(_) => self.timeout(request.timeout)?,
        };
        self.jobs
            .start(&request.command, owner, timeout, || self.spawn(request))
    }

    /// New output of `owner`'s job `job` from `cursor` (the start when absent), at most
    /// the Computer's output bound.
    pub fn job_output(
        &self,
        job: &JobId,
        owner: &str,
        cursor: Option<u64>,
    ) -> Result<JobOutput, ExecError> {
        self.jobs.output(job, owner, cursor)
    }

    /// Ends `owner`'s job `job` (its whole group, as a timeout would) and answers its
    /// state once it ended.
    pub async fn kill_job(&self, job: &JobId, owner: &str) -> Result<JobSummary, ExecError> {
        self.jobs.kill(job, owner).await
    }

    /// Asks `owner`'s job `job` to end (its whole group, as [`kill_job`](Self::kill_job)
    /// does) without waiting for it: for a caller that cannot wait, such as an
    /// extension's synchronous command.
    pub fn request_kill(&self, job: &JobId, owner: &str) -> Result<(), ExecError> {
        self.jobs.request_kill(job, owner)
    }

    /// `owner`'s jobs, oldest first.
    pub fn list_jobs(&self, owner: &str) -> Vec<JobSummary> {
        self.jobs.list(owner)
    }

    /// Whether `job` was started by these commands in this life of the host, kept or
    /// not: one that was not died with an earlier host (a restart, a takeover).
    pub fn started_here(&self, job: &JobId) -> bool {
        self.jobs.of_this_life(job)
    }

    /// Starts `request`'s command (checked) as a child of the host in its own process
    /// group, in the sandbox when there is one; its output is piped.
    pub(crate) fn spawn(&self, request: &ExecRequest) -> Result<Spawned, ExecError> {
        let argv = self.argv(&request.command)?;
        let cwd = self.cwd(request.cwd.as_deref())?;
        let (mut command, cgroup) = match &self.sandbox {
            Some(sandbox) => {
                let (wrapped, cgroup) =
                    sandbox
                        .wrap(&self.real_root, &cwd, &argv)
                        .map_err(|detail| ExecError::Spawn {
                            program: argv[0].clone(),
                            detail: format!("its process cgroup could not be made: {detail}"),
                        })?;
                let mut command = Command::new(&wrapped[0]);
                command.args(&wrapped[1..]);
                (command, cgroup)
            }
            None => {
                let mut command = Command::new(&argv[0]);
                command.args(&argv[1..]);
                (command, None)
            }
        };
        command
            .current_dir(&cwd)
            .env_clear()
            .envs(super::env::build(&self.real_root, &self.limits.pass_env))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let child = command.spawn().map_err(|error| ExecError::Spawn {
            program: argv[0].clone(),
            detail: error.to_string(),
        })?;
        Ok(Spawned {
            group: Group::led_by(child.id()),
            child,
            program: argv[0].clone(),
            started: Instant::now(),
            kill_grace: self.limits.kill_grace,
            sandboxed: self.sandbox.is_some(),
            _cgroup: cgroup,
        })
    }

    /// The program and its arguments, checked.
    fn argv(&self, command: &CommandLine) -> Result<Vec<String>, ExecError> {
        let argv = match command {
            CommandLine::Argv(argv) => argv.clone(),
            CommandLine::Shell(line) => {
                if line.trim().is_empty() {
                    return Err(ExecError::invalid("the shell line is empty"));
                }
                vec!["sh".to_owned(), "-c".to_owned(), line.clone()]
            }
        };
        let Some(program) = argv.first() else {
            return Err(ExecError::invalid("the argv is empty"));
        };
        if program.is_empty() {
            return Err(ExecError::invalid("the program's name is empty"));
        }
        if argv.iter().any(|argument| argument.contains('\0')) {
            return Err(ExecError::invalid("an argument contains a NUL byte"));
        }
        let bytes: usize = argv.iter().map(String::len).sum();
        if bytes > self.limits.max_command_bytes {
            return Err(ExecError::invalid(format!(
                "the command is {bytes} bytes, more than the {} allowed",
                self.limits.max_command_bytes
            )));
        }
        Ok(argv)
    }

    /// The working directory, confined to the root.
    fn cwd(&self, requested: Option<&str>) -> Result<PathBuf, ExecError> {
        let Some(requested) = requested else {
            return Ok(self.real_root.clone());
        };
        let resolved = self.root.resolve(requested).map_err(|error| match error {
            FilesError::OutsideRoot { .. } => ExecError::OutsideRoot {
                path: requested.to_owned(),
            },
            other => ExecError::invalid(other.to_string()),
        })?;
        if !resolved.real.is_dir() {
            return Err(ExecError::NotADirectory {
                path: requested.to_owned(),
            });
        }
        Ok(resolved.real)
    }

    /// The wall-time limit, checked against the host's.
    pub(crate) fn timeout(&self, requested: Option<Duration>) -> Result<Duration, ExecError> {
        match requested {
            None => Ok(self.limits.default_timeout),
            Some(timeout) if timeout.is_zero() => Err(ExecError::invalid("the time limit is zero")),
            Some(timeout) if timeout > self.limits.max_timeout => Err(ExecError::invalid(format!(
                "the time limit of {} s is above the host's {} s",
                timeout.as_secs_f64(),
                self.limits.max_timeout.as_secs_f64()
            ))),
            Some(timeout) => Ok(timeout),
        }
    }
}

/// One stream read into a bounded capture by a task of its own, so a full pipe never
/// blocks the command.
struct Reader {
    capture: Arc<Mutex<Capture>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Reader {
    fn start(
        stream: Option<impl AsyncRead + Unpin + Send + 'static>,
        limit: usize,
        watcher: Option<OutputWatcher>,
    ) -> Self {
        let capture = Arc::new(Mutex::new(Capture::new(limit)));
        let task = stream.map(|mut stream| {
            let capture = capture.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 16 * 1024];
                loop {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => {
                            if let Some(watcher) = &watcher {
                                watcher(&buffer[..read]);
                            }
                            capture
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push(&buffer[..read]);
                        }
                    }
                }
            })
        });
        Self { capture, task }
    }

    /// What was read, once the stream ended or [`DRAIN`] passed.
    async fn finish(mut self) -> Captured {
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(DRAIN, &mut task).await.is_err()
        {
            task.abort();
        }
        let capture = std::mem::replace(
            &mut *self.capture.lock().unwrap_or_else(PoisonError::into_inner),
            Capture::new(0),
        );
        capture.finish()
    }
}
