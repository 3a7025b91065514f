//! Where one run stands now, read from the durable Session (never from this process's
//! memory): its phase and the messages it committed. `GetTask`, `CancelTask` and the
//! first event of a stream are this view; a stream then follows the run from the
//! last message the view holds.

use shiitake_protocol::{
    CommandId, Cursor, PageLimit, QueueState, ReadOptions, SessionApi, SessionMessage,
    SessionSnapshot, SessionTerminal, ShiitakeError,
};

use crate::delegate::{Ended, Needed, assistant_text};

/// Older pages read to find a run that is not in the latest one, at most (as a
/// follow does).
const MAX_PAGES_BACK: usize = 10;

/// Where a run stands.
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    /// Accepted, waiting for the Session's runs before it.
    Queued,
    /// Running.
    Running,
    /// Running, and waiting on a person.
    Needs(Needed),
    /// Ended.
    Ended(Ended),
}

/// One run as it stands.
#[derive(Clone, Debug, PartialEq)]
pub struct RunView {
    /// Where it stands.
    pub phase: Phase,
    /// The prompt's text while it waits to enter the conversation (then it is not
    /// yet one of `messages`).
    pub waiting_prompt: Option<String>,
    /// The run's committed messages within reach, oldest first.
    pub messages: Vec<SessionMessage>,
}

impl RunView {
    /// The sequence of the run's last message in the view: a stream that starts from
    /// this view reports only later ones.
    pub fn last_sequence(&self) -> Option<u64> {
        self.messages.last().map(|message| message.sequence)
    }
}

/// The largest page.
fn page(before: Option<Cursor>) -> ReadOptions {
    ReadOptions {
        limit: PageLimit::new(PageLimit::MAX).ok(),
        before,
        ..ReadOptions::default()
    }
}

fn of_run(messages: &[SessionMessage], command: &CommandId) -> Vec<SessionMessage> {
    messages
        .iter()
        .filter(|message| message.command_id.as_ref() == Some(command))
        .cloned()
        .collect()
}

/// The ending `terminal` gives a run whose messages are `messages`: its answer is its
/// last assistant text.
fn ended(terminal: &SessionTerminal, messages: &[SessionMessage]) -> Phase {
    let text = messages
        .iter()
        .rev()
        .find_map(|message| assistant_text(&message.value).filter(|text| !text.is_empty()))
        .unwrap_or_default();
    Phase::Ended(Ended {
        outcome: terminal.outcome,
        diagnostic: terminal.diagnostic.clone(),
        text,
    })
}

/// The ending of `command` among `terminals`, if there, for a run of `messages`.
fn ended_in(
    terminals: &[SessionTerminal],
    command: &CommandId,
    messages: &[SessionMessage],
) -> Option<Phase> {
    terminals
        .iter()
        .find(|terminal| terminal.command_id == *command)
        .map(|terminal| ended(terminal, messages))
}

/// Where `command` stands in `snapshot`, if the snapshot says.
fn standing(snapshot: &SessionSnapshot, command: &CommandId) -> Option<(Phase, Option<String>)> {
    match &snapshot.activity.queue {
        QueueState::Running { command_id } if command_id == command => {
            let phase = match Needed::in_slots(&snapshot.extensions) {
                Some(needed) => Phase::Needs(needed),
                None => Phase::Running,
            };
            return Some((phase, None));
        }
        QueueState::Queued { command_id } if command_id == command => {}
        _ => {
            snapshot
                .pending
                .prompts
                .iter()
                .find(|prompt| prompt.command_id == *command)?;
        }
    }
    let prompt = snapshot
        .pending
        .prompts
        .iter()
        .find(|prompt| prompt.command_id == *command)
        .map(|prompt| prompt.text.as_str().to_owned());
    Some((Phase::Queued, prompt))
}

/// Where `command` of `session` stands now. `not_found` when the Session is unknown,
/// or no page within reach holds the run.
pub async fn observe<S: SessionApi>(
    session: &S,
    command: &CommandId,
) -> Result<RunView, ShiitakeError> {
    let snapshot = session.read(page(None)).await?;
    let mut messages = of_run(&snapshot.messages, command);
    if let Some(phase) = ended_in(&snapshot.terminals, command, &messages) {
        return Ok(RunView {
            phase,
            waiting_prompt: None,
            messages,
        });
    }
    if let Some((phase, waiting_prompt)) = standing(&snapshot, command) {
        return Ok(RunView {
            phase,
            waiting_prompt,
            messages,
        });
    }
    // An older run: its ending is on a page before this one.
    let mut before = snapshot.oldest_cursor.clone().flatten();
    let mut more = snapshot.has_more;
    for _ in 0..MAX_PAGES_BACK {
        let (true, Some(cursor)) = (more, before.take()) else {
            break;
        };
        let older = session.read(page(Some(cursor))).await?;
        let mut earlier = of_run(&older.messages, command);
        earlier.append(&mut messages);
        messages = earlier;
        if let Some(phase) = ended_in(&older.terminals, command, &messages) {
            return Ok(RunView {
                phase,
                waiting_prompt: None,
                messages,
            });
        }
        more = older.has_more;
        before = older.oldest_cursor.flatten();
    }
    if snapshot.pending.has_more {
        // More prompts wait than the snapshot lists: it is one of them.
        return Ok(RunView {
            phase: Phase::Queued,
            waiting_prompt: None,
            messages,
        });
    }
    Err(ShiitakeError::not_found(format!(
        "no task {command} in this context"
    )))
}
