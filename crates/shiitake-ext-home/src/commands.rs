//! The command tools one run captures, on the attachments whose host lets commands run
//! there (`Attachment::with_commands`): `commands.exec` runs a command (or starts a
//! background job) in the Computer its working directory names, and `jobs.output`,
//! `jobs.kill` and `jobs.list` follow the run's Session's jobs. Addresses route as the
//! file tools' do: a bare path or `computer://home/` is on Home, `computer://<name>/` on
//! another attachment. `exec` is unsafe to replay: after a crash its call is answered
//! "outcome unknown", never run again (docs/commands.md). What a run captured of the
//! Computers, and the record of its Session's jobs, are `run_commands.rs`'s.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use knapsack::exec::{CommandLine, ExecRequest, JobId, OutputWatcher};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_capabilities::{
    CallFacts, ForModelError, ForModelKind, InvocationContext, Module, ModulePath, NameError,
    Progress, ProgressNote, Replay, ToolError,
};
use shiitake_protocol::TOOL_OUTPUT_BYTES;

use crate::errors::exec_error;
use crate::run_commands::{LOST, LostJob};
use crate::tools::{RunFiles, tool, tool_with_context};

/// The module of `exec`.
pub(crate) const COMMANDS: &str = "commands";
/// The module of the background job tools.
pub(crate) const JOBS: &str = "jobs";

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
    .with_replay(Replay::Unsafe)
    .with_call_facts({
        let run = run.clone();
        Arc::new(move |input: &Value| exec_facts(&run, input))
    });
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
                Err(error) => return Err(run.commands.unknown_job(commands, error).await),
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
                Err(error) => return Err(run.commands.unknown_job(commands, error).await),
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
                .filter(|(job, record)| {
                    !listed.iter().any(|known| known.result.job.as_str() == job)
                        && !run.commands.started_here(&record.computer, job)
                })
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

/// What a person deciding about an `exec` call is told besides the command: the Computer
/// it runs on, its working directory, and whether it runs in the sandbox and has the
/// network. Nothing when the call names no Computer that runs commands (it fails).
fn exec_facts(run: &RunFiles, input: &Value) -> CallFacts {
    let address = input.get("cwd").and_then(Value::as_str).unwrap_or_default();
    let Ok((name, commands, path)) = run.commands.routed(address) else {
        return CallFacts::new();
    };
    let cwd = if path.is_empty() {
        format!("computer://{name}/ (its root)")
    } else {
        format!("computer://{name}/{}", path.trim_start_matches('/'))
    };
    let (sandbox, network) = match commands.sandbox() {
        Some(sandbox) if sandbox.policy().network => ("on", "on"),
        Some(_) => ("on", "off"),
        None => ("off (unconfined)", "on (unconfined)"),
    };
    let mut facts = CallFacts::from([
        ("computer".to_owned(), name.to_owned()),
        ("cwd".to_owned(), cwd),
        ("sandbox".to_owned(), sandbox.to_owned()),
        ("network".to_owned(), network.to_owned()),
    ]);
    if input.get("background").and_then(Value::as_bool) == Some(true) {
        facts.insert(
            "background".to_owned(),
            "yes (a job that runs on)".to_owned(),
        );
    }
    facts
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
