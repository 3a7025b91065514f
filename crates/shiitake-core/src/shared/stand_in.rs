//! A stand-in: this process's place-holder for a Session whose lease another
//! process holds.
//!
//! It forwards each request through the database ([`Ownership::forward`]) and
//! waits for the owner's answer, and it tries to take the lease itself whenever the
//! owner may have gone, then hands over to an owner here, which handles the request.
//! A lease given back, or freed because its holder died, is announced
//! ([`OwnershipEvent::Released`]), and the stand-in claims at once; a lapse is not
//! announced, so it also looks when the lease would lapse unrenewed (a paused holder).
//! Watches and subscriptions get a follower.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use shiitake_protocol::{CommandOutcome, SessionId, SessionSnapshot, ShiitakeError};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::follower::follow;
use super::forwarded::{Forwarded, Outcome, Replayed, decode};
use crate::agent_core::AgentCore;
use crate::owner::{Request, send};
use crate::store::Ownership;
use crate::store::ownership::{Claim, Lease, OwnershipEvent};

/// How a stand-in ended.
pub(crate) enum StandIn {
    /// This process took the lease: run the owner, handling `pending` first.
    Owner {
        lease: Lease,
        /// Boxed: a request is large, and a stand-in that stops carries nothing.
        pending: Option<Box<Request>>,
    },
    /// It stopped (idle, the Agent closing, the mailbox gone).
    Gone,
}

/// Stands in for the owner in another process until it idles out, is stopped, or
/// this process takes the lease.
pub(crate) async fn stand_in(
    core: &Arc<AgentCore>,
    ownership: &Arc<dyn Ownership>,
    session_id: &SessionId,
    generation: u64,
    requests: &mut mpsc::Receiver<Request>,
) -> StandIn {
    loop {
        let request = tokio::select! {
            request = requests.recv() => request,
            () = tokio::time::sleep(core.config.owner_idle) => {
                if core.owners.retire(session_id, generation) {
                    requests.close();
                    while requests.try_recv().is_ok() {}
                    return StandIn::Gone;
                }
                continue;
            }
        };
        let Some(request) = request else {
            return StandIn::Gone;
        };
        let Some(forwarded) = Forwarded::of(&request) else {
            match request {
                Request::Stop(done) => {
                    if done.send(()).is_err() {
                        tracing::trace!("stop requester left");
                    }
                    return StandIn::Gone;
                }
                // Adopting an orphan: take the lease if it is free now.
                Request::Drain => match ownership.claim(session_id).await {
                    Ok(Claim::Held(lease)) => {
                        return StandIn::Owner {
                            lease,
                            pending: None,
                        };
                    }
                    Ok(Claim::Elsewhere { .. } | Claim::Missing) => {}
                    // The store is down: the owners and the adoption say so, once.
                    Err(error) if error.is_transient() => {
                        tracing::debug!(%error, session = %session_id, "could not claim");
                    }
                    Err(error) => tracing::warn!(%error, session = %session_id, "could not claim"),
                },
                // The owner's process publishes to the watchers it serves; the watchers
                // here follow its frames, so nothing here is republished.
                Request::Republish(reply) => send(reply, Ok(false)),
                // Only an owner can run these: take the lease if it is free now,
                // else they run in the process that owns the Session.
                request @ (Request::ExtensionTx { .. } | Request::FireTimer(..)) => {
                    match ownership.claim(session_id).await {
                        Ok(Claim::Held(lease)) => {
                            return StandIn::Owner {
                                lease,
                                pending: Some(Box::new(request)),
                            };
                        }
                        Ok(Claim::Elsewhere { .. } | Claim::Missing) => {
                            request.fail(elsewhere(session_id));
                        }
                        Err(error) => request.fail(error.into()),
                    }
                }
                _ => {}
            }
            continue;
        };
        // Subscribe before forwarding, so no announcement after the answer is missed.
        let events = ownership.events();
        match call(
            ownership,
            session_id,
            &forwarded,
            events.resubscribe(),
            &core.closing,
        )
        .await
        {
            Call::TookOver(lease) => {
                return StandIn::Owner {
                    lease,
                    pending: Some(Box::new(request)),
                };
            }
            Call::Answered { answer, took_over } => {
                answer_locally(core, session_id, request, answer, events);
                if let Some(lease) = took_over {
                    return StandIn::Owner {
                        lease,
                        pending: None,
                    };
                }
            }
            Call::Failed(error) => request.fail(error),
        }
    }
}

fn elsewhere(session_id: &SessionId) -> ShiitakeError {
    ShiitakeError::unavailable(format!(
        "Session {session_id} is owned by another process; this runs only there"
    ))
}

