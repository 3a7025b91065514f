//! A failure that repeats, told once: one line when it starts, a reminder at most
//! every so often while it lasts, one line when it ends. A loop that retries a store
//! that is down must not write a line per attempt (the issue behind this measured 850
//! MB of log in two minutes from one such loop).

use std::time::{Duration, Instant};

/// The state of one repeating failure.
#[derive(Clone, Debug)]
pub struct Repeated {
    reminder: Duration,
    /// When the current run of failures began.
    since: Option<Instant>,
    /// When a line about it was last due.
    said_at: Option<Instant>,
    /// Failures in the current run.
    failures: u64,
}

/// What to say about a failure, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Say {
    /// The first failure of a run: say it failed.
    Started,
    /// It still fails: `failures` so far, for `lasting`.
    Reminder {
        /// Failures in this run so far.
        failures: u64,
        /// Since the first.
        lasting: Duration,
    },
}

/// A run of failures ended with a success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// Failures in the run.
    pub failures: u64,
    /// From the first failure to the success.
    pub lasted: Duration,
}

impl Repeated {
    /// Nothing failing; reminders at most every `reminder`.
    pub fn new(reminder: Duration) -> Self {
        Self {
            reminder,
            since: None,
            said_at: None,
            failures: 0,
        }
    }

    /// Another failure now: what to say about it, `None` to stay quiet.
    pub fn failed(&mut self) -> Option<Say> {
        self.failed_at(Instant::now())
    }

    /// [`failed`](Self::failed) at `now`.
    pub fn failed_at(&mut self, now: Instant) -> Option<Say> {
        self.failures += 1;
        let Some(since) = self.since else {
            self.since = Some(now);
            self.said_at = Some(now);
            return Some(Say::Started);
        };
        let due = self
            .said_at
            .is_none_or(|said| now.saturating_duration_since(said) >= self.reminder);
        if !due {
            return None;
        }
        self.said_at = Some(now);
        Some(Say::Reminder {
            failures: self.failures,
            lasting: now.saturating_duration_since(since),
        })
    }

    /// A success now: how the run of failures it ends went, `None` if nothing failed.
    pub fn succeeded(&mut self) -> Option<Ended> {
        self.succeeded_at(Instant::now())
    }

    /// [`succeeded`](Self::succeeded) at `now`.
    pub fn succeeded_at(&mut self, now: Instant) -> Option<Ended> {
        let since = self.since.take()?;
        self.said_at = None;
        let failures = std::mem::take(&mut self.failures);
        Some(Ended {
            failures,
            lasted: now.saturating_duration_since(since),
        })
    }

    /// Whether a run of failures is going on.
    pub fn failing(&self) -> bool {
        self.since.is_some()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// However the failures come, lines are at most one per reminder period plus
        /// the first, each run of failures ends with one line, and nothing is said
        /// without a failure.
        #[test]
        fn lines_are_bounded_by_time_not_by_failures(
            gaps_ms in proptest::collection::vec(0u64..500, 1..400),
            success_every in 1usize..60,
        ) {
            let reminder = Duration::from_secs(2);
            let start = Instant::now();
            let mut repeated = Repeated::new(reminder);
            let mut now = start;
            let mut lines_in_run = 0u64;
            let mut run_start = None;
            for (index, gap) in gaps_ms.iter().enumerate() {
                now += Duration::from_millis(*gap);
                if index % success_every == success_every - 1 {
                    let ended = repeated.succeeded_at(now);
                    prop_assert_eq!(ended.is_some(), run_start.is_some());
                    run_start = None;
                    lines_in_run = 0;
                    continue;
                }
                let run_began = *run_start.get_or_insert(now);
                if let Some(say) = repeated.failed_at(now) {
                    lines_in_run += 1;
                    prop_assert_eq!(say == Say::Started, lines_in_run == 1);
                }
                let lasting = now.duration_since(run_began);
                let allowed = 1 + lasting.as_millis() / reminder.as_millis();
                prop_assert!(u128::from(lines_in_run) <= allowed, "{lines_in_run} lines in {lasting:?}");
            }
        }
    }

    #[test]
    fn a_run_says_start_reminder_and_end() {
        let t0 = Instant::now();
        let mut repeated = Repeated::new(Duration::from_secs(10));
        assert_eq!(repeated.failed_at(t0), Some(Say::Started));
        assert_eq!(repeated.failed_at(t0 + Duration::from_secs(9)), None);
        assert_eq!(
            repeated.failed_at(t0 + Duration::from_secs(10)),
            Some(Say::Reminder {
                failures: 3,
                lasting: Duration::from_secs(10)
            })
        );
        assert_eq!(
            repeated.succeeded_at(t0 + Duration::from_secs(12)),
            Some(Ended {
                failures: 3,
                lasted: Duration::from_secs(12)
            })
        );
        assert_eq!(repeated.succeeded_at(t0 + Duration::from_secs(13)), None);
        assert!(!repeated.failing());
    }
}
