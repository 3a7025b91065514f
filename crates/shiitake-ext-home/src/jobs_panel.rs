//! What a person sees of a Session's background jobs and does to them: the footer rows
//! of the running ones (one a job, with a *Kill* action), `kill_job`, which that action
//! calls (`/kill <job> <computer>` in chat), and `list_jobs` (`/jobs`), every job the
//! Session recorded with where it is. They read the jobs the host runs now
//! (`LocalCommands::list_jobs`, a synchronous read); a job that ends shows gone from the
//! footer at the Session's next change.

#[cfg(unix)]
use knapsack::exec::JobId;
use serde_json::json;
use shiitake_core::extension::{HookError, StateScope, StateView, Tx};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::extension::ContractCommand;
use shiitake_protocol::footer::{FooterActionV0, FooterRowV0};

use crate::computers::{Attachment, Computers};
use crate::contract::{
    JobLine, JobList, JobState, KillJob, KillRequested, ListJobs, MAX_JOB_RECORDS, MAX_JOB_ROWS,
};
use crate::run_commands::{JOB_RECORDS, JobRecord};

/// The longest command a job line shows, in characters.
const COMMAND_CHARS: usize = 200;

/// The rows of the Session's running jobs on every attachment that runs commands.
#[cfg(unix)]
pub(crate) fn rows(
    state: &StateView<'_>,
    id: &ExtensionId,
    computers: &dyn Computers,
) -> Vec<FooterRowV0> {
    let Some(session) = state.session_id() else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for attachment in computers.read() {
        let Some(commands) = &attachment.commands else {
            continue;
        };
        let computer = attachment.name.as_str();
        for job in commands
            .list_jobs(session.as_str())
            .into_iter()
            .filter(|job| job.running)
        {
            let kill = FooterActionV0::command(
                "kill",
                "Kill",
                KillJob::NAME,
                json!({"job": job.job, "computer": computer}),
            );
            let command: String = job.command.chars().take(80).collect();
            rows.push(
                FooterRowV0::new(
                    id.clone(),
                    job.job.as_str(),
                    "job",
                    format!("{} on {computer}: {command}", job.job),
                )
                .with_note(format!("/kill {} {computer}", job.job))
                .with_action(kill),
            );
        }
    }
    rows.truncate(MAX_JOB_ROWS);
    rows
}

/// Without commands (not Unix) there are no jobs.
#[cfg(not(unix))]
pub(crate) fn rows(
    _state: &StateView<'_>,
    _id: &ExtensionId,
    _computers: &dyn Computers,
) -> Vec<FooterRowV0> {
    Vec::new()
}

/// Without commands (not Unix) there is no job to kill.
#[cfg(not(unix))]
pub(crate) fn kill(
    _tx: &mut Tx<'_>,
    _computers: &dyn Computers,
    KillJob { job, .. }: KillJob,
) -> Result<KillRequested, HookError> {
    Err(HookError::Invalid(format!(
        "no background job {job}: commands run on Unix only"
    )))
}

/// `kill_job`: asks the job to end; refused when the Session has no such job running.
#[cfg(unix)]
pub(crate) fn kill(
    tx: &mut Tx<'_>,
    computers: &dyn Computers,
    KillJob { job, computer }: KillJob,
) -> Result<KillRequested, HookError> {
    let session = tx
        .session_id()
        .ok_or_else(|| HookError::Invalid("kill_job is a Session's command".to_owned()))?
        .clone();
    let attachment = computers
        .read()
        .into_iter()
        .find(|attachment| attachment.name.as_str() == computer)
        .ok_or_else(|| HookError::Invalid(format!("no attached Computer is named `{computer}`")))?;
    let commands = attachment
        .commands
        .ok_or_else(|| HookError::Invalid(format!("the Computer `{computer}` runs no commands")))?;
    commands
        .request_kill(&JobId::new(job.clone()), session.as_str())
        .map_err(|error| HookError::Invalid(error.to_string()))?;
    Ok(KillRequested { job })
}

/// `list_jobs`: the jobs the Session recorded and those the host runs for it, newest
/// first (a kept job whose record is gone counts as the oldest); a recorded job no Computer keeps ended and was forgotten when this life of
/// the host started it, and is lost otherwise.
pub(crate) fn list(
    tx: &mut Tx<'_>,
    computers: &dyn Computers,
    ListJobs {}: ListJobs,
) -> Result<JobList, HookError> {
    let session = tx
        .session_id()
        .ok_or_else(|| HookError::Invalid("list_jobs is a Session's command".to_owned()))?
        .to_string();
    let records: Vec<(String, JobRecord)> = tx.scan(StateScope::Session, JOB_RECORDS)?;
    let attached = computers.read();
    let mut lines: Vec<(u64, JobLine)> = Vec::new();
    for line in attached
        .iter()
        .flat_map(|attachment| live_lines(attachment, &session))
    {
        let started_at = records
            .iter()
            .find(|(id, _)| *id == line.job)
            .map_or(0, |(_, record)| record.started_at);
        lines.push((started_at, line));
    }
    for (job, record) in records {
        if lines.iter().any(|(_, line)| line.job == job) {
            continue;
        }
        let state = if attached.iter().any(|attachment| {
            attachment.name.as_str() == record.computer && started_here(attachment, &job)
        }) {
            JobState::Forgotten
        } else {
            JobState::Lost
        };
        let line = JobLine {
            job,
            command: record.command.chars().take(COMMAND_CHARS).collect(),
            computer: record.computer,
            state,
            kill: None,
        };
        lines.push((record.started_at, line));
    }
    lines.sort_by(|(a, a_line), (b, b_line)| b.cmp(a).then_with(|| b_line.job.cmp(&a_line.job)));
    Ok(JobList {
        jobs: lines
            .into_iter()
            .map(|(_, line)| line)
            .take(MAX_JOB_RECORDS)
            .collect(),
    })
}

/// The jobs `attachment` keeps for `session`, as lines.
#[cfg(unix)]
fn live_lines(attachment: &Attachment, session: &str) -> Vec<JobLine> {
    use knapsack::exec::Exit;
    let Some(commands) = &attachment.commands else {
        return Vec::new();
    };
    let computer = attachment.name.as_str();
    commands
        .list_jobs(session)
        .into_iter()
        .map(|job| {
            let state = match job.exit {
                _ if job.running => JobState::Running,
                Some(Exit::Code(code)) => JobState::Exited { code },
                Some(Exit::Signal(signal)) => JobState::Signalled { signal },
                None => JobState::Forgotten,
            };
            JobLine {
                job: job.job.to_string(),
                computer: computer.to_owned(),
                command: job.command.chars().take(COMMAND_CHARS).collect(),
                state,
                kill: job.running.then(|| format!("/kill {} {computer}", job.job)),
            }
        })
        .collect()
}

/// Without commands (not Unix) no job runs.
#[cfg(not(unix))]
fn live_lines(_attachment: &Attachment, _session: &str) -> Vec<JobLine> {
    Vec::new()
}

/// Whether `attachment`'s commands started `job` in this life of the host.
#[cfg(unix)]
fn started_here(attachment: &Attachment, job: &str) -> bool {
    attachment
        .commands
        .as_ref()
        .is_some_and(|commands| commands.started_here(&JobId::new(job)))
}

/// Without commands (not Unix) no job was started here.
#[cfg(not(unix))]
fn started_here(_attachment: &Attachment, _job: &str) -> bool {
    false
}
