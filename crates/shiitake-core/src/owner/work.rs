//! The Session's work in this process: the run in progress, the transcript kept
//! for the next run, work found interrupted on load, who admitted each open
//! command, and how the latest work ended.

use std::collections::HashMap;

use shiitake_protocol::{CommandId, SessionInboxState, TerminalOutcome};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::extension::Provenance;
use crate::runner::Transcript;
use crate::store::{SessionHeader, StoredCommand, StoredEntry};

/// The run in progress.
pub(super) struct ActiveRun {
    /// The number the owner gave this run; its events carry it.
    pub(super) tag: super::request::RunTag,
    pub(super) command_id: CommandId,
    /// Steers that joined this run; they settle with it.
    pub(super) absorbed: Vec<CommandId>,
    pub(super) cancel: CancellationToken,
    pub(super) task: JoinHandle<()>,
    /// The tool calls (by id) this run has started: the owner knows, so after a pause
    /// for its store a call it never started is run, not answered "outcome unknown".
    pub(super) started_calls: Vec<String>,
}

/// Work found running when the Session was loaded, to resume or settle.
#[derive(Default)]
pub(super) struct Interrupted {
    /// Commands whose run was in progress.
    pub(super) runs: Vec<StoredCommand>,
    /// Steers those runs had absorbed: (the run, the steer).
    pub(super) absorbed: Vec<(CommandId, CommandId)>,
}

impl Interrupted {
    /// The steers `run_id` had absorbed.
    pub(super) fn absorbed_by(&self, run_id: &CommandId) -> Vec<CommandId> {
        self.absorbed
            .iter()
            .filter(|(run, _)| run == run_id)
            .map(|(_, steer)| steer.clone())
            .collect()
    }
}

/// What runs in this process, what the next run starts from, and how work ended.
pub(super) struct Work {
    run: Option<ActiveRun>,
    /// The transcript the last run ended with (empty for a Session with no lineage),
    /// handed to the next run so a turn does not read the whole lineage again;
    /// dropped with the owner when it idles.
    kept_transcript: Option<Transcript>,
    interrupted: Interrupted,
    /// Who admitted each open command, when an extension or another Agent did.
    origins: HashMap<CommandId, Provenance>,
    /// The outcome of the latest settled work, for the inbox state.
    last_outcome: Option<TerminalOutcome>,
}

impl Work {
    /// No run yet, for a Session loaded with `header`.
    pub(super) fn new(header: &SessionHeader) -> Self {
        let last_outcome = match header.inbox_state {
            SessionInboxState::Errored => Some(TerminalOutcome::Failed),
            _ => None,
        };
        // A Session with no lineage yet has nothing to read back: its first run starts
        // from what the owner commits.
        let kept_transcript = header.leaf.is_none().then(Transcript::default);
        Self {
            run: None,
            kept_transcript,
            interrupted: Interrupted::default(),
            origins: HashMap::new(),
            last_outcome,
        }
    }

    /// The run in progress.
    pub(super) fn run(&self) -> Option<&ActiveRun> {
        self.run.as_ref()
    }

    /// Whether `tag` names the run in progress (else its events are stale).
    pub(super) fn is_current(&self, tag: super::request::RunTag) -> bool {
        self.run.as_ref().is_some_and(|run| run.tag == tag)
    }

    /// Whether a run is in progress.
    pub(super) fn running(&self) -> bool {
        self.run.is_some()
    }

    /// The command of the run in progress.
    pub(super) fn run_id(&self) -> Option<CommandId> {
        self.run.as_ref().map(|run| run.command_id.clone())
    }

    /// Whether `command_id` is the run in progress or a steer it absorbed.
    pub(super) fn in_run(&self, command_id: &CommandId) -> bool {
        self.run
            .as_ref()
            .is_some_and(|run| &run.command_id == command_id || run.absorbed.contains(command_id))
    }

    pub(super) fn start(&mut self, run: ActiveRun) {
        self.run = Some(run);
    }

