//! The durable rows and the pure state machine of a loop: functions from a record
//! and an event to the next record and the effects to carry out.
//!
//! The rule for overlap, written down: **an occurrence that comes due while the
//! previous one is still queued or running (`inFlight`) is recorded (`skipped`
//! goes up by one), not admitted**; the next occurrence after the previous one
//! settled is admitted as usual. A loop never has two occurrences in the queue.

use crate::contract::{
    CRON_LIFETIME_MS, LoopEnd, LoopMode, LoopRecord, LoopStatus, MAX_CADENCE_BYTES,
    MAX_DELAY_SECONDS, MAX_PROMPT_BYTES, StoppedBy,
};

/// Collection and key of the Session's loop.
pub const CURRENT: (&str, &str) = ("loop", "current");
/// Collection and key of the loop's timer ids.
pub const TIMERS: (&str, &str) = ("loop", "timers");

/// Why a loop change was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoopError {
    /// One loop per Session.
    #[error("a loop is already {0}; stop it first")]
    AlreadyRunning(&'static str),
    /// Nothing to pause, resume or stop.
    #[error("no loop is {0}")]
    NoLoop(&'static str),
    /// A blank or too long prompt.
    #[error("the prompt must be 1 to {MAX_PROMPT_BYTES} bytes of text")]
    BadPrompt,
    /// A cadence longer than [`MAX_CADENCE_BYTES`].
    #[error("the cadence is longer than {MAX_CADENCE_BYTES} bytes")]
    CadenceTooLong,
    /// `loop.schedule_next` outside the active self-paced loop's own run.
    #[error("loop.schedule_next is accepted only in the active self-paced loop's own run")]
    NotThisRun,
    /// A wait longer than [`MAX_DELAY_SECONDS`].
    #[error("the delay is at most {MAX_DELAY_SECONDS} seconds")]
    DelayTooLong,
}

/// What the extension does besides writing the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Admit occurrence `n` of the loop (a follow-up tagged `loop:<id>:<n>`).
    Admit(u64),
    /// Set the cron cadence timer.
    ArmCadence(String),
    /// Set the one-shot timer of the next self-paced occurrence.
    ArmNext(u64),
    /// Set the expiry timer.
    ArmExpiry(u64),
    /// Clear the occurrence timer (cadence or next).
    DisarmOccurrence,
    /// Clear every timer of the loop.
    DisarmAll,
}

/// A record and the effects that go with it.
pub type Step = (LoopRecord, Vec<Effect>);

/// The correlation of occurrence `n` of loop `id`.
pub fn correlation(id: &str, n: u64) -> String {
    format!("loop:{id}:{n}")
}

/// Reads a correlation back: (loop id, occurrence).
pub fn parse_correlation(correlation: &str) -> Option<(&str, u64)> {
    let rest = correlation.strip_prefix("loop:")?;
    let (id, n) = rest.rsplit_once(':')?;
    Some((id, n.parse().ok()?))
}

fn live(record: Option<&LoopRecord>) -> Option<&LoopRecord> {
    record.filter(|r| r.status != LoopStatus::Ended)
}

fn ended(record: &LoopRecord, end: LoopEnd) -> Step {
    let record = LoopRecord {
        status: LoopStatus::Ended,
        end: Some(end),
        next_due: None,
        next_requested_ms: None,
        ..record.clone()
    };
    (record, vec![Effect::DisarmAll])
}