/// Replies to the waiting caller with the owner's answer, starting a follower for
/// a watch or a subscription.
fn answer_locally(
    core: &Arc<AgentCore>,
    session_id: &SessionId,
    request: Request,
    answer: Value,
    events: broadcast::Receiver<OwnershipEvent>,
) {
    match request {
        Request::Command(_, _, reply) => {
            send(reply, decode::<Outcome>(answer).map(CommandOutcome::from));
        }
        Request::Read(_, reply) => send(reply, decode(answer)),
        Request::Preference(reply) => send(reply, decode(answer)),
        Request::SetPreference(_, reply) => send(reply, decode(answer)),
        Request::ExtensionCall(_, _, _, reply) => send(reply, decode(answer)),
        Request::Admit { reply, .. } => send(reply, decode(answer)),
        Request::Replay(_, reply) => {
            send(
                reply,
                decode::<Replayed>(answer).map(|replayed| replayed.frames),
            );
        }
        Request::Watch(options, reply) => {
            let result = decode::<SessionSnapshot>(answer).map(|snapshot| {
                let include = options.include_sandbox_failures.unwrap_or(false);
                let cursor = snapshot.cursor.clone();
                let receiver = follow(
                    &core.owners,
                    &core.closing,
                    session_id,
                    cursor,
                    include,
                    events,
                );
                (snapshot, receiver)
            });
            send(reply, result);
        }
        Request::Subscribe(options, reply) => {
            let result = decode::<Replayed>(answer).map(|replayed| {
                let include = options.include_sandbox_failures.unwrap_or(false);
                let cursor = replayed.head.or(options.after);
                let receiver = follow(
                    &core.owners,
                    &core.closing,
                    session_id,
                    cursor,
                    include,
                    events,
                );
                (replayed.frames, receiver)
            });
            send(reply, result);
        }
        other => other.fail(ShiitakeError::internal("not a forwarded request")),
    }
}

/// What forwarding one request came to.
enum Call {
    /// The owner answered; this process may also have taken the lease meanwhile.
    Answered {
        answer: Value,
        took_over: Option<Lease>,
    },
    /// The owner went away before answering and this process took the lease: the
    /// request was withdrawn and is to be handled here.
    TookOver(Lease),
    /// The database failed.
    Failed(ShiitakeError),
}

/// Forwards `request` to the owner and waits for its answer, taking the lease when
/// the owner goes away first; withdraws it and gives up when the Agent closes.
async fn call(
    ownership: &Arc<dyn Ownership>,
    session_id: &SessionId,
    request: &Forwarded,
    mut events: broadcast::Receiver<OwnershipEvent>,
    closing: &CancellationToken,
) -> Call {
    // The lease may be free (its owner left, or died): take it rather than wait.
    let mut look_at = match ownership.claim(session_id).await {
        Ok(Claim::Held(lease)) => return Call::TookOver(lease),
        Ok(Claim::Elsewhere { lapses_in }) => look_after(lapses_in),
        Ok(Claim::Missing) => {
            return Call::Failed(ShiitakeError::not_found(format!("no Session {session_id}")));
        }
        Err(error) => return Call::Failed(error.into()),
    };
    let request = match serde_json::to_value(request) {
        Ok(request) => request,
        Err(error) => return Call::Failed(ShiitakeError::internal(error.to_string())),
    };
    let mut id = match ownership.forward(session_id, &request).await {
        Ok(id) => id,
        Err(error) => return Call::Failed(error.into()),
    };
    loop {
        let look = tokio::select! {
            () = closing.cancelled() => {
                if let Err(error) = ownership.withdraw(id).await {
                    tracing::debug!(%error, "a forwarded request outlives the closing Agent");
                }
                return Call::Failed(ShiitakeError::unavailable("the Agent is closing; ask again"));
            }
            event = events.recv() => match event {
                Ok(OwnershipEvent::Answered { id: answered }) => answered == id,
                Ok(OwnershipEvent::Released { session_id: released }) => &released == session_id,
                Ok(OwnershipEvent::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => true,
                Ok(_) => false,
                Err(broadcast::error::RecvError::Closed) => {
                    return Call::Failed(ShiitakeError::unavailable("the store is closing"));
                }
            },
            // No announcement says a lease lapsed: look when it would have.
            () = tokio::time::sleep_until(look_at) => true,
        };
        if !look {
            continue;
        }
        match ownership.take_answer(id).await {
            Ok(Some(answer)) => {
                return Call::Answered {
                    answer,
                    took_over: None,
                };
            }
            Ok(None) => {}
            Err(error) => return Call::Failed(error.into()),
        }
        match ownership.claim(session_id).await {
            Ok(Claim::Held(lease)) => {
                return match ownership.withdraw(id).await {
                    Ok(true) => Call::TookOver(lease),
                    Ok(false) => match ownership.take_answer(id).await {
                        Ok(Some(answer)) => Call::Answered {
                            answer,
                            took_over: Some(lease),
                        },
                        Ok(None) => Call::TookOver(lease),
                        Err(error) => Call::Failed(error.into()),
                    },
                    Err(error) => Call::Failed(error.into()),
                };
            }
            Ok(Claim::Elsewhere { lapses_in }) => look_at = look_after(lapses_in),
            Ok(Claim::Missing) => {
                return Call::Failed(ShiitakeError::not_found(format!("no Session {session_id}")));
            }
            Err(error) => return Call::Failed(error.into()),
        }
        // Still owned elsewhere and unanswered: write the request again, so an owner
        // that took the Session over after it was written (and never saw it) does.
        match ownership.withdraw(id).await {
            Ok(true) => match ownership.forward(session_id, &request).await {
                Ok(again) => id = again,
                Err(error) => return Call::Failed(error.into()),
            },
            Ok(false) => {}
            Err(error) => return Call::Failed(error.into()),
        }
    }
}

/// How long after a lease would lapse unrenewed the stand-in looks: the holder's
/// last renewal may land just before the expiry (the database's clock decides).
const LAPSE_MARGIN: Duration = Duration::from_millis(50);

/// The soonest a stand-in looks again with no announcement, so a lease that is free
/// but not this process's to take (it drains) cannot make it spin.
const MIN_LOOK: Duration = Duration::from_millis(250);

/// When to look at a lease that lapses in `lapses_in` unless renewed.
fn look_after(lapses_in: Duration) -> Instant {
    Instant::now() + (lapses_in + LAPSE_MARGIN).max(MIN_LOOK)
}
