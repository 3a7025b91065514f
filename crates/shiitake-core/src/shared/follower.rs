//! Followers: how a watch or subscription on a process that does not own the
//! Session sees what the owner (in another process) commits.
//!
//! On every commit the database announces for the Session, a follower asks the
//! owner for the frames after its cursor and publishes them, so a subscriber sees
//! every committed change whichever process made it (progress and activity-only
//! updates stay in the owner's process, as they are never stored).

use std::sync::Arc;
use std::time::Duration;

use shiitake_protocol::{Cursor, FrameDelivery, SessionFrame, SessionId, SubscribeOptions};
use tokio::sync::broadcast;

use tokio_util::sync::CancellationToken;

use crate::cursor::Position;
use crate::owner::registry::Registry;
use crate::owner::{PUBLISH_BUFFER, Published, Request};
use crate::store::ownership::OwnershipEvent;

/// Starts a follower for one watch or subscription; its receiver gets every change
/// committed after `cursor`.
pub(super) fn follow(
    owners: &Arc<Registry>,
    closing: &CancellationToken,
    session_id: &SessionId,
    cursor: Option<Cursor>,
    include_sandbox_failures: bool,
    events: broadcast::Receiver<OwnershipEvent>,
) -> broadcast::Receiver<Published> {
    let (publisher, receiver) = broadcast::channel(PUBLISH_BUFFER);
    let follower = Follower {
        owners: owners.clone(),
        session_id: session_id.clone(),
        closing: closing.clone(),
        cursor,
        include_sandbox_failures,
        publisher,
    };
    tokio::spawn(follower.run(events));
    receiver
}

/// Turns announced commits of one Session into frames for one subscriber.
struct Follower {
    owners: Arc<Registry>,
    session_id: SessionId,
    closing: CancellationToken,
    cursor: Option<Cursor>,
    include_sandbox_failures: bool,
    publisher: broadcast::Sender<Published>,
}

impl Follower {
    async fn run(mut self, mut events: broadcast::Receiver<OwnershipEvent>) {
        // Whatever was committed between the answer and this task starting.
        let mut look = true;
        loop {
            if look {
                match self.catch_up().await {
                    CaughtUp::Yes => {}
                    CaughtUp::Nobody => return,
                    // The owner could not be reached (it is moving): look again soon
                    // rather than wait for a commit that may not come.
                    CaughtUp::Later => {
                        tokio::select! {
                            () = self.closing.cancelled() => return,
                            () = self.publisher.closed() => return,
                            () = tokio::time::sleep(FOLLOWER_RETRY) => {}
                        }
                        continue;
                    }
                }
            }
            look = tokio::select! {
                () = self.closing.cancelled() => return,
                () = self.publisher.closed() => return,
                event = events.recv() => match event {
                    Ok(OwnershipEvent::Committed { session_id, head_sequence }) => {
                        session_id == self.session_id && Some(head_sequence) != self.head()
                    }
                    Ok(OwnershipEvent::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => true,
                    Ok(_) => false,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            };
        }
    }

    /// The sequence this follower has published up to.
    fn head(&self) -> Option<u64> {
        self.cursor
            .as_ref()
            .and_then(Position::decode)
            .map(|position| position.sequence)
    }

    /// Publishes every frame after the cursor.
    async fn catch_up(&mut self) -> CaughtUp {
        let after = self.cursor.clone().unwrap_or_else(|| {
            Position {
                epoch: 0,
                sequence: 0,
            }
            .encode()
        });
        let options = SubscribeOptions {
            after: Some(after),
            include_sandbox_failures: Some(self.include_sandbox_failures),
        };
        let replay = |reply| Request::Replay(options.clone(), reply);
        let frames = match self.owners.ask(&self.session_id, replay).await {
            Ok(frames) => frames,
            Err(error) => {
                tracing::debug!(%error, session = %self.session_id, "a follower could not catch up yet");
                return if self.publisher.receiver_count() > 0 {
                    CaughtUp::Later
                } else {
                    CaughtUp::Nobody
                };
            }
        };
        for frame in frames {
            let published = match frame {
                SessionFrame::Update(mut update) => {
                    update.delivery = FrameDelivery::Live;
                    if update.cursor.is_some() {
                        self.cursor = update.cursor.clone();
                    }
                    Published::Update(Arc::new(update))
                }
                SessionFrame::Reset(reset) => {
                    self.cursor = reset.cursor.clone();
                    Published::Reset(Arc::new(reset.baseline))
                }
                SessionFrame::Progress(progress) => Published::Progress(Arc::new(progress)),
            };
            if self.publisher.send(published).is_err() {
                return CaughtUp::Nobody;
            }
        }
        CaughtUp::Yes
    }
}

/// What one catch-up of a follower came to.
enum CaughtUp {
    /// Everything committed so far was published.
    Yes,
    /// Nobody listens any more.
    Nobody,
    /// The owner could not be asked now; try again after [`FOLLOWER_RETRY`].
    Later,
}

/// How long a follower waits before asking again after the owner could not answer.
const FOLLOWER_RETRY: Duration = Duration::from_millis(200);
