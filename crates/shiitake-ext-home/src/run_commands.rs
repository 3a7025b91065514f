//! What one run captured of the Computers that run commands: which ones, by name, whose
//! jobs it sees (its Session's), and the record of the jobs its Session started, so a job
//! the host no longer knows (it restarted, or another process took the Session over) is
//! listed as lost and reading or killing it says so.

use std::collections::BTreeMap;
use std::sync::Arc;

use knapsack::exec::{ExecError, JobId, JobSummary, LocalCommands};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_capabilities::{ForModelError, ForModelKind, ToolError};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{HookError, RunContext, StateScope};

use crate::computers::Attachment;
use crate::contract::MAX_JOB_RECORDS;
use crate::errors::{exec_error, failed};
use crate::route::{Target, route};
use crate::state::Entry;

/// The Session-scope collection of the jobs a Session started.
pub(crate) const JOB_RECORDS: &str = "jobs";

/// What a Session's state keeps of a job it started.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobRecord {
    pub(crate) computer: String,
    pub(crate) command: String,
    pub(crate) started_at: u64,
}

/// A job the Session started that the host no longer knows.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LostJob {
    pub(crate) computer: String,
    pub(crate) job: String,
    pub(crate) command: String,
    pub(crate) lost: bool,
    pub(crate) why: &'static str,
}

/// Why a recorded job is lost.
pub(crate) const LOST: &str = "the host that ran it stopped (a restart or a takeover): it was killed with \
                    it, and its output is gone";

/// The run's Computers that run commands, by name, and whose jobs it sees.
#[derive(Default)]
pub(crate) struct RunCommands {
    /// Records the Session's jobs in its state.
    tools: Option<ToolTx>,
    /// Jobs belong to the Session the run is of.
    pub(crate) owner: String,
    /// Home's name and commands, when Home runs commands.
    home: Option<(String, Arc<LocalCommands>)>,
    /// Every attachment that runs commands, Home's included.
    pub(crate) named: BTreeMap<String, Arc<LocalCommands>>,
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
    pub(crate) fn routed<'a>(
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
    pub(crate) async fn record(&self, computer: &str, job: &JobSummary) {
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
    pub(crate) async fn records(&self) -> BTreeMap<String, JobRecord> {
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

    /// The error for a job `commands` do not know: lost when the Session recorded it and
    /// an earlier life of the host started it.
    pub(crate) async fn unknown_job(
        &self,
        commands: &LocalCommands,
        error: ExecError,
    ) -> ToolError {
        if let ExecError::NoSuchJob { job } = &error
            && !commands.started_here(job)
            && self.records().await.contains_key(job.as_str())
        {
            return failed("lost_job", format!("background job {job}: {LOST}"));
        }
        exec_error(error)
    }

    /// Whether the Computer `computer` started `job` in this life of the host (a job
    /// it no longer keeps ended and was forgotten; one it did not start is lost).
    pub(crate) fn started_here(&self, computer: &str, job: &str) -> bool {
        self.named
            .get(computer)
            .is_some_and(|commands| commands.started_here(&JobId::new(job)))
    }

    /// The Computer a job tool names (`computer`, Home when absent).
    pub(crate) fn computer(
        &self,
        computer: Option<&str>,
    ) -> Result<(&str, &Arc<LocalCommands>), ToolError> {
        let address = computer.map_or_else(String::new, |name| format!("computer://{name}/"));
        let (name, commands, _) = self.routed(&address)?;
        Ok((name, commands))
    }
}
