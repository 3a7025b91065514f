//! The command tools one run captures, on the attachments whose host lets commands run
//! there (`Attachment::with_commands`): `commands.exec` runs a command (or starts a
//! background job) in the Computer its working directory names, and `jobs.output`,
//! `jobs.kill` and `jobs.list` follow the run's Session's jobs. Addresses route as the
//! file tools' do: a bare path or `computer://home/` is on Home, `computer://<name>/` on
//! another attachment. `exec` is unsafe to replay: after a crash its call is answered
//! "outcome unknown", never run again (docs/commands.md). Each background job a Session
//! starts is recorded in its state (`jobs`, at most [`MAX_JOB_RECORDS`]): a job that the
//! host no longer knows (it restarted, or another process took the Session over) is
//! listed as lost, and reading or killing it says so.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use knapsack::exec::{
    CommandLine, ExecError, ExecRequest, JobId, JobSummary, LocalCommands, OutputWatcher,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_capabilities::{
    ForModelError, ForModelKind, InvocationContext, Module, ModulePath, NameError, Progress,
    ProgressNote, Replay, ToolError,
};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{HookError, RunContext, StateScope};
use shiitake_protocol::TOOL_OUTPUT_BYTES;

use crate::computers::Attachment;
use crate::route::{Target, route};
use crate::state::Entry;
use crate::tools::{RunFiles, failed, tool, tool_with_context};

/// The module of `exec`.
pub(crate) const COMMANDS: &str = "commands";
/// The module of the background job tools.
pub(crate) const JOBS: &str = "jobs";

/// The Session-scope collection of the jobs a Session started.
const JOB_RECORDS: &str = "jobs";
/// The most jobs a Session's state remembers; the oldest record goes first.
pub(crate) const MAX_JOB_RECORDS: usize = 32;

/// What a Session's state keeps of a job it started.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobRecord {
    computer: String,
    command: String,
    started_at: u64,
}

/// A job the Session started that the host no longer knows.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LostJob {
    computer: String,
    job: String,
    command: String,
    lost: bool,
    why: &'static str,
}

/// Why a recorded job is lost.
const LOST: &str = "the host that ran it stopped (a restart or a takeover): it was killed with \
                    it, and its output is gone";

/// The run's Computers that run commands, by name, and whose jobs it sees.
#[derive(Default)]
pub(crate) struct RunCommands {
    /// Records the Session's jobs in its state.
    tools: Option<ToolTx>,
    /// Jobs belong to the Session the run is of.
    owner: String,
    /// Home's name and commands, when Home runs commands.
    home: Option<(String, Arc<LocalCommands>)>,
    /// Every attachment that runs commands, Home's included.
    named: BTreeMap<String, Arc<LocalCommands>>,
}

impl RunCommands {
    /// What the run captures of `table`, whose Home is `home`.
    pub(crate) fn capture(
        run: &RunContext<'_>,
        home: &Entry<Attachment>,
        table: &[Entry<Attachment>],
        tools: &ToolTx,
    ) -> Self {
        let named = table
            .iter()
            .filter_map(|entry| {
                let commands = entry.value.commands.clone()?;
                Some((entry.name.as_str().to_owned(), commands))
            })
            .collect();
        Self {
            tools: Some(tools.clone()),
            owner: run.session_id.to_string(),
            home: home
                .value
                .commands
                .clone()
                .map(|commands| (home.name.as_str().to_owned(), commands)),
            named,
        }
    }