/// Starts a loop; `cadence` was checked by the caller (core's cadence grammar).
pub fn start(
    existing: Option<&LoopRecord>,
    id: String,
    prompt: String,
    mode: LoopMode,
    now: u64,
) -> Result<Step, LoopError> {
    if let Some(live) = live(existing) {
        return Err(LoopError::AlreadyRunning(match live.status {
            LoopStatus::Paused => "paused",
            _ => "active",
        }));
    }
    if prompt.trim().is_empty() || prompt.len() > MAX_PROMPT_BYTES {
        return Err(LoopError::BadPrompt);
    }
    let mut record = LoopRecord {
        id,
        prompt,
        mode: mode.clone(),
        status: LoopStatus::Active,
        started_at: now,
        expires_at: None,
        occurrences: 0,
        in_flight: None,
        skipped: 0,
        next_due: None,
        next_requested_ms: None,
        end: None,
    };
    match mode {
        LoopMode::Cron { cadence } => {
            if cadence.len() > MAX_CADENCE_BYTES {
                return Err(LoopError::CadenceTooLong);
            }
            let expires = now.saturating_add(CRON_LIFETIME_MS);
            record.expires_at = Some(expires);
            Ok((
                record,
                vec![Effect::ArmCadence(cadence), Effect::ArmExpiry(expires)],
            ))
        }
        LoopMode::SelfPaced => {
            record.occurrences = 1;
            record.in_flight = Some(1);
            Ok((record, vec![Effect::Admit(1)]))
        }
    }
}

/// Whether a cron loop has expired at `at`: seven days after it started, exactly.
pub fn expired(record: &LoopRecord, at: u64) -> bool {
    record.expires_at.is_some_and(|expires| at >= expires)
}

/// An occurrence timer came due at `due_at` (a cadence or a self-paced next).
pub fn occurrence_due(record: &LoopRecord, due_at: u64, next_due: Option<u64>) -> Step {
    if record.status != LoopStatus::Active {
        return (record.clone(), Vec::new());
    }
    if expired(record, due_at) {
        return ended(record, LoopEnd::Expired);
    }
    let mut next = LoopRecord {
        next_due,
        ..record.clone()
    };
    if record.in_flight.is_some() {
        next.skipped += 1;
        return (next, Vec::new());
    }
    next.occurrences += 1;
    next.in_flight = Some(next.occurrences);
    let effects = vec![Effect::Admit(next.occurrences)];
    (next, effects)
}

/// The expiry timer came due at `at`.
pub fn expiry_due(record: &LoopRecord, at: u64) -> Step {
    if record.status != LoopStatus::Ended && expired(record, at) {
        ended(record, LoopEnd::Expired)
    } else {
        (record.clone(), Vec::new())
    }
}

/// `loop.schedule_next` in the run of occurrence `run` (`None`: not a loop run).
pub fn schedule_next(
    record: Option<&LoopRecord>,
    run: Option<(&str, u64)>,
    delay_seconds: u64,
) -> Result<LoopRecord, LoopError> {
    if delay_seconds > MAX_DELAY_SECONDS {
        return Err(LoopError::DelayTooLong);
    }
    let record = record.ok_or(LoopError::NotThisRun)?;
    let own_run = matches!(run, Some((id, n)) if id == record.id && record.in_flight == Some(n));
    if record.status != LoopStatus::Active || record.mode != LoopMode::SelfPaced || !own_run {
        return Err(LoopError::NotThisRun);
    }
    Ok(LoopRecord {
        next_requested_ms: Some(delay_seconds * 1000),
        ..record.clone()
    })
}

/// How an occurrence's run settled, as far as a loop cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// It ran to an end (completed, failed, interrupted).
    Ended,
    /// A person cancelled it.
    Cancelled,
}

/// Occurrence `n` of this loop settled at `now`.
pub fn settled(record: &LoopRecord, n: u64, settlement: Settlement, now: u64) -> Step {
    if record.in_flight != Some(n) {
        return (record.clone(), Vec::new());
    }
    let mut next = LoopRecord {
        in_flight: None,
        ..record.clone()
    };
    if next.mode != LoopMode::SelfPaced || next.status != LoopStatus::Active {
        return (next, Vec::new());
    }
    if settlement == Settlement::Cancelled {
        // A person stopped the occurrence: the loop waits for them.
        next.status = LoopStatus::Paused;
        next.next_requested_ms = None;
        return (next, Vec::new());
    }
    match next.next_requested_ms.take() {
        Some(delay) => {
            let at = now.saturating_add(delay);
            next.next_due = Some(at);
            (next, vec![Effect::ArmNext(at)])
        }
        None => ended(&next, LoopEnd::NoNextOccurrence),
    }
}

