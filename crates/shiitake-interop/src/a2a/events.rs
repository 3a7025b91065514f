//! A task's events, from where a view of it stands to where it stops: the task as
//! the view shows it, then a `WORKING` update for each answer in words the run
//! commits after the view (one when the run starts, too), then, at its end, the
//! answer as an artifact and the final state (`COMPLETED`, `FAILED`, `CANCELED`), or
//! `INPUT_REQUIRED` with the question. The events come from the durable Session
//! ([`Delegate::follow`]): nothing the view holds is sent again, nothing after it is
//! missed, after a restart as before.

use shiitake_protocol::{AgentApi, SessionMessage, TerminalOutcome};
use tokio::sync::mpsc::UnboundedSender;

use super::error::A2aError;
use super::state::{Phase, RunView};
use super::task::{answer_artifact, history_message, now, status, task};
use super::task_id::TaskId;
use super::wire::{
    Role, StreamResponse, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use crate::delegate::{Delegate, Waited};

/// One thing a stream sends.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// An event.
    Event(Box<StreamResponse>),
    /// A failure; the stream ends after it.
    Failed(A2aError),
}

/// A status update of `task`.
fn update(task: &TaskId, status: TaskStatus) -> Item {
    Item::Event(Box::new(StreamResponse::StatusUpdate(
        TaskStatusUpdateEvent {
            task_id: task.encode(),
            context_id: task.session.to_string(),
            status,
        },
    )))
}

/// What a follow of a task sends for each message its run commits after `after`.
struct Progress<'a> {
    task: &'a TaskId,
    /// The last sequence the stream's first event held.
    after: Option<u64>,
    /// Whether the client has been told the task works.
    working: bool,
    events: &'a UnboundedSender<Item>,
}

impl Progress<'_> {
    /// The update `message` makes, if any: its words as the agent's, or the news that
    /// the run started.
    fn seen(&mut self, message: &SessionMessage) {
        if self.after.is_some_and(|after| message.sequence <= after) {
            return;
        }
        let said = history_message(self.task, message).filter(|said| said.role == Role::Agent);
        if said.is_none() && self.working {
            return;
        }
        self.working = true;
        let status = TaskStatus {
            state: TaskState::Working,
            message: said,
            timestamp: Some(now()),
        };
        // A closed receiver ends the follow (see `stream`).
        let _ = self.events.send(update(self.task, status));
    }
}

/// Sends the events of `task` from `view` on `events` until the task ends, waits for
/// input, or the receiver goes.
pub async fn stream<A>(
    delegate: Delegate<A>,
    task_id: TaskId,
    view: RunView,
    events: UnboundedSender<Item>,
) where
    A: AgentApi + 'static,
{
    let first = task(&task_id, &view, None);
    let state = first.status.state;
    if events
        .send(Item::Event(Box::new(StreamResponse::Task(first))))
        .is_err()
        || state.ends_stream()
    {
        return;
    }
    let mut progress = Progress {
        task: &task_id,
        after: view.last_sequence(),
        working: state == TaskState::Working,
        events: &events,
    };
    let waited = tokio::select! {
        waited = delegate.follow(&task_id.session, &task_id.command, |message| progress.seen(message)) => waited,
        () = events.closed() => return,
    };
    let phase = match waited {
        Ok(Waited::Ended(ended)) => Phase::Ended(ended),
        Ok(Waited::Needs(needed)) => Phase::Needs(needed),
        Err(error) => {
            let _ = events.send(Item::Failed(A2aError::from_task(error)));
            return;
        }
    };
    if let Phase::Ended(ended) = &phase
        && ended.outcome == TerminalOutcome::Completed
        && !ended.text.is_empty()
    {
        let artifact = TaskArtifactUpdateEvent {
            task_id: task_id.encode(),
            context_id: task_id.session.to_string(),
            artifact: answer_artifact(&task_id, &ended.text),
            append: false,
            last_chunk: true,
        };
        let _ = events.send(Item::Event(Box::new(StreamResponse::ArtifactUpdate(
            artifact,
        ))));
    }
    let _ = events.send(update(&task_id, status(&task_id, &phase)));
}
