//! The footer rows of a Session's running background jobs (one a job, with a *Kill*
//! action), and `kill_job`, which that action calls (`/kill <job> <computer>` in chat).
//! Both read the jobs the host runs now (`LocalCommands::list_jobs`, a synchronous
//! read); a job that ends shows gone at the Session's next change.

#[cfg(unix)]
use knapsack::exec::JobId;
use serde_json::json;
use shiitake_core::extension::{HookError, StateView, Tx};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::extension::ContractCommand;
use shiitake_protocol::footer::{FooterActionV0, FooterRowV0};

use crate::computers::Computers;
use crate::contract::{KillJob, KillRequested};

/// The most job rows a footer shows.
const MAX_ROWS: usize = 8;

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
    rows.truncate(MAX_ROWS);
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
