//! Commands: running a program in a Computer's root, bounded in time and output
//! (issue 47, "Computers that run commands"; the plan and what stands are in
//! docs/commands.md).
//!
//! [`LocalCommands`] runs one command at a time per call: an argv, or a shell line run
//! with `sh -c`, in a working directory confined to the root (symlinks out of it
//! refused), with stdin closed and an environment built from nothing
//! (`env.rs`: the host's secrets reach it only when named). The command leads a
//! process group of its own (`group.rs`), signalled whole when the time limit passes,
//! the caller cancels, or the call is dropped: `SIGTERM`, then `SIGKILL` after a grace;
//! whatever the command leaves running in its group when it exits is killed too. Each
//! stream's output is kept bounded, head and tail (`capture.rs`).
//!
//! With a [`Sandbox`] (`sandbox.rs`), each command runs confined: the host's files
//! read-only, the root writable but its `.git`, the host's data hidden, no network,
//! a process namespace that dies with the host, resource limits.
//!
//! Not here yet (docs/commands.md): background jobs, streaming progress, approval by
//! command, and the tool projection.

mod capture;
mod env;
mod group;
mod jobs;
mod local;
mod pids;
mod sandbox;
mod spawned;

use std::time::Duration;

use serde::Serialize;

pub use capture::Captured;
pub use jobs::{JobId, JobLimits, JobOutput, JobSummary};
pub use local::{LocalCommands, OutputWatcher};
#[cfg(target_os = "linux")]
pub use sandbox::sweep_orphans;
pub use sandbox::{ProcessCount, ProcessLimits, Sandbox, SandboxPolicy, SandboxUnavailable};

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLine {
    /// A program and its arguments, run as they are (no shell).
    Argv(Vec<String>),
    /// A shell line, run with `sh -c`.
    Shell(String),
}

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// What to run.
    pub command: CommandLine,
    /// The working directory, relative to the root (or absolute inside it); the root
    /// when absent.
    pub cwd: Option<String>,
    /// The wall-time limit; [`CommandLimits::default_timeout`] when absent, refused above
    /// [`CommandLimits::max_timeout`].
    pub timeout: Option<Duration>,
}

/// The bounds a host sets on the commands of a Computer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLimits {
    /// The wall-time limit of a command that names none.
    pub default_timeout: Duration,
    /// The longest wall-time limit a command may ask for.
    pub max_timeout: Duration,
    /// Bytes kept of each stream (half its head, half its tail).
    pub output_bytes: usize,
    /// The most bytes of an argv (all its arguments) or a shell line.
    pub max_command_bytes: usize,
    /// How long a command asked to stop (`SIGTERM`) has before it is killed.
    pub kill_grace: Duration,
    /// Host environment variables a command gets, by name, besides the base ones.
    pub pass_env: Vec<String>,
    /// The bounds of background jobs.
    pub jobs: JobLimits,
}

impl Default for CommandLimits {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(1800),
            output_bytes: 64 * 1024,
            max_command_bytes: 64 * 1024,
            kill_grace: Duration::from_secs(2),
            pass_env: Vec::new(),
            jobs: JobLimits::default(),
        }
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

/// Why the host stopped a command before it ended by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Stopped {
    /// Its wall-time limit passed.
    TimedOut,
    /// Its caller cancelled it (an abort, a cancel, the Session closing).
    Cancelled,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecOutput {
    /// How it ended.
    pub exit: Exit,
    /// Why the host stopped it, when it did.
    pub stopped: Option<Stopped>,
    /// From its start to its end.
    pub duration_ms: u64,
    /// Its standard output, bounded.
    pub stdout: Captured,
    /// Its standard error, bounded.
    pub stderr: Captured,
}

/// Why a command was not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// The request is not one that can be run.
    #[error("invalid command: {reason}")]
    Invalid {
        /// What is wrong.
        reason: String,
    },
    /// The working directory is outside the root (or reaches out of it by a symlink).
    #[error("the working directory {path} is outside the computer's root")]
    OutsideRoot {
        /// As asked.
        path: String,
    },
    /// The working directory is not a directory.
    #[error("the working directory {path} is not a directory")]
    NotADirectory {
        /// As asked.
        path: String,
    },
    /// A background job cannot start: the bound of jobs kept is reached and every one
    /// of them still runs.
    #[error("{scope} already keeps {limit} background jobs, all running: kill one first")]
    TooManyJobs {
        /// The bound.
        limit: usize,
        /// Whose bound: this Session's or this Computer's.
        scope: &'static str,
    },
    /// No background job of the caller has this id.
    #[error("no background job {job} of this Session")]
    NoSuchJob {
        /// As asked.
        job: JobId,
    },
    /// The program could not be started.
    #[error("could not start {program}: {detail}")]
    Spawn {
        /// The program.
        program: String,
        /// The system's words.
        detail: String,
    },
}

impl ExecError {
    fn invalid(reason: impl Into<String>) -> Self {
        Self::Invalid {
            reason: reason.into(),
        }
    }
}