    /// The Computer an address names and the path on it.
    fn routed<'a>(
        &self,
        address: &'a str,
    ) -> Result<(&str, &Arc<LocalCommands>, &'a str), ToolError> {
        let (target, path) =
            route(address).map_err(|e| failed("no_such_computer", e.to_string()))?;
        match target {
            Target::Home => match &self.home {
                Some((name, commands)) => Ok((name, commands, path)),
                None => Err(failed(
                    "no_commands",
                    "Home does not run commands; another attached Computer may \
                     (computer://<name>/)"
                        .to_owned(),
                )),
            },
            Target::Named(name) => self
                .named
                .get_key_value(name)
                .map(|(name, commands)| (name.as_str(), commands, path))
                .ok_or_else(|| {
                    let known: Vec<&str> = self.named.keys().map(String::as_str).collect();
                    ToolError::ForModel(
                        ForModelError::new(
                            ForModelKind::Failed,
                            format!("no Computer named `{name}` runs commands in this run"),
                        )
                        .with_details(json!({"kind": "no_commands", "known": known})),
                    )
                }),
        }
    }

    /// Records a job this Session started, forgetting the oldest past the bound.
    async fn record(&self, computer: &str, job: &JobSummary) {
        let Some(tools) = &self.tools else { return };
        let (key, record) = (
            job.job.to_string(),
            JobRecord {
                computer: computer.to_owned(),
                command: job.command.clone(),
                started_at: 0,
            },
        );
        let recorded = tools
            .run(move |tx| {
                let record = JobRecord {
                    started_at: tx.now(),
                    ..record
                };
                tx.put(StateScope::Session, JOB_RECORDS, &key, &record)?;
                let mut kept: Vec<(String, JobRecord)> =
                    tx.scan(StateScope::Session, JOB_RECORDS)?;
                kept.sort_by_key(|(key, record)| (record.started_at, key.clone()));
                let over = kept.len().saturating_sub(MAX_JOB_RECORDS);
                for (old, _) in kept.into_iter().take(over) {
                    tx.delete(StateScope::Session, JOB_RECORDS, &old)?;
                }
                Ok(Value::Null)
            })
            .await;
        if let Err(error) = recorded {
            tracing::warn!(%error, "a background job could not be recorded in its Session");
        }
    }

    /// The jobs this Session recorded, by id.
    async fn records(&self) -> BTreeMap<String, JobRecord> {
        let Some(tools) = &self.tools else {
            return BTreeMap::new();
        };
        let read = tools
            .run(|tx| {
                let records: Vec<(String, JobRecord)> =
                    tx.scan(StateScope::Session, JOB_RECORDS)?;
                serde_json::to_value(records).map_err(|error| HookError::Failed(error.to_string()))
            })
            .await;
        read.ok()
            .and_then(|value| serde_json::from_value::<Vec<(String, JobRecord)>>(value).ok())
            .map(|records| records.into_iter().collect())
            .unwrap_or_default()
    }

    /// The error for a job the host does not know: lost when the Session recorded it.
    async fn unknown_job(&self, error: ExecError) -> ToolError {
        if let ExecError::NoSuchJob { job } = &error
            && self.records().await.contains_key(job.as_str())
        {
            return failed("lost_job", format!("background job {job}: {LOST}"));
        }
        exec_error(error)
    }

    /// The Computer a job tool names (`computer`, Home when absent).
    fn computer(&self, computer: Option<&str>) -> Result<(&str, &Arc<LocalCommands>), ToolError> {
        let address = computer.map_or_else(String::new, |name| format!("computer://{name}/"));
        let (name, commands, _) = self.routed(&address)?;
        Ok((name, commands))
    }
}

/// `commands.exec`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExecInput {
    /// A shell line, run with `sh -c`. Give this or `argv`, not both.
    command: Option<String>,
    /// A program and its arguments, run as they are, without a shell.
    argv: Option<Vec<String>>,
    /// The working directory: a path on Home, or computer://<name>/<path> on another
    /// attached Computer; the Computer's root when absent.
    cwd: Option<String>,
    /// The time limit in seconds (the host's default when absent, at most its maximum).
    timeout_seconds: Option<u64>,
    /// Start it as a background job and answer at once with its id (servers, watchers,
    /// long builds); read it with jobs.output.
    background: Option<bool>,
}

/// `jobs.output`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OutputInput {
    /// The job's id, as exec answered it.
    job: String,
    /// The Computer the job runs on (Home when absent).
    computer: Option<String>,
    /// Where to read from: the `cursor` the last read answered; the start when absent.
    cursor: Option<u64>,
}

/// `jobs.kill`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KillInput {
    /// The job's id.
    job: String,
    /// The Computer the job runs on (Home when absent).
    computer: Option<String>,
}

/// `jobs.list`'s input: nothing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListInput {}

/// What a command or a job answers, with the Computer it ran on.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OnComputer<T: Serialize> {
    computer: String,
    #[serde(flatten)]
    result: T,
}

/// The run's `commands` and `jobs` modules; none when no attachment runs commands.
pub(crate) fn modules(run: &Arc<RunFiles>) -> Result<Vec<Module>, NameError> {
    if run.commands.named.is_empty() {
        return Ok(Vec::new());
    }
    let mut commands = Module::new(
        ModulePath::new(COMMANDS)?,
        "Commands on Home and the other attached Computers that run them.",
    );
    let exec = tool_with_context::<ExecInput, _, _>(
        run,
        "exec",
        "Runs one command in a Computer's root, in its sandbox: `command` (a shell line) or \
         `argv`; `cwd` a path on Home or computer://<name>/<path>. Answers the exit status \
         (or signal), the duration and both output streams (head and tail kept, with how \
         many bytes were cut), and whether the time limit stopped it. With `background`, \
         answers a job id at once (jobs.output reads it).",
        |run, input, context| async move { exec(&run, input, &context).await },
    )?
    .with_replay(Replay::Unsafe);
    commands.add_operation(exec)?;
    let mut jobs = Module::new(
        ModulePath::new(JOBS)?,
        "This Session's background jobs (commands.exec with background).",
    );
    jobs.add_operation(tool::<OutputInput, _, _>(
        run,
        "output",
        "Reads a background job's new output from `cursor` (both streams, as they came, at \
         most 64 KiB; continue from the cursor answered) and whether it still runs.",
        |run, input| async move {
            let (name, commands) = run.commands.computer(input.computer.as_deref())?;
            let job = JobId::new(input.job);
            let output = match commands.job_output(&job, &run.commands.owner, input.cursor) {
                Ok(output) => output,
                Err(error) => return Err(run.commands.unknown_job(error).await),
            };
            answer(name, output)
        },
    )?)?;
    jobs.add_operation(tool::<KillInput, _, _>(
        run,
        "kill",
        "Ends a background job and everything it started, and answers how it ended.",
        |run, input| async move {
            let (name, commands) = run.commands.computer(input.computer.as_deref())?;
            let job = JobId::new(input.job);
            let killed = match commands.kill_job(&job, &run.commands.owner).await {
                Ok(killed) => killed,
                Err(error) => return Err(run.commands.unknown_job(error).await),
            };
            answer(name, killed)
        },
    )?)?;
    jobs.add_operation(tool::<ListInput, _, _>(
        run,
        "list",
        "Lists this Session's background jobs on every attached Computer, and those a \
         host that stopped ran (lost).",
        |run, _input| async move {
            let listed: Vec<_> = run
                .commands
                .named
                .iter()
                .flat_map(|(name, commands)| {
                    commands
                        .list_jobs(&run.commands.owner)
                        .into_iter()
                        .map(|job| OnComputer {
                            computer: name.clone(),
                            result: job,
                        })
                })
                .collect();
            let lost: Vec<LostJob> = run
                .commands
                .records()
                .await
                .into_iter()
                .filter(|(job, _)| !listed.iter().any(|known| known.result.job.as_str() == job))
                .map(|(job, record)| LostJob {
                    computer: record.computer,
                    job,
                    command: record.command,
                    lost: true,
                    why: LOST,
                })
                .collect();
            serde_json::to_value(json!({ "jobs": listed, "lost": lost }))
                .map_err(|e| ToolError::fatal_from("a job listing did not serialise", e))
        },
    )?)?;
    Ok(vec![commands, jobs])
}

