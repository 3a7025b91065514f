//! The timer scheduler: one task per Agent that sleeps until the next due timer.
//!
//! It wakes when the soonest timer comes due, when a transaction sets or clears
//! a timer, or when the Agent closes; there is no polling loop. Each firing is
//! claimed by the transaction that runs its hook (the claim moves a cadence to
//! its next time or deletes a one-shot timer, and fails if another scheduler
//! claimed it first), so a timer fires once, also after a restart: overdue
//! timers fire when the Agent opens.

use std::sync::Arc;
use std::time::Duration;

use shiitake_protocol::ShiitakeError;
use tokio::sync::oneshot;

use crate::agent_core::AgentCore;
use crate::extension::agent_scope::AgentScope;
use crate::extension::host::Failure;
use crate::extension::{AdmissionOutcome, Admitted, Delivery, FiredTimer, Grant, Origin, TimerId};
use crate::owner::Request;
use crate::quiet::Repeated;
use crate::session::LocalSession;
use crate::store::{Op, TimerKind, TimerRow};
use shiitake_protocol::ErrorCode;

/// Timers fired in one pass before the scheduler looks again.
const BATCH: usize = 64;
/// Wait after a pass in which some firing failed (storage trouble), so a broken
/// timer cannot spin the scheduler.
const AFTER_FAILURE: Duration = Duration::from_secs(1);

/// What the scheduler does after looking at the soonest timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Some timer is due: fire what is due.
    Fire,
    /// Sleep until the clock reads this time.
    SleepUntil(u64),
    /// No timer: sleep until one is set.
    Idle,
}

/// Decides from one reading of the clock, so the decision and the wait agree.
fn next(soonest_due: Option<u64>, now: u64) -> Next {
    match soonest_due {
        Some(due_at) if due_at <= now => Next::Fire,
        Some(due_at) => Next::SleepUntil(due_at),
        None => Next::Idle,
    }
}

/// Runs until the Agent closes.
pub(crate) async fn run(core: Arc<AgentCore>) {
    let clock = core.config.clock.clone();
    // A store that is down fails every pass: said once, then every so often.
    let mut failing = Repeated::new(crate::store_waits::REMINDER);
    loop {
        let now = clock.now_ms();
        let sleep: crate::clock::Sleep = match core.store.next_timer().await {
            Ok(soonest) => match next(soonest.map(|timer| timer.due_at), now) {
                Next::Fire => {
                    if fire_due(&core, now, &mut failing).await {
                        continue;
                    }
                    Box::pin(tokio::time::sleep(AFTER_FAILURE))
                }
                Next::SleepUntil(due_at) => {
                    recovered(&mut failing);
                    clock.sleep_until(due_at)
                }
                Next::Idle => {
                    recovered(&mut failing);
                    Box::pin(std::future::pending())
                }
            },
            Err(error) => {
                if let Some(say) = failing.failed() {
                    tracing::warn!(%error, ?say, "timer scheduler could not read timers; it tries again every second");
                }
                Box::pin(tokio::time::sleep(AFTER_FAILURE))
            }
        };
        tokio::select! {
            () = core.closing.cancelled() => return,
            () = core.host.timers_changed.notified() => {}
            () = sleep => {}
        }
    }
}

/// Says that the scheduler's failures ended, if they had begun.
fn recovered(failing: &mut Repeated) {
    if let Some(ended) = failing.succeeded() {
        tracing::info!(
            failures = ended.failures,
            lasted_ms = ended.lasted.as_millis(),
            "timer scheduler reads timers again"
        );
    }
}

