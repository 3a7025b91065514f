//! What subscribers see of a Session beyond its committed rows: the channel its
//! frames go out on, and the activity and progress of its work in this process
//! (never stored).

use shiitake_protocol::{
    CommandId, QueueState, RetryState, SessionActivity, SessionProgress, StorageWait,
};
use tokio::sync::broadcast;

use super::request::Published;
use crate::inbox::WorkPhase;

/// Frames a slow subscriber may fall behind by before it is sent a reset.
pub(crate) const PUBLISH_BUFFER: usize = 1024;

/// The publication channel, created with the first subscriber, and the live view
/// of the work that every frame carries.
pub(super) struct Publication {
    /// Created with the first subscriber and let go after the last
    /// ([`release_unwatched`](Self::release_unwatched)), so an owner nobody watches
    /// costs no buffer.
    publisher: Option<broadcast::Sender<Published>>,
    activity: SessionActivity,
    progress: Option<SessionProgress>,
}

impl Publication {
    pub(super) fn new() -> Self {
        Self {
            publisher: None,
            activity: SessionActivity::default(),
            progress: None,
        }
    }

    /// Whether anyone receives published frames.
    pub(super) fn watched(&self) -> bool {
        self.publisher
            .as_ref()
            .is_some_and(|publisher| publisher.receiver_count() > 0)
    }

    /// A receiver of every frame published from now on.
    pub(super) fn receiver(&mut self) -> broadcast::Receiver<Published> {
        match &self.publisher {
            Some(publisher) => publisher.subscribe(),
            None => {
                let (publisher, receiver) = broadcast::channel(PUBLISH_BUFFER);
                self.publisher = Some(publisher);
                receiver
            }
        }
    }

    /// Lets the channel go once its last receiver has: its buffer (1,024 slots, about
    /// 48 KB, and the frames still in them) is not held by an owner nobody watches, and
    /// the next subscriber makes a fresh one. Nothing is lost, since a frame sent with
    /// no receiver is dropped anyway.
    pub(super) fn release_unwatched(&mut self) {
        if self
            .publisher
            .as_ref()
            .is_some_and(|publisher| publisher.receiver_count() == 0)
        {
            self.publisher = None;
        }
    }

    /// Sends a frame to every subscriber; nobody listening is no failure.
    pub(super) fn publish(&self, published: Published) {
        if let Some(publisher) = &self.publisher
            && publisher.send(published).is_err()
        {
            tracing::trace!("published with no subscriber");
        }
    }

    /// What the Session is doing, as frames and snapshots carry it.
    pub(super) fn activity(&self) -> &SessionActivity {
        &self.activity
    }

    /// The streaming progress of the model call in flight, if any.
    pub(super) fn progress(&self) -> Option<&SessionProgress> {
        self.progress.as_ref()
    }

    /// Sets the queue state from what runs and what runs next; without a run, the
    /// run's own activity (a cancel asked, a retry, a tool) is cleared.
    pub(super) fn refresh(&mut self, running: Option<&CommandId>, next: Option<&CommandId>) {
        self.activity.queue = match (running, next) {
            (Some(running), _) => QueueState::Running {
                command_id: running.clone(),
            },
            (None, Some(next)) => QueueState::Queued {
                command_id: next.clone(),
            },
            (None, None) => QueueState::Idle,
        };
        if running.is_none() {
            self.activity.cancellation_requested = false;
            self.activity.retry = None;
            self.activity.active_tool = None;
            self.activity.tool_output = None;
        }
    }

    /// The phase of the work for the inbox state, given whether a run is in
    /// progress and whether prompts wait.
    pub(super) fn phase(&self, running: bool, queued: bool) -> WorkPhase {
        match (running, queued) {
            (true, _) if self.activity.cancellation_requested => WorkPhase::Cancelling,
            (true, _) if self.activity.retry.is_some() => WorkPhase::Retrying,
            (true, _) if self.progress.is_some() => WorkPhase::Streaming,
            (true, _) => WorkPhase::Thinking,
            (false, true) => WorkPhase::Queued,
            (false, false) => WorkPhase::Idle,
        }
    }

    /// A cancel of the running work was asked for.
    pub(super) fn cancellation_requested(&mut self) {
        self.activity.cancellation_requested = true;
    }

    /// The runner retries a model call (or stopped retrying).
    pub(super) fn set_retry(&mut self, retry: Option<RetryState>) {
        self.activity.retry = retry;
    }

    /// A tool started (`Some`) or the one running finished (`None`).
    pub(super) fn set_active_tool(&mut self, tool: Option<String>) {
        // A tool's output is shown while it runs: a new tool, or none, ends it.
        self.activity.tool_output = None;
        self.activity.active_tool = tool;
    }

    /// The running tool's latest output (`None` once it ended).
    pub(super) fn set_tool_output(&mut self, output: Option<shiitake_protocol::ToolOutput>) {
        self.activity.tool_output = output;
    }

    /// The work waits for the store (`Some`), or goes on (`None`).
    pub(super) fn set_storage_wait(&mut self, wait: Option<StorageWait>) {
        self.activity.storage_wait = wait;
    }

    /// A run starts: no model choice of it is committed yet.
    pub(super) fn run_started(&mut self) {
        self.activity.last_model_choice_sequence = None;
    }

    /// The model's message committed at `sequence` ends its streaming.
    pub(super) fn model_chose(&mut self, sequence: u64) {
        self.activity.last_model_choice_sequence = Some(sequence);
        self.progress = None;
    }

    /// Streaming progress of the model call in flight.
    pub(super) fn set_progress(&mut self, progress: Option<SessionProgress>) {
        self.progress = progress;
    }
}