/// Runs (or starts) one command on the Computer its `cwd` names; a command run to its
/// end reports its latest output as the call's progress while it runs.
async fn exec(
    run: &RunFiles,
    input: ExecInput,
    context: &InvocationContext,
) -> Result<Value, ToolError> {
    let command = match (input.command, input.argv) {
        (Some(line), None) => CommandLine::Shell(line),
        (None, Some(argv)) => CommandLine::Argv(argv),
        (Some(_), Some(_)) => return Err(invalid("give `command` or `argv`, not both")),
        (None, None) => return Err(invalid("give `command` (a shell line) or `argv`")),
    };
    let address = input.cwd.unwrap_or_default();
    let (name, commands, path) = run.commands.routed(&address)?;
    let request = ExecRequest {
        command,
        cwd: (!path.is_empty()).then(|| path.to_owned()),
        timeout: input.timeout_seconds.map(Duration::from_secs),
    };
    if input.background == Some(true) {
        let started = commands
            .start_job(&request, &run.commands.owner)
            .map_err(exec_error)?;
        run.commands.record(name, &started).await;
        return answer(name, started);
    }
    // A cancel of the call drops this future: the command's group is killed with it.
    let watcher = context
        .progress()
        .is_wanted()
        .then(|| live_output(context.progress().clone()));
    let output = commands
        .exec_watched(
            &request,
            &tokio_util::sync::CancellationToken::new(),
            watcher,
        )
        .await
        .map_err(exec_error)?;
    answer(name, output)
}

/// The end of a command's output so far kept in a small ring and reported as the call's
/// progress with every piece (the runner forwards the latest, spaced).
fn live_output(progress: Progress) -> OutputWatcher {
    let tail = Mutex::new((VecDeque::<u8>::new(), 0u64));
    Arc::new(move |bytes: &[u8]| {
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        let (ring, total) = &mut *tail;
        ring.extend(bytes);
        let over = ring.len().saturating_sub(TOOL_OUTPUT_BYTES);
        ring.drain(..over);
        *total += bytes.len() as u64;
        progress.report(ProgressNote {
            text: String::from_utf8_lossy(ring.make_contiguous()).into_owned(),
            total_bytes: *total,
        });
    })
}

fn answer<T: Serialize>(computer: &str, result: T) -> Result<Value, ToolError> {
    serde_json::to_value(OnComputer {
        computer: computer.to_owned(),
        result,
    })
    .map_err(|e| ToolError::fatal_from("a command's result did not serialise", e))
}

fn invalid(message: &str) -> ToolError {
    ToolError::ForModel(ForModelError::new(
        ForModelKind::InvalidInput,
        message.to_owned(),
    ))
}

/// A command that could not run, as the model reads it.
fn exec_error(error: ExecError) -> ToolError {
    let kind = match &error {
        ExecError::Invalid { .. } => {
            return ToolError::ForModel(
                ForModelError::new(ForModelKind::InvalidInput, error.to_string())
                    .with_details(json!({"kind": "invalid_command"})),
            );
        }
        ExecError::OutsideRoot { .. } => "outside_root",
        ExecError::NotADirectory { .. } => "not_a_directory",
        ExecError::TooManyJobs { .. } => "too_many_jobs",
        ExecError::NoSuchJob { .. } => "no_such_job",
        ExecError::Spawn { .. } => "spawn_failed",
    };
    failed(kind, error.to_string())
}
