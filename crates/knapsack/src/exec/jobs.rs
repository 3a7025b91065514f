//! Background jobs: commands that go on after the call that started them (servers,
//! watchers, long builds). Each job's output (both streams, as they come) is kept in a
//! bounded ring read from a cursor; its owner (a Session) reads, lists and kills its own
//! jobs only. The table is bounded per Computer and per owner; a finished job stays
//! listed until a new job needs its place.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use super::spawned::Spawned;
use super::{CommandLimits, CommandLine, ExecError, Exit, Stopped};

/// A background job's id: `job-<host>-<n>`, where `<host>` is drawn at random when the
/// Computer's commands are made, so an id never names a job of an earlier life of the
/// host (after a restart, an old id is another job's, or none).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct JobId(String);

impl JobId {
    /// The id as the model writes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads an id as given; whether such a job exists is the table's to say.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }
}

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A job as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    /// Its id.
    pub job: JobId,
    /// What it runs, as asked (a shell line, or the argv joined by spaces).
    pub command: String,
    /// Whether it still runs.
    pub running: bool,
    /// How it ended, once it has.
    pub exit: Option<Exit>,
    /// Why the host stopped it, when it did.
    pub stopped: Option<Stopped>,
    /// Bytes of output it wrote so far (both streams).
    pub output_bytes: u64,
}

/// New output of a job, from a cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobOutput {
    /// The job and its state now.
    #[serde(flatten)]
    pub summary: JobSummary,
    /// Output from the cursor on (lossy UTF-8), at most the Computer's output bound.
    pub output: String,
    /// Bytes between the cursor asked and what the ring still held, no longer kept.
    pub skipped_bytes: u64,
    /// Where the next read goes on from.
    pub cursor: u64,
}

/// The bounds of a Computer's background jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// Jobs a Computer keeps at once (running or finished, all owners).
    pub per_computer: usize,
    /// Jobs one owner keeps at once.
    pub per_owner: usize,
    /// Output bytes kept per job (the latest ones).
    pub ring_bytes: usize,
}

impl Default for JobLimits {
    fn default() -> Self {
        Self {
            per_computer: 16,
            per_owner: 8,
            ring_bytes: 1 << 20,
        }
    }
}

/// The jobs of one Computer.
#[derive(Debug)]
pub(crate) struct JobTable {
    /// This life of the host, in every id.
    instance: String,
    next: u64,
    jobs: BTreeMap<u64, Job>,
}

impl Default for JobTable {
    fn default() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self {
            instance: format!("{:06x}", random & 0xff_ffff),
            next: 0,
            jobs: BTreeMap::new(),
        }
    }
}

#[derive(Debug)]
struct Job {
    id: JobId,
    owner: String,
    command: String,
    state: Arc<Mutex<JobState>>,
    cancel: CancellationToken,
    done: tokio::sync::watch::Receiver<bool>,
}

#[derive(Debug)]
struct JobState {
    ring: VecDeque<u8>,
    /// The absolute offset of `ring[0]`.
    start: u64,
    limit: usize,
    exit: Option<Exit>,
    stopped: Option<Stopped>,
    running: bool,
}

impl JobState {
    fn push(&mut self, bytes: &[u8]) {
        self.ring.extend(bytes);
        let over = self.ring.len().saturating_sub(self.limit);
        if over > 0 {
            self.ring.drain(..over);
            self.start += over as u64;
        }
    }

    fn end(&self) -> u64 {
        self.start + self.ring.len() as u64
    }
}

impl Job {
    fn summary(&self) -> JobSummary {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        JobSummary {
            job: self.id.clone(),
            command: self.command.clone(),
            running: state.running,
            exit: state.exit,
            stopped: state.stopped,
            output_bytes: state.end(),
        }
    }
}

/// A Computer's background jobs: the table and the bounds they are kept within.
#[derive(Debug)]
pub(crate) struct Jobs {
    table: Mutex<JobTable>,
    limits: JobLimits,
    /// The most bytes one read of a job's output answers.
    read_bytes: usize,
    /// How long a killed job may take to end before `kill` answers anyway.
    kill_wait: Duration,
}

