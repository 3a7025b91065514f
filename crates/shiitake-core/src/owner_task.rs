//! The life of one Session's owner in this process: take the lease (or stand in
//! while another process holds it), load the Session, resume its interrupted
//! work, then serve its mailbox until it is stopped, fenced or idle; and, when its
//! store fails a commit for a reason that passes, wait for the store and go on
//! (`docs/core.md`, "When the store fails").
//!
//! The registry starts this task for every mailbox it hands out. It is where the
//! single-process [`Owner`] and the multi-process parts (`crate::shared`) meet: the
//! owner itself only commits under the [`Tenure`] given to it here.

use std::sync::Arc;

use shiitake_protocol::{SessionId, ShiitakeError, StorageWait};
use tokio::sync::mpsc;

use crate::agent_core::AgentCore;
use crate::backoff::Backoff;
use crate::owner::registry::OwnerSlot;
use crate::owner::{Flow, Owner, Reloaded, Request, Resumption, Tenure};
use crate::shared::{ForwardedRequests, StandIn, stand_in};
use crate::store::ownership::{Claim, Lease};
use crate::store_waits::StoreWaits;

/// Runs one owner until it is stopped, its Session disappears, or it idles out.
pub(crate) async fn run(core: Arc<AgentCore>, slot: OwnerSlot) {
    let OwnerSlot {
        session_id,
        generation,
        mailbox,
        mut requests,
    } = slot;
    let retire = |requests: &mut mpsc::Receiver<Request>, error: ShiitakeError| {
        refuse_all(&core, &session_id, generation, requests, &error);
        error
    };
    // On a shared store the owner needs the lease first; while another process
    // holds it, this process stands in and forwards.
    let (lease, pending) = match claim(&core, &session_id, generation, &mut requests).await {
        Claimed::Owner { lease, pending } => (lease, pending),
        Claimed::Gone => return,
        Claimed::Refused(error) => {
            retire(&mut requests, error);
            return;
        }
    };
    let loaded = match core.store.load_session(&session_id).await {
        Ok(Some(loaded)) => loaded,
        Ok(None) => {
            let error = retire(
                &mut requests,
                ShiitakeError::not_found(format!("no Session {session_id}")),
            );
            if let Some(pending) = pending {
                pending.fail(error);
            }
            return;
        }
        Err(error) => {
            let error = retire(&mut requests, ShiitakeError::from(error));
            if let Some(pending) = pending {
                pending.fail(error);
            }
            return;
        }
    };
    let tenure = Tenure::new(
        core.store.clone(),
        core.ownership.clone(),
        session_id.clone(),
        lease,
    );
    let mut owner = match Owner::load(core.owner_deps(), tenure, loaded, mailbox).await {
        Ok(owner) => owner,
        Err(error) => {
            let error = retire(&mut requests, ShiitakeError::from(error));
            if let Some(pending) = pending {
                pending.fail(error);
            }
            return;
        }
    };
    owner.resume(Resumption::Opened).await;
    let mut forwarded = core.ownership.clone().map(ForwardedRequests::new);
    // Requests other processes forwarded while the Session had no owner.
    if let Some(forwarded) = &mut forwarded {
        forwarded.serve(&mut owner).await;
    }
    let mut flow = owner.flow();
    if let Some(pending) = pending {
        match flow {
            Flow::Continue => flow = owner.handle(*pending).await,
            // Asked again by its caller, of the owner that goes on.
            Flow::Pause | Flow::Exit => pending.fail(ShiitakeError::unavailable(
                "the Session could not go on here just now; try again",
            )),
        }
    }
    let idle_for = core.config.owner_idle;
    loop {
        match flow {
            Flow::Exit => break,
            Flow::Pause => match wait_for_store(&mut owner, &mut requests).await {
                Waited::Exit => break,
                Waited::Resumed => {
                    owner.resume(Resumption::StoreReturned).await;
                    if let Some(forwarded) = &mut forwarded {
                        forwarded.serve(&mut owner).await;
                    }
                    flow = owner.flow();
                    continue;
                }
            },
            Flow::Continue => {}
        }
        // The quiet period restarts with every request; when it passes, an owner
        // with no work and no subscriber leaves, any other checks again later.
        let request = tokio::select! {
            request = requests.recv() => request,
            () = tokio::time::sleep(idle_for) => {
                if owner.idle() && core.owners.retire(&session_id, generation) {
                    // No new request can reach this mailbox; drop what is queued so
                    // its senders retry against a fresh owner.
                    requests.close();
                    while requests.try_recv().is_ok() {}
                    owner.release().await;
                    return;
                }
                continue;
            }
        };
        let Some(request) = request else { break };
        flow = match request {
            Request::Drain => {
                if let Some(forwarded) = &mut forwarded {
                    forwarded.serve(&mut owner).await;
                }
                owner.flow()
            }
            request => owner.handle(request).await,
        };
    }
    core.owners.retire(&session_id, generation);
    owner.release().await;
}