/// Pauses the live loop.
pub fn pause(record: Option<&LoopRecord>) -> Result<Step, LoopError> {
    let record = live(record)
        .filter(|r| r.status == LoopStatus::Active)
        .ok_or(LoopError::NoLoop("active"))?;
    let next = LoopRecord {
        status: LoopStatus::Paused,
        next_due: None,
        ..record.clone()
    };
    Ok((next, vec![Effect::DisarmOccurrence]))
}

/// Resumes a paused loop at `now`.
pub fn resume(record: Option<&LoopRecord>, now: u64) -> Result<Step, LoopError> {
    let record = live(record)
        .filter(|r| r.status == LoopStatus::Paused)
        .ok_or(LoopError::NoLoop("paused"))?;
    if expired(record, now) {
        return Ok(ended(record, LoopEnd::Expired));
    }
    let mut next = LoopRecord {
        status: LoopStatus::Active,
        ..record.clone()
    };
    match &record.mode {
        LoopMode::Cron { cadence } => Ok((next, vec![Effect::ArmCadence(cadence.clone())])),
        LoopMode::SelfPaced if record.in_flight.is_some() => Ok((next, Vec::new())),
        LoopMode::SelfPaced => {
            next.occurrences += 1;
            next.in_flight = Some(next.occurrences);
            let effects = vec![Effect::Admit(next.occurrences)];
            Ok((next, effects))
        }
    }
}

