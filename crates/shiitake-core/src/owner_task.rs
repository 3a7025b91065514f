//! The life of one Session's owner in this process: take the lease (or stand in
//! while another process holds it), load the Session, resume its interrupted
//! work, then serve its mailbox until it is stopped, fenced or idle.
//!
//! The registry starts this task for every mailbox it hands out. It is where the
//! single-process [`Owner`] and the multi-process parts (`crate::shared`) meet: the
//! owner itself only commits under the [`Tenure`] given to it here.

use std::sync::Arc;

use shiitake_protocol::{SessionId, ShiitakeError};
use tokio::sync::mpsc;

use crate::agent_core::AgentCore;
use crate::owner::registry::OwnerSlot;
use crate::owner::{Flow, Owner, Request, Tenure};
use crate::shared::{ForwardedRequests, StandIn, stand_in};
use crate::store::ownership::{Claim, Lease};

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
    let mut owner = Owner::load(core.owner_deps(), tenure, loaded, mailbox).await;
    owner.resume().await;
    let mut forwarded = core.ownership.clone().map(ForwardedRequests::new);
    // Requests other processes forwarded while the Session had no owner.
    if let Some(forwarded) = &mut forwarded {
        forwarded.serve(&mut owner).await;
    }
    let mut exit = owner.fenced();
    if let Some(pending) = pending
        && !exit
    {
        exit = matches!(owner.handle(*pending).await, Flow::Exit);
    }
    let idle_for = core.config.owner_idle;
    while !exit {
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
        if let Request::Drain = request {
            if let Some(forwarded) = &mut forwarded {
                forwarded.serve(&mut owner).await;
            }
            exit = owner.fenced();
            continue;
        }
        exit = matches!(owner.handle(request).await, Flow::Exit);
    }
    core.owners.retire(&session_id, generation);
    owner.release().await;
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
