//! Following one run through a Session's watch: the baseline first (the run may have
//! ended, or wait on a person, before anyone follows it), then its changes. Nothing
//! here is kept between calls: every follow starts from the durable Session.

use futures::StreamExt;
use shiitake_protocol::{
    CommandId, Cursor, PageLimit, QueueState, ReadOptions, SessionApi, SessionFrame,
    SessionMessage, SessionSnapshot, SessionTerminal, ShiitakeError,
};

use super::text::assistant_text;
use super::{Ended, Needed, Waited};

/// Older pages read to find a run that is not in the baseline, at most.
const MAX_PAGES_BACK: usize = 10;

/// The largest page: a run's recent messages come with its baseline.
fn page() -> ReadOptions {
    ReadOptions {
        limit: PageLimit::new(PageLimit::MAX).ok(),
        ..ReadOptions::default()
    }
}

/// What a follow has seen of its run so far.
struct Run<'a, F> {
    command: &'a CommandId,
    /// The sequence of the last message handed to `seen`.
    last: Option<u64>,
    /// The run's latest answer in words.
    answer: String,
    seen: F,
}

impl<F: FnMut(&SessionMessage)> Run<'_, F> {
    /// Hands the run's messages of `messages` not handed yet to `seen`.
    fn take(&mut self, messages: &[SessionMessage]) {
        for message in messages {
            if message.command_id.as_ref() != Some(self.command)
                || self.last.is_some_and(|last| message.sequence <= last)
            {
                continue;
            }
            self.last = Some(message.sequence);
            if let Some(text) = assistant_text(&message.value).filter(|text| !text.is_empty()) {
                self.answer = text;
            }
            (self.seen)(message);
        }
    }

    /// The run's ending among `terminals`, if there.
    fn ended(&self, terminals: &[SessionTerminal]) -> Option<Waited> {
        terminals
            .iter()
            .find(|terminal| terminal.command_id == *self.command)
            .map(|terminal| {
                Waited::Ended(Ended {
                    outcome: terminal.outcome,
                    diagnostic: terminal.diagnostic.clone(),
                    text: self.answer.clone(),
                })
            })
    }
}

/// Where a run stands in a baseline that does not hold its ending.
enum Standing {
    Running,
    Waiting,
    NotHere,
}

fn standing(snapshot: &SessionSnapshot, command: &CommandId) -> Standing {
    match &snapshot.activity.queue {
        QueueState::Running { command_id } if command_id == command => return Standing::Running,
        QueueState::Queued { command_id } if command_id == command => return Standing::Waiting,
        _ => {}
    }
    let pending = &snapshot.pending;
    if pending.has_more || pending.prompts.iter().any(|p| p.command_id == *command) {
        return Standing::Waiting;
    }
    Standing::NotHere
}

fn running(queue: &QueueState, command: &CommandId) -> bool {
    matches!(queue, QueueState::Running { command_id } if command_id == command)
}

/// Follows `command` until it ends or waits on a person.
pub(crate) async fn follow<S: SessionApi>(
    session: &S,
    command: &CommandId,
    seen: impl FnMut(&SessionMessage),
) -> Result<Waited, ShiitakeError> {
    let mut run = Run {
        command,
        last: None,
        answer: String::new(),
        seen,
    };
    // Each turn of this loop starts from a fresh baseline (after a reset frame).
    loop {
        let watch = session.watch(page()).await?;
        let snapshot = watch.snapshot;
        run.take(&snapshot.messages);
        if let Some(ended) = run.ended(&snapshot.terminals) {
            return Ok(ended);
        }
        match standing(&snapshot, command) {
            Standing::Running => {
                if let Some(needed) = Needed::in_slots(&snapshot.extensions) {
                    return Ok(Waited::Needs(needed));
                }
            }
            Standing::Waiting => {}
            Standing::NotHere => return ended_before(session, &snapshot, &mut run).await,
        }
        let mut changes = watch.changes;
        loop {
            let Some(frame) = changes.next().await else {
                return Err(ShiitakeError::unavailable("the Session's changes ended"));
            };
            match frame? {
                SessionFrame::Update(update) => {
                    run.take(&update.messages);
                    if let Some(ended) = run.ended(&update.terminals) {
                        return Ok(ended);
                    }
                    if running(&update.activity.queue, command)
                        && let Some(needed) = Needed::in_slots(&update.extensions)
                    {
                        return Ok(Waited::Needs(needed));
                    }
                }
                SessionFrame::Progress(_) => {}
                SessionFrame::Reset(_) => break,
            }
        }
    }
}

/// The ending of a run older than the baseline, from the pages before it; `not_found`
/// when no page within reach holds the run.
async fn ended_before<S: SessionApi, F: FnMut(&SessionMessage)>(
    session: &S,
    snapshot: &SessionSnapshot,
    run: &mut Run<'_, F>,
) -> Result<Waited, ShiitakeError> {
    let mut before: Option<Cursor> = snapshot.oldest_cursor.clone().flatten();
    let mut more = snapshot.has_more;
    for _ in 0..MAX_PAGES_BACK {
        let (true, Some(cursor)) = (more, before.take()) else {
            break;
        };
        let older = session
            .read(ReadOptions {
                before: Some(cursor),
                ..page()
            })
            .await?;
        if let Some(ended) = run.ended(&older.terminals) {
            // The answer is the run's last message in words before its ending.
            run.take(&older.messages);
            return Ok(match ended {
                Waited::Ended(ended) => Waited::Ended(Ended {
                    text: run.answer.clone(),
                    ..ended
                }),
                other => other,
            });
        }
        more = older.has_more;
        before = older.oldest_cursor.flatten();
    }
    Err(ShiitakeError::not_found(format!(
        "no work {} in this Session",
        run.command
    )))
}

/// What `command` waits on now, if it runs and waits on a person.
pub(crate) async fn needed_now<S: SessionApi>(
    session: &S,
    command: &CommandId,
) -> Result<Option<Needed>, ShiitakeError> {
    let snapshot = session.read(ReadOptions::default()).await?;
    if !running(&snapshot.activity.queue, command) {
        return Ok(None);
    }
    Ok(Needed::in_slots(&snapshot.extensions))
}
