//! This process's side of shared ownership: wakes owners here for requests
//! forwarded to them, stops owners whose lease was taken over, and adopts
//! Sessions with something to do whose owner went away: it looks when a lease is
//! announced free (given back, or its holder died) and shortly after the next lease
//! it knows of would lapse unrenewed.

use std::sync::Arc;
use std::time::Duration;

use shiitake_protocol::SessionId;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::agent_core::AgentCore;
use crate::owner::Request;
use crate::quiet::Repeated;
use crate::store::Ownership;
use crate::store::ownership::OwnershipEvent;

/// This process's side of shared ownership, until the Agent closes: wakes owners
/// here for requests forwarded to them, stops owners whose lease was taken over,
/// and adopts Sessions with work whose owner went away.
pub(crate) async fn watch(core: Arc<AgentCore>, ownership: Arc<dyn Ownership>) {
    let mut events = ownership.events();
    let mut look_at = Instant::now();
    // A store that is down fails every look: said once, then every so often.
    let mut failing = Repeated::new(crate::store_waits::REMINDER);
    loop {
        tokio::select! {
            () = core.closing.cancelled() => return,
            event = events.recv() => match event {
                Ok(OwnershipEvent::Forwarded { session_id }) => {
                    wake(&core, &session_id, Request::Drain);
                }
                Ok(OwnershipEvent::Lost { session_id, token }) => {
                    wake(&core, &session_id, Request::LeaseLost(token));
                }
                // A process that drains or dies frees many Sessions at once: one look
                // a moment later adopts them all.
                Ok(OwnershipEvent::Released { .. }) => look_at = look_at.min(Instant::now() + GATHER),
                Ok(OwnershipEvent::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    for mailbox in core.owners.all() {
                        if mailbox.try_send(Request::Drain).is_err() {
                            tracing::trace!("an owner is busy; it drains on its next wake");
                        }
                    }
                    look_at = Instant::now();
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            },
            () = tokio::time::sleep_until(look_at) => {
                look_at = Instant::now() + adopt_orphans(&core, &ownership, &mut failing).await;
            }
        }
    }
}

/// How long adoption waits after a Session is announced free before it looks, so
/// the announcements of one drain or death (one per Session) make one look.
const GATHER: Duration = Duration::from_millis(20);

/// Sends a live owner (or stand-in) of this process a wake-up, if it has one.
fn wake(core: &AgentCore, session_id: &SessionId, request: Request) {
    if let Some(mailbox) = core.owners.live_mailbox(session_id)
        && mailbox.try_send(request).is_err()
    {
        tracing::trace!(session = %session_id, "an owner's mailbox is full; it drains on its next wake");
    }
}

/// Claims Sessions whose owner went away; returns how long until the next look.
async fn adopt_orphans(
    core: &Arc<AgentCore>,
    ownership: &Arc<dyn Ownership>,
    failing: &mut Repeated,
) -> Duration {
    let ttl = ownership.lease_ttl();
    let orphans = match ownership.orphans().await {
        Ok(orphans) => orphans,
        Err(error) => {
            if let Some(say) = failing.failed() {
                tracing::warn!(%error, ?say, "could not look for Sessions whose owner went away");
            }
            return ttl / 2;
        }
    };
    if let Some(ended) = failing.succeeded() {
        tracing::info!(
            failures = ended.failures,
            lasted_ms = ended.lasted.as_millis(),
            "looking for Sessions whose owner went away again"
        );
    }
    if !orphans.sessions.is_empty() {
        tracing::info!(
            sessions = orphans.sessions.len(),
            "adopting Sessions whose owner went away"
        );
    }
    for session_id in &orphans.sessions {
        let mailbox = core.owners.mailbox(session_id);
        if mailbox.try_send(Request::Drain).is_err() {
            tracing::trace!(session = %session_id, "an owner's mailbox is full");
        }
    }
    if !orphans.sessions.is_empty() {
        // Their timers may be due: the scheduler looks again.
        core.host.timers_changed.notify_one();
    }
    tracing::debug!(next_lapse = ?orphans.next_lapse, "looked for Sessions whose owner went away");
    // A lease renewed just now lapses one lease period from now; look a little after.
    orphans
        .next_lapse
        .map_or(ttl, |lapse| lapse + Duration::from_millis(50))
        .min(ttl)
}