/// How waiting for the store ended.
enum Waited {
    /// The Session was read back and took a commit: its work goes on.
    Resumed,
    /// The owner stops (stopped, deleted, taken over, its mailbox gone).
    Exit,
}

/// Pauses the owner after its store failed a commit, and tries to go on with growing
/// waits (jittered, at most [`crate::backoff::STORE_CAP`] apart; at once when another Session of
/// the process got through). Meanwhile it is stopped or told its lease was lost as
/// usual and answers reads, watches and replays; a stopped run's events are dropped,
/// forwarded requests wait, and any other request (a command, an extension's call)
/// is refused `unavailable`: the caller tries again.
async fn wait_for_store(owner: &mut Owner, requests: &mut mpsc::Receiver<Request>) -> Waited {
    let waits = StoreWaits::process();
    let mut error = owner.pause();
    waits.pause(&error);
    tracing::debug!(session = %owner.session_id(), %error, "this Session waits for its store");
    let since = crate::clock::now_ms();
    let mut backoff = Backoff::for_store();
    loop {
        let delay = backoff.next_delay();
        let wait = StorageWait {
            since,
            attempts: backoff.attempts() - 1,
            next_attempt_at: crate::clock::now_ms()
                + u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            error_message: error.clone(),
        };
        owner.show_storage_wait(Some(wait));
        let deadline = tokio::time::Instant::now() + delay;
        loop {
            let request = tokio::select! {
                request = requests.recv() => request,
                () = tokio::time::sleep_until(deadline) => break,
                () = waits.returned() => break,
            };
            let Some(request) = request else {
                waits.left();
                return Waited::Exit;
            };
            match request {
                // Stopping and losing the lease work as ever; observing commits nothing
                // and shows the wait (what watchers saw stays what was committed).
                Request::Stop(_)
                | Request::LeaseLost(_)
                | Request::Read(..)
                | Request::Watch(..)
                | Request::Subscribe(..)
                | Request::Replay(..)
                | Request::Preference(_)
                | Request::Republish(_) => {
                    if let Flow::Exit = owner.handle(request).await {
                        waits.left();
                        return Waited::Exit;
                    }
                }
                // A stopped run's event (dropping it tells the run to stop), and the
                // signal of forwarded requests, served once the work goes on.
                Request::Run(..) | Request::Drain => {}
                other => other.fail(ShiitakeError::unavailable(format!(
                    "this Session waits for its store ({error}); it goes on by itself once \
                     the store takes writes again: try again shortly"
                ))),
            }
        }
        match owner.reload().await {
            Reloaded::Resumed => {
                tracing::debug!(session = %owner.session_id(), attempts = backoff.attempts(), "the store is back; this Session goes on");
                waits.resumed();
                return Waited::Resumed;
            }
            Reloaded::StillDown(failure) => {
                error = failure.to_string();
                waits.still_failing(&error);
            }
            Reloaded::Gone | Reloaded::Fenced => {
                waits.left();
                return Waited::Exit;
            }
        }
    }
}

/// How taking the Session for this process came out.
enum Claimed {
    /// This process owns the Session (under `lease` on a shared store); `pending` is
    /// a request the stand-in took before it became the owner.
    Owner {
        lease: Option<Lease>,
        /// Boxed, as the stand-in hands it over: a request is large.
        pending: Option<Box<Request>>,
    },
    /// The stand-in stopped (idle, the Agent closing): nothing more to do.
    Gone,
    /// The Session cannot be owned: answer every request with this.
    Refused(ShiitakeError),
}

/// Takes the Session's lease on a shared store, standing in for the owner in
/// another process until this process may take it; nothing to take otherwise.
async fn claim(
    core: &Arc<AgentCore>,
    session_id: &SessionId,
    generation: u64,
    requests: &mut mpsc::Receiver<Request>,
) -> Claimed {
    let Some(ownership) = core.ownership.clone() else {
        return Claimed::Owner {
            lease: None,
            pending: None,
        };
    };
    match ownership.claim(session_id).await {
        Ok(Claim::Held(lease)) => Claimed::Owner {
            lease: Some(lease),
            pending: None,
        },
        Ok(Claim::Missing) => {
            Claimed::Refused(ShiitakeError::not_found(format!("no Session {session_id}")))
        }
        Ok(Claim::Elsewhere { .. }) => {
            match stand_in(core, &ownership, session_id, generation, requests).await {
                StandIn::Owner { lease, pending } => Claimed::Owner {
                    lease: Some(lease),
                    pending,
                },
                StandIn::Gone => {
                    core.owners.retire(session_id, generation);
                    Claimed::Gone
                }
            }
        }
        Err(error) => Claimed::Refused(ShiitakeError::from(error)),
    }
}

/// Answers every queued request with `error`, then retires the owner.
fn refuse_all(
    core: &AgentCore,
    session_id: &SessionId,
    generation: u64,
    requests: &mut mpsc::Receiver<Request>,
    error: &ShiitakeError,
) {
    core.owners.retire(session_id, generation);
    requests.close();
    while let Ok(request) = requests.try_recv() {
        request.fail(error.clone());
    }
}