impl Jobs {
    /// No jobs yet, within the bounds of `limits`.
    pub(crate) fn new(limits: &CommandLimits) -> Self {
        Self {
            table: Mutex::new(JobTable::default()),
            limits: limits.jobs,
            read_bytes: limits.output_bytes,
            kill_wait: limits.kill_grace + Duration::from_secs(2),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, JobTable> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `job` was started in this life of the host (whether or not it is still
    /// kept): an id of an earlier life names a job that died with that host. Ids carry
    /// 24 random bits a life, so two lives share them once in about 16 million.
    pub(crate) fn of_this_life(&self, job: &JobId) -> bool {
        let table = self.table();
        job.as_str()
            .strip_prefix("job-")
            .and_then(|rest| rest.strip_prefix(table.instance.as_str()))
            .is_some_and(|rest| rest.starts_with('-'))
    }

    /// Starts a job of `owner` running `command` for at most `timeout`, once there is
    /// room for it, with what `spawn` starts.
    pub(crate) fn start(
        &self,
        command: &CommandLine,
        owner: &str,
        timeout: Duration,
        spawn: impl FnOnce() -> Result<Spawned, ExecError>,
    ) -> Result<JobSummary, ExecError> {
        let limits = self.limits;
        let mut table = self.table();
        make_room(&mut table, owner, limits)?;
        let mut spawned = spawn()?;
        table.next += 1;
        let number = table.next;
        let state = Arc::new(Mutex::new(JobState {
            ring: VecDeque::new(),
            start: 0,
            limit: limits.ring_bytes,
            exit: None,
            stopped: None,
            running: true,
        }));
        let cancel = CancellationToken::new();
        let (done_tx, done) = tokio::sync::watch::channel(false);
        let readers = [
            read_into(spawned.child.stdout.take(), state.clone()),
            read_into(spawned.child.stderr.take(), state.clone()),
        ];
        let (task_state, task_cancel) = (state.clone(), cancel.clone());
        tokio::spawn(async move {
            let ended = spawned.wait(timeout, &task_cancel).await;
            for reader in readers.into_iter().flatten() {
                if tokio::time::timeout(Duration::from_millis(500), reader)
                    .await
                    .is_err()
                {
                    tracing::trace!("a job's output stayed open after it ended");
                }
            }
            let mut state = task_state.lock().unwrap_or_else(PoisonError::into_inner);
            state.running = false;
            match ended {
                Ok((exit, stopped, _)) => {
                    state.exit = Some(exit);
                    state.stopped = stopped;
                }
                Err(error) => state.push(format!("\n[{error}]\n").as_bytes()),
            }
            drop(state);
            let _ = done_tx.send(true);
        });
        let job = Job {
            id: JobId(format!("job-{}-{number}", table.instance)),
            owner: owner.to_owned(),
            command: shown(command),
            state,
            cancel,
            done,
        };
        let summary = job.summary();
        table.jobs.insert(number, job);
        Ok(summary)
    }

    /// New output of `owner`'s job `job` from `cursor` (the start when absent).
    pub(crate) fn output(
        &self,
        job: &JobId,
        owner: &str,
        cursor: Option<u64>,
    ) -> Result<JobOutput, ExecError> {
        let table = self.table();
        let found = find(&table, job, owner)?;
        let summary = found.summary();
        let state = found.state.lock().unwrap_or_else(PoisonError::into_inner);
        let asked = cursor.unwrap_or(0).min(state.end());
        let from = asked.max(state.start);
        let offset = usize::try_from(from - state.start).unwrap_or(usize::MAX);
        let bytes: Vec<u8> = state
            .ring
            .iter()
            .skip(offset)
            .take(self.read_bytes)
            .copied()
            .collect();
        let next = from + bytes.len() as u64;
        Ok(JobOutput {
            summary,
            output: String::from_utf8_lossy(&bytes).into_owned(),
            skipped_bytes: from - asked,
            cursor: next,
        })
    }

    /// Ends `owner`'s job `job` and answers its state once it ended.
    pub(crate) async fn kill(&self, job: &JobId, owner: &str) -> Result<JobSummary, ExecError> {
        let (cancel, mut done) = {
            let table = self.table();
            let found = find(&table, job, owner)?;
            (found.cancel.clone(), found.done.clone())
        };
        cancel.cancel();
        if tokio::time::timeout(self.kill_wait, done.wait_for(|done| *done))
            .await
            .is_err()
        {
            tracing::warn!(%job, "a killed job did not end in time");
        }
        let table = self.table();
        Ok(find(&table, job, owner)?.summary())
    }

    /// Asks `owner`'s job `job` to end without waiting for it.
    pub(crate) fn request_kill(&self, job: &JobId, owner: &str) -> Result<(), ExecError> {
        find(&self.table(), job, owner)?.cancel.cancel();
        Ok(())
    }

    /// `owner`'s jobs, oldest first.
    pub(crate) fn list(&self, owner: &str) -> Vec<JobSummary> {
        self.table()
            .jobs
            .values()
            .filter(|job| job.owner == owner)
            .map(Job::summary)
            .collect()
    }
}

/// Makes room for one more job of `owner`: the oldest finished job goes when a bound is
/// reached; refused when every job in the way still runs.
fn make_room(table: &mut JobTable, owner: &str, limits: JobLimits) -> Result<(), ExecError> {
    let owned = |table: &JobTable| table.jobs.values().filter(|j| j.owner == owner).count();
    while owned(table) >= limits.per_owner {
        let finished = table
            .jobs
            .iter()
            .find(|(_, job)| job.owner == owner && !job.summary().running)
            .map(|(number, _)| *number);
        let Some(number) = finished else {
            return Err(ExecError::TooManyJobs {
                limit: limits.per_owner,
                scope: "this Session",
            });
        };
        table.jobs.remove(&number);
    }
    while table.jobs.len() >= limits.per_computer {
        let finished = table
            .jobs
            .iter()
            .find(|(_, job)| !job.summary().running)
            .map(|(number, _)| *number);
        let Some(number) = finished else {
            return Err(ExecError::TooManyJobs {
                limit: limits.per_computer,
                scope: "this Computer",
            });
        };
        table.jobs.remove(&number);
    }
    Ok(())
}

fn find<'a>(table: &'a JobTable, job: &JobId, owner: &str) -> Result<&'a Job, ExecError> {
    table
        .jobs
        .values()
        .find(|found| &found.id == job && found.owner == owner)
        .ok_or_else(|| ExecError::NoSuchJob { job: job.clone() })
}

/// How a command is shown in a listing.
fn shown(command: &CommandLine) -> String {
    match command {
        CommandLine::Shell(line) => line.clone(),
        CommandLine::Argv(argv) => argv.join(" "),
    }
}

/// Reads one stream into the job's ring until it ends.
fn read_into(
    stream: Option<impl AsyncRead + Unpin + Send + 'static>,
    state: Arc<Mutex<JobState>>,
) -> Option<tokio::task::JoinHandle<()>> {
    stream.map(|mut stream| {
        tokio::spawn(async move {
            let mut buffer = vec![0u8; 16 * 1024];
            loop {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(read) => state
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(&buffer[..read]),
                }
            }
        })
    })
}