/// Fires every timer due now; `false` when some firing failed.
async fn fire_due(core: &Arc<AgentCore>, now: u64, failing: &mut Repeated) -> bool {
    let due = match core.store.due_timers(now, BATCH).await {
        Ok(due) => due,
        Err(error) => {
            if let Some(say) = failing.failed() {
                tracing::warn!(%error, ?say, "timer scheduler could not read due timers");
            }
            return false;
        }
    };
    let mut all_fired = true;
    for timer in due {
        let id = timer.id.clone();
        // On a store other processes share, the owner of a timer's Session may be in
        // another process, whose scheduler fires it; this one looks again after a pause.
        let elsewhere_maybe = core.ownership.is_some() && timer.session_id.is_some();
        // Admissions are deliveries of prompts, not an extension's timer.
        let counted = (timer.kind != TimerKind::Admission).then(|| timer.extension_id.clone());
        let fired = fire(core, timer).await;
        if let (Ok(()), Some(extension)) = (&fired, &counted) {
            crate::telemetry::timer_fired(extension);
        }
        if let Err(error) = fired {
            match error.code {
                // Another scheduler claimed it: that is the point.
                ErrorCode::Conflict => {}
                ErrorCode::Unavailable if elsewhere_maybe => {
                    tracing::debug!(%error, timer = %id, "a Session timer fires where its Session is owned");
                    all_fired = false;
                }
                // Its extension is stopped: the timer waits, and the scheduler looks
                // again after a pause instead of spinning on it.
                ErrorCode::Stopped => all_fired = false,
                // The store is down: said once for the scheduler, not per timer.
                ErrorCode::Unavailable => {
                    if let Some(say) = failing.failed() {
                        tracing::warn!(%error, ?say, timer = %id, "timers wait for the store");
                    }
                    all_fired = false;
                }
                _ => {
                    tracing::warn!(%error, timer = %id, "timer did not fire");
                    all_fired = false;
                }
            }
        }
    }
    all_fired
}

/// Why a timer of a stopped (or no longer granted) extension waits.
fn waits(timer: &TimerRow) -> ShiitakeError {
    ShiitakeError::stopped(format!(
        "extension {} is stopped or not granted; its timer waits",
        timer.extension_id
    ))
}

async fn fire(core: &Arc<AgentCore>, timer: TimerRow) -> Result<(), ShiitakeError> {
    if timer.kind == TimerKind::Admission {
        return deliver(core, timer).await;
    }
    match timer.session_id.clone() {
        Some(session_id) => {
            let mailbox = core.owners.mailbox(&session_id);
            let (reply, answer) = oneshot::channel();
            mailbox
                .send(Request::FireTimer(Box::new(timer), reply))
                .await
                .map_err(|_| ShiitakeError::unavailable("the Session's owner stopped"))?;
            answer
                .await
                .map_err(|_| ShiitakeError::unavailable("the Session's owner stopped"))?
        }
        None => fire_agent_timer(core, timer).await,
    }
}

/// Fires an Agent-scope timer: its hook sees Agent state only.
async fn fire_agent_timer(core: &Arc<AgentCore>, timer: TimerRow) -> Result<(), ShiitakeError> {
    let next = match &timer.cadence {
        Some(cadence) => Some(
            crate::extension::tx_next_cron(cadence, timer.due_at.max(core.config.clock.now_ms()))
                .map_err(|error| ShiitakeError::internal(error.to_string()))?,
        ),
        None => None,
    };
    let ops = vec![Op::ClaimTimer {
        id: timer.id.clone(),
        due_at: timer.due_at,
        next,
    }];
    let Some(registered) = core.host.find(&timer.extension_id) else {
        return Ok(core.store.commit(ops).await?);
    };
    if core.host.stopped(&timer.extension_id).is_some() || !registered.grants.has(Grant::Timers) {
        return Err(waits(&timer));
    }
    let fired = FiredTimer {
        id: TimerId(timer.id.clone()),
        session_id: None,
        payload: timer.payload.clone(),
        due_at: timer.due_at,
    };
    let scope = AgentScope::lock(core.agent_scope_deps(), registered).await;
    match scope.run(|extension, tx| extension.on_timer(tx, &fired)) {
        Ok(finished) => scope.commit(ops, finished).await?,
        Err(failure) => {
            let reason = match failure {
                Failure::Caller(error) => format!("timer hook failed: {error}"),
                Failure::Stop(reason) => reason,
            };
            scope.stop(ops, reason).await?;
        }
    }
    Ok(())
}

/// How long a scheduler holds a delivery row while it delivers, on a store no other
/// process shares: the row is delivered again only after this, if the process stopped
/// before finishing.
const DELIVERY_LEASE_MS: u64 = 30_000;

/// How long this scheduler holds a delivery row. On a shared store it is the Session
/// lease's time: a process that died mid-delivery holds the Agent's timers up no longer
/// than it holds its Sessions, and a delivery that takes as long (a door whose owner
/// died) ends within it, since a stand-in takes over a lapsed lease. Delivering twice is
/// harmless, so a short hold costs at most a repeated door call.
fn delivery_lease_ms(core: &AgentCore) -> u64 {
    core.ownership
        .as_ref()
        .map_or(DELIVERY_LEASE_MS, |ownership| {
            u64::try_from(ownership.lease_ttl().as_millis()).unwrap_or(DELIVERY_LEASE_MS)
        })
}

