//! The live part of a subscription or a watch: what the Session's owner publishes, for
//! as long as the subscriber wants it, whichever owner that is.
//!
//! An owner in this process may leave while subscribers follow it because another
//! process took the Session over (this process's lease lapsed while its database
//! connection was cut, or its commit was fenced). Its last word is then
//! [`Published::Moved`]: the Session goes on elsewhere, so the stream subscribes again
//! from the cursor of the last frame it gave out, now through the stand-in that follows
//! the new owner: nothing is missed or repeated, and the client sees no end. An owner
//! that leaves otherwise (stopped: the Agent closing, the Session deleted) closes its
//! channel and ends the stream, as does a store that stays unreachable, with the error.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use shiitake_protocol::{
    Cursor, ErrorCode, FrameStream, ReadOptions, ResetFrame, ResetReason, SessionFrame,
    ShiitakeError, SubscribeOptions,
};
use tokio::sync::broadcast;

use super::LocalSession;
use crate::backoff::Backoff;
use crate::owner::{Published, Request};

/// The least and the most time between two attempts to follow the Session again when
/// its owners keep leaving before anything reaches the subscriber.
const FOLLOW_FLOOR: Duration = Duration::from_millis(50);
const FOLLOW_CAP: Duration = Duration::from_secs(2);

/// Attempts in a row, with nothing given out between, before the stream gives up (at
/// the cap, about a minute).
const FOLLOW_ATTEMPTS: u32 = 32;

/// The cursor of the last frame of `frames` that has one.
pub(super) fn last_cursor(frames: &[SessionFrame]) -> Option<Cursor> {
    frames.iter().rev().find_map(cursor_of)
}

/// The frames published on `receiver`, and after it closes, those of the Session's next
/// owner from `cursor` on (see the module documentation).
pub(super) fn frames(
    session: LocalSession,
    receiver: broadcast::Receiver<Published>,
    include_sandbox_failures: bool,
    cursor: Option<Cursor>,
) -> FrameStream {
    let live = Live {
        session,
        receiver,
        include_sandbox_failures,
        cursor,
        pending: VecDeque::new(),
        backoff: Backoff::new(FOLLOW_FLOOR, FOLLOW_CAP),
    };
    futures::stream::unfold(Some(live), |live| async move {
        let mut live = live?;
        match live.next().await? {
            Ok(frame) => Some((Ok(frame), Some(live))),
            Err(error) => Some((Err(error), None)),
        }
    })
    .boxed()
}

/// One subscriber's place in the Session.
struct Live {
    session: LocalSession,
    receiver: broadcast::Receiver<Published>,
    include_sandbox_failures: bool,
    /// The cursor of the last frame given out (or the one the subscriber came with).
    cursor: Option<Cursor>,
    /// Frames of a replay to give out before the next published one.
    pending: VecDeque<SessionFrame>,
    /// Spacing of attempts to follow the Session again while nothing comes through.
    backoff: Backoff,
}

/// What the stream does next: a frame, a failure that ends it, or its end (`None`).
type Next = Option<Result<SessionFrame, ShiitakeError>>;

impl Live {
    async fn next(&mut self) -> Next {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return self.give(frame);
            }
            match self.receiver.recv().await {
                Ok(Published::Moved) => match self.follow_again().await {
                    Ok(true) => {}
                    Ok(false) => return None,
                    Err(error) => return Some(Err(error)),
                },
                Ok(published) => {
                    if let Some(frame) = to_frame(published, self.include_sandbox_failures) {
                        return self.give(frame);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => return self.reset().await,
                // Stopped (the Agent closing, the Session deleted) or idle: the end.
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Gives `frame` out, remembering its cursor.
    fn give(&mut self, frame: SessionFrame) -> Next {
        if let Some(cursor) = cursor_of(&frame) {
            self.cursor = Some(cursor);
        }
        self.backoff.reset();
        Some(Ok(frame))
    }

    /// The subscriber fell behind the channel: one reset to the Session as it is now.
    async fn reset(&mut self) -> Next {
        let options = ReadOptions {
            include_sandbox_failures: Some(self.include_sandbox_failures),
            ..ReadOptions::default()
        };
        match self.session.watch_parts(options).await {
            Ok((baseline, fresh)) => {
                self.receiver = fresh;
                self.give(SessionFrame::Reset(Box::new(ResetFrame {
                    reason: ResetReason::HistoryUnavailable,
                    cursor: baseline.cursor.clone(),
                    baseline,
                })))
            }
            Err(error) => Some(Err(error)),
        }
    }

    /// The owner's channel closed: subscribes again from the cursor, through whoever
    /// serves the Session now. `false` when the stream is over (the Agent closing, the
    /// Session gone).
    async fn follow_again(&mut self) -> Result<bool, ShiitakeError> {
        loop {
            if self.session.closing.is_cancelled() {
                return Ok(false);
            }
            if self.backoff.attempts() >= FOLLOW_ATTEMPTS {
                return Err(ShiitakeError::unavailable(format!(
                    "Session {} could not be followed after its owner here left; subscribe again",
                    self.session.session_id
                )));
            }
            // The first attempt at once; then spaced, as an owner that leaves at once
            // again (or a store that is down) needs time.
            let delay = self.backoff.next_delay();
            if self.backoff.attempts() > 1 {
                tokio::select! {
                    () = self.session.closing.cancelled() => return Ok(false),
                    () = tokio::time::sleep(delay) => {}
                }
            }
            let options = SubscribeOptions {
                after: self.cursor.clone(),
                include_sandbox_failures: Some(self.include_sandbox_failures),
            };
            match self
                .session
                .ask(|reply| Request::Subscribe(options.clone(), reply))
                .await
            {
                Ok((replay, receiver)) => {
                    self.pending.extend(replay);
                    self.receiver = receiver;
                    return Ok(true);
                }
                Err(error) if error.code == ErrorCode::NotFound => return Ok(false),
                Err(error) if error.code == ErrorCode::Unavailable => {
                    tracing::debug!(%error, session = %self.session.session_id, "a subscriber could not follow the Session yet");
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// The cursor a frame moves the subscriber to, if any.
fn cursor_of(frame: &SessionFrame) -> Option<Cursor> {
    match frame {
        SessionFrame::Update(update) => update.cursor.clone(),
        SessionFrame::Reset(reset) => reset.cursor.clone(),
        SessionFrame::Progress(_) => None,
    }
}

/// The frame a subscriber receives. A frame is copied out of its `Arc` only while other
/// subscribers have yet to receive it: the channel lets go of its copy once the last one
/// did, so the only (or last) subscriber takes the frame itself. `Moved` is no frame.
fn to_frame(published: Published, include_sandbox_failures: bool) -> Option<SessionFrame> {
    Some(match published {
        Published::Update(update) => {
            let mut update = Arc::unwrap_or_clone(update);
            if !include_sandbox_failures {
                update.sandbox_failures = None;
            }
            SessionFrame::Update(update)
        }
        Published::Progress(progress) => SessionFrame::Progress(Arc::unwrap_or_clone(progress)),
        Published::Reset(baseline) => {
            let baseline = Arc::unwrap_or_clone(baseline);
            SessionFrame::Reset(Box::new(ResetFrame {
                reason: ResetReason::HistoryUnavailable,
                cursor: baseline.cursor.clone(),
                baseline,
            }))
        }
        Published::Moved => return None,
    })
}
