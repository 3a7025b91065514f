//! How long to wait before trying again something that failed for a reason that
//! passes (a store that is down, a connection that broke): exponential, with jitter,
//! between a floor and a cap.
//!
//! Every waiter of a process draws its own delay, so a thousand owners waiting for
//! the same database do not all knock at the same instant when it returns ("full
//! jitter": each delay is uniform between the floor and the current ceiling, and the
//! ceiling doubles from the floor up to the cap). A success resets it.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// The shortest wait before trying a store (or its connection) again.
pub const STORE_FLOOR: Duration = Duration::from_millis(100);

/// The longest wait before trying a store again: how late a waiter may notice that
/// the store is back.
pub const STORE_CAP: Duration = Duration::from_secs(2);

/// Delays for one thing that keeps failing: the n-th is drawn from `[floor, min(cap,
/// floor × 2ⁿ)]`.
#[derive(Clone, Debug)]
pub struct Backoff {
    floor: Duration,
    cap: Duration,
    /// Failures since the last success.
    attempts: u32,
    /// The state of the jitter's generator (splitmix64), seeded at random.
    seed: u64,
}

impl Backoff {
    /// Delays from `floor`, doubling, never above `cap` (a `cap` below `floor` is taken
    /// as `floor`).
    pub fn new(floor: Duration, cap: Duration) -> Self {
        let seed = RandomState::new().build_hasher().finish();
        Self::seeded(floor, cap, seed)
    }

    /// Delays for trying a store again, from [`STORE_FLOOR`] to [`STORE_CAP`]: one
    /// rule for the owners waiting on it and the connections reconnecting to it.
    pub fn for_store() -> Self {
        Self::new(STORE_FLOOR, STORE_CAP)
    }

    /// The same with a given seed, so a test draws the same delays every time.
    pub fn seeded(floor: Duration, cap: Duration, seed: u64) -> Self {
        Self {
            floor,
            cap: cap.max(floor),
            attempts: 0,
            seed,
        }
    }

    /// The delay before the next attempt; each call counts one more failure.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempts = self.attempts.saturating_add(1);
        let span = ceiling.saturating_sub(self.floor);
        let span_ns = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        let jitter = match span_ns.checked_add(1) {
            Some(modulus) => self.random() % modulus,
            None => self.random(),
        };
        self.floor + Duration::from_nanos(jitter)
    }

    /// The highest delay the next call may draw: the floor doubled once per failure
    /// so far, up to the cap.
    pub fn ceiling(&self) -> Duration {
        let doublings = self.attempts.min(31);
        self.floor
            .checked_mul(1u32 << doublings)
            .map_or(self.cap, |ceiling| ceiling.min(self.cap))
    }

    /// Failures since the last success.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// A success: the next failure starts again from the floor.
    pub fn reset(&mut self) {
        self.attempts = 0;
    }

    /// The next number of the generator (splitmix64: good enough to spread waiters,
    /// and no dependency).
    fn random(&mut self) -> u64 {
        self.seed = self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Every delay lies between the floor and the ceiling of its attempt, the
        /// ceiling doubles up to the cap, and a reset starts from the floor again.
        #[test]
        fn delays_stay_within_the_doubling_ceiling(
            floor_ms in 1u64..500,
            cap_ms in 1u64..10_000,
            seed in any::<u64>(),
            draws in 1usize..40,
        ) {
            let (floor, cap) = (Duration::from_millis(floor_ms), Duration::from_millis(cap_ms));
            let mut backoff = Backoff::seeded(floor, cap, seed);
            let mut previous_ceiling = Duration::ZERO;
            for attempt in 0..draws {
                let ceiling = backoff.ceiling();
                prop_assert!(ceiling >= previous_ceiling, "the ceiling never falls");
                prop_assert!(ceiling <= cap.max(floor));
                let expected = floor
                    .checked_mul(1u32 << attempt.min(31))
                    .map_or(cap.max(floor), |c| c.min(cap.max(floor)));
                prop_assert_eq!(ceiling, expected);
                let delay = backoff.next_delay();
                prop_assert!(delay >= floor && delay <= ceiling, "{delay:?} outside [{floor:?}, {ceiling:?}]");
                previous_ceiling = ceiling;
            }
            prop_assert_eq!(backoff.attempts() as usize, draws);
            backoff.reset();
            prop_assert_eq!(backoff.ceiling(), floor);
        }
    }

    #[test]
    fn waiters_with_other_seeds_spread_out() {
        let (floor, cap) = (Duration::from_millis(100), Duration::from_secs(2));
        let delays: std::collections::BTreeSet<Duration> = (0..64)
            .map(|seed| {
                let mut backoff = Backoff::seeded(floor, cap, seed);
                for _ in 0..5 {
                    backoff.next_delay();
                }
                backoff.next_delay()
            })
            .collect();
        assert!(
            delays.len() > 48,
            "64 waiters drew only {} distinct delays",
            delays.len()
        );
    }
}
