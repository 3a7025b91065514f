//! Wall-clock time as the wire carries it (Unix milliseconds), and the clock that
//! drives timers.
//!
//! [`now_ms`] reads the system clock. An Agent reads time for its timers and its
//! extension transactions ([`Tx::now`](crate::extension::Tx::now)) from the
//! [`Clock`] in [`AgentConfig::clock`](crate::AgentConfig::clock): the
//! [`SystemClock`] by default, or a [`ManualClock`] that stands still until a test
//! (or a simulation) moves it, so a timer a week away fires without waiting a week.
//! Message timestamps and activity times stay on the system clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// Milliseconds since the Unix epoch; 0 if the clock reads before it.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A future that resolves when a clock reaches a time.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The time source of an Agent's timers and extension transactions.
///
/// The scheduler reads [`Clock::now_ms`] once per pass and waits with
/// [`Clock::sleep_until`], so a clock may jump or stand still without the
/// scheduler missing or double-firing a timer.
pub trait Clock: Send + Sync + 'static {
    /// Unix milliseconds now.
    fn now_ms(&self) -> u64;

    /// Resolves once the clock reads `at_ms` or later (at once if it already does).
    fn sleep_until(&self, at_ms: u64) -> Sleep;
}

/// The system clock, with tokio's timer for waiting.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        // One reading, saturating: a time already passed waits zero.
        let wait = Duration::from_millis(at_ms.saturating_sub(now_ms()));
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A paused clock: it reads what it was last set to, and wakes sleepers when moved.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<u64>,
}

impl ManualClock {
    /// A clock that reads `start_ms` until it is moved.
    pub fn new(start_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            now: watch::Sender::new(start_ms),
        })
    }

    /// Sets the time; a clock never moves backwards, so an earlier time is ignored.
    pub fn set(&self, ms: u64) {
        self.now.send_if_modified(|now| {
            let moved = ms > *now;
            if moved {
                *now = ms;
            }
            moved
        });
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.set(self.now_ms().saturating_add(by));
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        *self.now.borrow()
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        let mut moved = self.now.subscribe();
        Box::pin(async move {
            if moved.wait_for(|now| *now >= at_ms).await.is_err() {
                // The clock is gone, so it never reaches `at_ms`.
                std::future::pending::<()>().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_clock_wakes_sleepers_when_it_reaches_their_time() {
        let clock = ManualClock::new(1_000);
        let sleeper = tokio::spawn(clock.sleep_until(2_000));
        clock.advance(Duration::from_millis(999));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished(), "one millisecond early");
        clock.set(500);
        assert_eq!(clock.now_ms(), 1_999, "it never moves back");
        clock.advance(Duration::from_millis(1));
        sleeper.await.unwrap();
        // A time already reached resolves at once.
        clock.sleep_until(2_000).await;
        clock.sleep_until(0).await;
    }

    #[tokio::test]
    async fn the_system_clock_does_not_underflow_for_a_past_time() {
        SystemClock.sleep_until(0).await;
        SystemClock
            .sleep_until(now_ms().saturating_sub(10_000))
            .await;
        assert!(SystemClock.now_ms() > 1_700_000_000_000);
    }
}