/// Delivers a prompt admitted with `Tx::admit_into` through the Session's door,
/// then runs the extension's admission hook with the answer, in the transaction
/// that claims the delivery row.
///
/// The row is first leased (its due time moved [`delivery_lease_ms`] ahead, a
/// conditional write only one scheduler wins), so one process delivers it; if that
/// process stops before the hook commits, the lease runs out and the row is
/// delivered again, which is harmless: the door answers a repeated request id with
/// the original `Accepted`. A door that answers `unavailable` hands the lease back,
/// so the row is tried again after the scheduler's pause, not after the lease.
async fn deliver(core: &Arc<AgentCore>, timer: TimerRow) -> Result<(), ShiitakeError> {
    let drop_row = Op::ClaimTimer {
        id: timer.id.clone(),
        due_at: timer.due_at,
        next: None,
    };
    let Some(registered) = core.host.find(&timer.extension_id) else {
        return Ok(core.store.commit(vec![drop_row]).await?);
    };
    if core.host.stopped(&timer.extension_id).is_some() || !registered.grants.has(Grant::Admissions)
    {
        return Err(waits(&timer));
    }
    let delivery: Delivery = match serde_json::from_value(timer.payload.clone()) {
        Ok(delivery) => delivery,
        Err(error) => {
            tracing::warn!(%error, timer = %timer.id, "an admission does not decode; dropped");
            return Ok(core.store.commit(vec![drop_row]).await?);
        }
    };
    let now = core.config.clock.now_ms();
    let leased_until = now
        .max(timer.due_at)
        .saturating_add(delivery_lease_ms(core));
    core.store
        .commit(vec![Op::ClaimTimer {
            id: timer.id.clone(),
            due_at: timer.due_at,
            next: Some(leased_until),
        }])
        .await?;
    let claim = Op::ClaimTimer {
        id: timer.id.clone(),
        due_at: leased_until,
        next: None,
    };
    let origin = Origin {
        extension_id: timer.extension_id.clone(),
        correlation: delivery.correlation.clone(),
    };
    let session = LocalSession::new(
        core.owners.clone(),
        core.closing.clone(),
        core.config.name.clone(),
        delivery.session_id.clone(),
    );
    let outcome = match session.admit(delivery.clone(), origin).await {
        Ok(accepted) => AdmissionOutcome::Accepted(accepted.command_id),
        // Storage trouble or a retiring owner: hand the row back, due now, and try
        // again after the scheduler's pause.
        Err(error) if error.code == ErrorCode::Unavailable => {
            let hand_back = Op::ClaimTimer {
                id: timer.id.clone(),
                due_at: leased_until,
                next: Some(now.max(timer.due_at)),
            };
            if let Err(handing) = core.store.commit(vec![hand_back]).await {
                tracing::debug!(error = %handing, timer = %timer.id, "a delivery's lease runs out instead");
            }
            return Err(error);
        }
        Err(error) => AdmissionOutcome::Refused(error),
    };
    let admitted = Admitted {
        session_id: delivery.session_id,
        request_id: delivery.request_id,
        correlation: delivery.correlation,
        outcome,
    };
    let ops = vec![claim];
    let scope = AgentScope::lock(core.agent_scope_deps(), registered).await;
    match scope.run(|extension, tx| extension.on_admission(tx, &admitted)) {
        Ok(finished) => scope.commit(ops, finished).await?,
        Err(failure) => {
            let reason = match failure {
                Failure::Caller(error) => format!("admission hook failed: {error}"),
                Failure::Stop(reason) => reason,
            };
            scope.stop(ops, reason).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decision_reads_one_clock_reading() {
        assert_eq!(next(None, 5), Next::Idle);
        assert_eq!(next(Some(4), 5), Next::Fire);
        assert_eq!(next(Some(5), 5), Next::Fire, "due exactly now fires");
        assert_eq!(next(Some(6), 5), Next::SleepUntil(6));
        assert_eq!(next(Some(0), u64::MAX), Next::Fire);
        assert_eq!(next(Some(u64::MAX), 0), Next::SleepUntil(u64::MAX));
    }
}
