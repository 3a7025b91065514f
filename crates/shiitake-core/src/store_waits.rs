//! The Sessions of this process that wait for their store, counted once for the
//! whole process: one log line when the first one starts waiting, a reminder at most
//! every [`REMINDER`] while any waits, one line when the last one goes on; the gauge
//! of waiting Sessions; and the wake-up of every waiter once one of them got a commit
//! through.
//!
//! When a database restarts under a thousand Sessions, each of their owners pauses;
//! a line per owner and per attempt would be a flood (the issue that led here measured
//! 850 MB of log in two minutes). So owners log at `debug`, and this is where an
//! operator reads the state of the store. It is process-wide on purpose: a Hub
//! process serves many tenants, each an Agent, and the store is the same for all of
//! them.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::quiet::{Ended, Repeated, Say};

/// The longest quiet time while Sessions wait: a reminder says they still do.
pub(crate) const REMINDER: Duration = Duration::from_secs(10);

/// What the process knows of its waiting Sessions.
pub(crate) struct StoreWaits {
    state: Mutex<State>,
    /// Woken when a waiter got a commit through: the others try at once.
    returned: Notify,
}

struct State {
    /// Sessions waiting now.
    waiting: usize,
    /// The outage as the log tells it: from the first Session waiting to the last
    /// going on.
    outage: Repeated,
}

impl StoreWaits {
    /// The process's one account of waiting Sessions.
    pub(crate) fn process() -> &'static StoreWaits {
        static WAITS: OnceLock<StoreWaits> = OnceLock::new();
        WAITS.get_or_init(|| StoreWaits {
            state: Mutex::new(State {
                waiting: 0,
                outage: Repeated::new(REMINDER),
            }),
            returned: Notify::new(),
        })
    }

    /// A Session starts waiting because its store failed a commit with `error`.
    pub(crate) fn pause(&self, error: &str) {
        crate::telemetry::store_paused();
        metrics::gauge!(crate::telemetry::SESSIONS_WAITING_FOR_STORE).increment(1.0);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.waiting += 1;
        if state.waiting == 1 && state.outage.failed() == Some(Say::Started) {
            tracing::warn!(%error, "the store failed a commit; the work of its Sessions waits and goes on by itself once the store takes writes again");
        }
    }

    /// A waiting Session tried again and the store still failed with `error`: says so,
    /// at most once every [`REMINDER`] for the whole process.
    pub(crate) fn still_failing(&self, error: &str) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.waiting == 0 {
            return;
        }
        if let Some(Say::Reminder { lasting, .. }) = state.outage.failed() {
            tracing::warn!(%error, sessions = state.waiting, waited_s = lasting.as_secs(), "Sessions still wait for the store");
        }
    }

    /// A waiting Session got a commit through and goes on; every other waiter of the
    /// process tries again at once.
    pub(crate) fn resumed(&self) {
        self.leave();
        self.returned.notify_waiters();
    }

    /// A waiting Session stopped waiting without going on here (stopped, deleted,
    /// taken over by another process).
    pub(crate) fn left(&self) {
        self.leave();
    }

    fn leave(&self) {
        metrics::gauge!(crate::telemetry::SESSIONS_WAITING_FOR_STORE).decrement(1.0);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.waiting = state.waiting.saturating_sub(1);
        if state.waiting == 0
            && let Some(Ended { lasted, .. }) = state.outage.succeeded()
        {
            tracing::info!(
                waited_ms = lasted.as_millis(),
                "no Session waits for the store any more"
            );
        }
    }

    /// Resolves when another waiter got a commit through.
    pub(crate) async fn returned(&self) {
        self.returned.notified().await;
    }
}