/// Stops the live loop.
pub fn stop(record: Option<&LoopRecord>, by: StoppedBy) -> Result<Step, LoopError> {
    let record = live(record).ok_or(LoopError::NoLoop("running"))?;
    Ok(ended(record, LoopEnd::Stopped { by }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    const T0: u64 = 1_795_996_800_000;

    fn cron() -> LoopRecord {
        start(
            None,
            "L".into(),
            "check".into(),
            LoopMode::Cron {
                cadence: "*/5 * * * *".into(),
            },
            T0,
        )
        .unwrap()
        .0
    }

    fn self_paced() -> LoopRecord {
        start(None, "S".into(), "again".into(), LoopMode::SelfPaced, T0)
            .unwrap()
            .0
    }

    #[test]
    fn a_cron_loop_expires_seven_days_after_it_starts_exactly() {
        let record = cron();
        assert_eq!(record.expires_at, Some(T0 + CRON_LIFETIME_MS));
        let (before, effects) = occurrence_due(&record, T0 + CRON_LIFETIME_MS - 1, None);
        assert_eq!(
            (before.status, effects),
            (LoopStatus::Active, vec![Effect::Admit(1)])
        );
        let (at, effects) = occurrence_due(&record, T0 + CRON_LIFETIME_MS, None);
        assert_eq!(
            (at.status, at.end, effects),
            (
                LoopStatus::Ended,
                Some(LoopEnd::Expired),
                vec![Effect::DisarmAll]
            )
        );
        assert_eq!(
            expiry_due(&record, T0 + CRON_LIFETIME_MS - 1).0.status,
            LoopStatus::Active
        );
        assert_eq!(
            expiry_due(&record, T0 + CRON_LIFETIME_MS).0.end,
            Some(LoopEnd::Expired)
        );
        // Resuming a paused cron loop after its seventh day ends it.
        let paused = pause(Some(&record)).unwrap().0;
        assert_eq!(
            resume(Some(&paused), T0 + CRON_LIFETIME_MS).unwrap().0.end,
            Some(LoopEnd::Expired)
        );
        assert_eq!(
            resume(Some(&paused), T0 + CRON_LIFETIME_MS - 1).unwrap().1,
            vec![Effect::ArmCadence("*/5 * * * *".into())]
        );
    }

    #[test]
    fn an_occurrence_due_while_one_is_in_flight_is_recorded_not_stacked() {
        let (first, effects) = occurrence_due(&cron(), T0 + 1, Some(T0 + 2));
        assert_eq!(effects, vec![Effect::Admit(1)]);
        let (second, effects) = occurrence_due(&first, T0 + 2, Some(T0 + 3));
        assert_eq!((second.skipped, second.in_flight), (1, Some(1)));
        assert!(effects.is_empty());
        let (settled_one, _) = settled(&second, 1, Settlement::Ended, T0 + 3);
        let (third, effects) = occurrence_due(&settled_one, T0 + 3, None);
        assert_eq!(
            (third.occurrences, third.in_flight, effects),
            (2, Some(2), vec![Effect::Admit(2)])
        );
    }

    #[test]
    fn schedule_next_only_in_the_active_self_paced_loops_own_run() {
        let record = self_paced();
        assert_eq!(record.in_flight, Some(1));
        assert!(schedule_next(Some(&record), Some(("S", 1)), 60).is_ok());
        assert_eq!(
            schedule_next(Some(&record), Some(("S", 2)), 60),
            Err(LoopError::NotThisRun)
        );
        assert_eq!(
            schedule_next(Some(&record), Some(("other", 1)), 60),
            Err(LoopError::NotThisRun)
        );
        assert_eq!(
            schedule_next(Some(&record), None, 60),
            Err(LoopError::NotThisRun)
        );
        assert_eq!(
            schedule_next(Some(&cron()), Some(("L", 0)), 60),
            Err(LoopError::NotThisRun)
        );
        assert!(schedule_next(Some(&record), Some(("S", 1)), MAX_DELAY_SECONDS).is_ok());
        assert_eq!(
            schedule_next(Some(&record), Some(("S", 1)), MAX_DELAY_SECONDS + 1),
            Err(LoopError::DelayTooLong)
        );
    }

    #[test]
    fn a_self_paced_loop_continues_when_asked_and_ends_when_not() {
        let record = self_paced();
        let asked = schedule_next(Some(&record), Some(("S", 1)), 60).unwrap();
        let (waiting, effects) = settled(&asked, 1, Settlement::Ended, T0 + 10);
        assert_eq!(effects, vec![Effect::ArmNext(T0 + 10 + 60_000)]);
        assert_eq!((waiting.in_flight, waiting.next_requested_ms), (None, None));
        let (second, effects) = occurrence_due(&waiting, T0 + 70_010, None);
        assert_eq!(effects, vec![Effect::Admit(2)]);
        let (over, effects) = settled(&second, 2, Settlement::Ended, T0 + 80_000);
        assert_eq!(
            (over.status, over.end, effects),
            (
                LoopStatus::Ended,
                Some(LoopEnd::NoNextOccurrence),
                vec![Effect::DisarmAll]
            )
        );
        // A cancelled occurrence pauses the loop.
        let (paused, _) = settled(&record, 1, Settlement::Cancelled, T0);
        assert_eq!(paused.status, LoopStatus::Paused);
    }

    #[test]
    fn one_loop_per_session_and_bounds_on_the_prompt() {
        let record = cron();
        assert_eq!(
            start(
                Some(&record),
                "x".into(),
                "p".into(),
                LoopMode::SelfPaced,
                T0
            ),
            Err(LoopError::AlreadyRunning("active"))
        );
        let stopped = stop(Some(&record), StoppedBy::Person).unwrap().0;
        assert!(
            start(
                Some(&stopped),
                "x".into(),
                "p".into(),
                LoopMode::SelfPaced,
                T0
            )
            .is_ok()
        );
        let at_bound = "a".repeat(MAX_PROMPT_BYTES);
        assert!(start(None, "x".into(), at_bound.clone(), LoopMode::SelfPaced, T0).is_ok());
        assert_eq!(
            start(
                None,
                "x".into(),
                format!("{at_bound}a"),
                LoopMode::SelfPaced,
                T0
            ),
            Err(LoopError::BadPrompt)
        );
        assert_eq!(
            start(None, "x".into(), " ".into(), LoopMode::SelfPaced, T0),
            Err(LoopError::BadPrompt)
        );
        assert_eq!(
            stop(Some(&stopped), StoppedBy::Model),
            Err(LoopError::NoLoop("running"))
        );
    }

    #[test]
    fn correlations_round_trip() {
        assert_eq!(
            parse_correlation(&correlation("01ABC", 7)),
            Some(("01ABC", 7))
        );
        assert_eq!(parse_correlation("goal:3"), None);
        assert_eq!(parse_correlation("loop:x:y"), None);
    }

    #[derive(Clone, Debug)]
    enum Event {
        Due(u64),
        Settle(Settlement),
        Ask(u64),
        Pause,
        Resume,
        Stop,
        Expire,
    }

    fn any_event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0u64..CRON_LIFETIME_MS * 2).prop_map(Event::Due),
            prop_oneof![Just(Settlement::Ended), Just(Settlement::Cancelled)]
                .prop_map(Event::Settle),
            (0u64..=MAX_DELAY_SECONDS + 1).prop_map(Event::Ask),
            Just(Event::Pause),
            Just(Event::Resume),
            Just(Event::Stop),
            Just(Event::Expire),
        ]
    }

    proptest! {
        /// Whatever happens, a loop never has two occurrences in flight, never
        /// admits while one is in flight, counts every occurrence it admits, and an
        /// ended loop stays ended with a reason and no timer.
        #[test]
        fn loops_keep_their_rules(cron_mode in any::<bool>(), events in proptest::collection::vec(any_event(), 0..40)) {
            let mut record = if cron_mode { cron() } else { self_paced() };
            let mut now = T0;
            for event in events {
                let before = record.clone();
                let (next, effects) = match event {
                    Event::Due(offset) => {
                        now = now.max(T0 + offset);
                        occurrence_due(&record, now, None)
                    }
                    Event::Settle(how) => match record.in_flight {
                        Some(n) => settled(&record, n, how, now),
                        None => (record.clone(), Vec::new()),
                    },
                    Event::Ask(delay) => {
                        let run = record.in_flight.map(|n| (record.id.as_str(), n));
                        match schedule_next(Some(&record), run, delay) {
                            Ok(next) => (next, Vec::new()),
                            Err(_) => (record.clone(), Vec::new()),
                        }
                    }
                    Event::Pause => pause(Some(&record)).unwrap_or((record.clone(), Vec::new())),
                    Event::Resume => resume(Some(&record), now).unwrap_or((record.clone(), Vec::new())),
                    Event::Stop => stop(Some(&record), StoppedBy::Person).unwrap_or((record.clone(), Vec::new())),
                    Event::Expire => expiry_due(&record, now),
                };
                let admitted: Vec<u64> = effects.iter().filter_map(|e| match e { Effect::Admit(n) => Some(*n), _ => None }).collect();
                prop_assert!(admitted.len() <= 1);
                if let Some(n) = admitted.first() {
                    prop_assert_eq!(before.in_flight, None, "admitted while one was in flight");
                    prop_assert_eq!(*n, before.occurrences + 1);
                    prop_assert_eq!(next.in_flight, Some(*n));
                }
                prop_assert!(next.occurrences >= before.occurrences);
                prop_assert!(next.skipped >= before.skipped);
                if before.status == LoopStatus::Ended {
                    prop_assert_eq!(next.status, LoopStatus::Ended, "an ended loop stays ended");
                    prop_assert_eq!(next.end, before.end);
                    prop_assert!(effects.is_empty());
                }
                if next.status == LoopStatus::Ended {
                    prop_assert!(next.end.is_some());
                    if before.status != LoopStatus::Ended {
                        prop_assert!(effects.contains(&Effect::DisarmAll));
                    }
                }
                if let Some(expires) = next.expires_at {
                    prop_assert_eq!(expires, T0 + CRON_LIFETIME_MS);
                }
                record = next;
            }
        }
    }
}