    /// Steers that entered the run in progress; they settle with it.
    pub(super) fn absorb(&mut self, steers: impl IntoIterator<Item = CommandId>) {
        if let Some(run) = &mut self.run {
            run.absorbed.extend(steers);
        }
    }

    /// The run that just finished, now no longer in progress.
    pub(super) fn finish(&mut self) -> Option<ActiveRun> {
        self.run.take()
    }

    /// Asks the run in progress to stop; `false` when there is none.
    pub(super) fn cancel(&self) -> bool {
        match &self.run {
            Some(run) => {
                run.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Stops the runner without settling it: recovery resumes the work on the next
    /// open. Returns the run's command when a cancel had been asked of it, so work
    /// that resumes in this process can still end cancelled.
    /// Notes that the run in progress starts the tool call `call_id`.
    pub(super) fn note_started(&mut self, call_id: String) {
        if let Some(run) = &mut self.run {
            run.started_calls.push(call_id);
        }
    }

    /// The run in progress and the tool calls it started, if any.
    pub(super) fn started_calls(&self) -> Option<(CommandId, Vec<String>)> {
        self.run
            .as_ref()
            .map(|run| (run.command_id.clone(), run.started_calls.clone()))
    }

    pub(super) fn stop_without_terminal(&mut self) -> Option<CommandId> {
        let run = self.run.take()?;
        run.task.abort();
        run.cancel.is_cancelled().then_some(run.command_id)
    }

    /// On load: a command that was running when the process stopped.
    pub(super) fn note_interrupted(&mut self, command: StoredCommand) {
        match command.run_id.clone() {
            Some(run_id) => self.interrupted.absorbed.push((run_id, command.id)),
            None => self.interrupted.runs.push(command),
        }
    }

    /// The work found interrupted on load, once.
    pub(super) fn take_interrupted(&mut self) -> Interrupted {
        std::mem::take(&mut self.interrupted)
    }

    /// The transcript for the run about to start, if one was kept.
    pub(super) fn take_transcript(&mut self) -> Option<Transcript> {
        self.kept_transcript.take()
    }

    /// Keeps the transcript a finished run handed back.
    pub(super) fn keep_transcript(&mut self, transcript: Option<Transcript>) {
        self.kept_transcript = transcript;
    }

    /// Appends committed entries to the kept transcript when they continue it, so
    /// the next run reads nothing back; anything else (a branch, a line that does not
    /// follow its end) drops it, and the run reads the lineage.
    pub(super) fn extend_transcript(&mut self, entries: &[StoredEntry]) {
        for entry in entries {
            let Some(kept) = &mut self.kept_transcript else {
                return;
            };
            if kept.last_id() == entry.parent.as_ref() {
                kept.push(entry.id.clone(), entry.message.clone());
            } else {
                self.kept_transcript = None;
            }
        }
    }

    /// Remembers who admitted an open command.
    pub(super) fn note_origin(&mut self, command_id: &CommandId, provenance: &Provenance) {
        if !provenance.is_empty() {
            self.origins.insert(command_id.clone(), provenance.clone());
        }
    }

    /// Who admitted an open command; empty for a person's or program's own.
    pub(super) fn provenance_of(&self, command_id: &CommandId) -> Provenance {
        self.origins.get(command_id).cloned().unwrap_or_default()
    }

    /// Forgets the origins of commands that settled.
    pub(super) fn forget_origins<'a>(&mut self, settled: impl IntoIterator<Item = &'a CommandId>) {
        for id in settled {
            self.origins.remove(id);
        }
    }

    /// How the latest work ended.
    pub(super) fn last_outcome(&self) -> Option<TerminalOutcome> {
        self.last_outcome
    }

    /// Records how work ended; returns the outcome before, to put back if the
    /// settle is not committed.
    pub(super) fn set_last_outcome(
        &mut self,
        outcome: Option<TerminalOutcome>,
    ) -> Option<TerminalOutcome> {
        std::mem::replace(&mut self.last_outcome, outcome)
    }
}
