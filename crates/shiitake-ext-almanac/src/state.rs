//! The durable rows and the pure state machine of schedules.
//!
//! Each schedule holds at most one timer. When it fires for an occurrence (its due
//! time), the schedule admits that occurrence under the request id
//! `almanac:<schedule>:<occurrence>`; the door's answer either records the
//! admission and arms the next occurrence, or records the error and arms a retry
//! of the same occurrence with backoff. A refusal touches only its own schedule.

use crate::contract::{
    AT_GRACE_MS, LastAdmission, MAX_ATTEMPTS, MAX_CADENCE_BYTES, MAX_PROMPT_BYTES, MAX_SCHEDULES,
    PendingOccurrence, RETRY_BASE_MS, RETRY_CAP_MS, RecordedError, Schedule, ScheduleId,
    ScheduleStatus, ScheduleWhen,
};

/// Collection of schedules, keyed by id.
pub const SCHEDULES: &str = "schedules";
/// Collection of each schedule's timer id, keyed by schedule id.
pub const TIMERS: &str = "timers";

/// Why a schedule change was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlmanacError {
    /// [`MAX_SCHEDULES`] exist already.
    #[error("an Agent holds at most {MAX_SCHEDULES} schedules")]
    TooMany,
    /// A blank or too long prompt.
    #[error("the prompt must be 1 to {MAX_PROMPT_BYTES} bytes of text")]
    BadPrompt,
    /// Neither or both of `at` and `cadence`.
    #[error("give exactly one of `at` and `cadence`")]
    BadWhen,
    /// A cadence longer than [`MAX_CADENCE_BYTES`].
    #[error("the cadence is longer than {MAX_CADENCE_BYTES} bytes")]
    CadenceTooLong,
    /// A one-shot `at` more than [`AT_GRACE_MS`] before now.
    #[error(
        "`at` {at} is {} s in the past (`at` is Unix milliseconds, and a one-shot schedule \
         takes a time at most {} s ago); to run the prompt now, send it",
        .now.saturating_sub(*.at) / 1000,
        AT_GRACE_MS / 1000
    )]
    InThePast {
        /// The `at` given.
        at: u64,
        /// Now, Unix milliseconds.
        now: u64,
    },
    /// No schedule with that id.
    #[error("no schedule {0}")]
    NotFound(String),
    /// The command does not apply in the schedule's status.
    #[error("the schedule is {0:?}")]
    WrongStatus(ScheduleStatus),
}

/// What the extension does besides writing the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Set the schedule's one timer for this occurrence, at this time (replacing any).
    Arm {
        /// The occurrence the timer is for.
        occurrence: u64,
        /// When it fires.
        at: u64,
    },
    /// Clear the schedule's timer.
    Disarm,
    /// Admit this occurrence into the schedule's Session.
    Admit(u64),
}

/// A schedule and the effects that go with it.
pub type Step = (Schedule, Vec<Effect>);

/// The request id (and correlation) of one occurrence: the same for every attempt.
pub fn occurrence_key(id: &ScheduleId, occurrence: u64) -> String {
    format!("almanac:{}:{occurrence}", id.0)
}

/// Reads an occurrence key back.
pub fn parse_occurrence_key(key: &str) -> Option<(ScheduleId, u64)> {
    let rest = key.strip_prefix("almanac:")?;
    let (id, occurrence) = rest.rsplit_once(':')?;
    Some((ScheduleId(id.to_owned()), occurrence.parse().ok()?))
}

/// The wait before attempt `attempts + 1`, after `attempts` refusals (at least one).
pub fn backoff(attempts: u32) -> u64 {
    let doublings = attempts.saturating_sub(1).min(32);
    RETRY_BASE_MS
        .saturating_mul(1u64 << doublings)
        .min(RETRY_CAP_MS)
}

/// Creates a schedule. `first_due` is `at`, or the cadence's first time after now
/// (computed by the caller with core's cadence grammar). A one-shot `at` up to
/// [`AT_GRACE_MS`] in the past fires at once; an earlier one is refused.
pub fn create(
    existing: usize,
    id: ScheduleId,
    session_id: String,
    prompt: String,
    when: ScheduleWhen,
    first_due: u64,
    now: u64,
) -> Result<Step, AlmanacError> {
    if existing >= MAX_SCHEDULES {
        return Err(AlmanacError::TooMany);
    }
    if prompt.trim().is_empty() || prompt.len() > MAX_PROMPT_BYTES {
        return Err(AlmanacError::BadPrompt);
    }
    match &when {
        ScheduleWhen::Cron { cadence } if cadence.len() > MAX_CADENCE_BYTES => {
            return Err(AlmanacError::CadenceTooLong);
        }
        ScheduleWhen::Once { at } if at.saturating_add(AT_GRACE_MS) < now => {
            return Err(AlmanacError::InThePast { at: *at, now });
        }
        _ => {}
    }
    let schedule = Schedule {
        id,
        session_id,
        prompt,
        when,
        status: ScheduleStatus::Active,
        created_at: now,
        next_due: Some(first_due),
        pending: None,
        admitted: 0,
        last_admission: None,
        last_error: None,
    };
    Ok((
        schedule,
        vec![Effect::Arm {
            occurrence: first_due,
            at: first_due,
        }],
    ))
}

/// The schedule's timer fired for `occurrence` (its due time, or a retry of it).
pub fn due(schedule: &Schedule, occurrence: u64) -> Step {
    if schedule.status != ScheduleStatus::Active || already_admitted(schedule, occurrence) {
        return (schedule.clone(), Vec::new());
    }
    let attempts = match &schedule.pending {
        Some(pending) if pending.occurrence == occurrence => pending.attempts,
        _ => 0,
    };
    let next = Schedule {
        pending: Some(PendingOccurrence {
            occurrence,
            attempts,
            retry_at: None,
        }),
        ..schedule.clone()
    };
    (next, vec![Effect::Admit(occurrence)])
}

fn already_admitted(schedule: &Schedule, occurrence: u64) -> bool {
    schedule
        .last_admission
        .as_ref()
        .is_some_and(|last| last.occurrence >= occurrence)
}

/// The door accepted `occurrence` as `command_id`. `next_due` is the cadence's next
/// time after the occurrence (and after now), for a recurring schedule.
pub fn accepted(
    schedule: &Schedule,
    occurrence: u64,
    command_id: String,
    next_due: Option<u64>,
) -> Step {
    if already_admitted(schedule, occurrence) {
        return (schedule.clone(), Vec::new());
    }
    let mut next = Schedule {
        admitted: schedule.admitted + 1,
        last_admission: Some(LastAdmission {
            occurrence,
            command_id,
        }),
        last_error: None,
        pending: None,
        ..schedule.clone()
    };
    match (&schedule.when, next_due) {
        (ScheduleWhen::Cron { .. }, Some(at)) => {
            next.next_due = Some(at);
            let effects = if next.status == ScheduleStatus::Active {
                vec![Effect::Arm { occurrence: at, at }]
            } else {
                Vec::new()
            };
            (next, effects)
        }
        _ => {
            next.next_due = None;
            next.status = ScheduleStatus::Done;
            (next, vec![Effect::Disarm])
        }
    }
}

/// The door refused `occurrence` at `now`: retry it with backoff, or stop the
/// schedule after [`MAX_ATTEMPTS`] refusals. Other schedules are not touched.
pub fn refused(schedule: &Schedule, occurrence: u64, error: RecordedError, now: u64) -> Step {
    if already_admitted(schedule, occurrence) || schedule.status == ScheduleStatus::Done {
        return (schedule.clone(), Vec::new());
    }
    if schedule.status == ScheduleStatus::Stopped {
        // A late answer for a stopped schedule: show it, count nothing more.
        let next = Schedule {
            last_error: Some(error),
            ..schedule.clone()
        };
        return (next, Vec::new());
    }
    let attempts = match &schedule.pending {
        Some(pending) if pending.occurrence == occurrence => pending.attempts,
        _ => 0,
    } + 1;
    let mut next = Schedule {
        last_error: Some(error),
        ..schedule.clone()
    };
    if attempts >= MAX_ATTEMPTS {
        next.pending = Some(PendingOccurrence {
            occurrence,
            attempts,
            retry_at: None,
        });
        next.status = ScheduleStatus::Stopped;
        return (next, vec![Effect::Disarm]);
    }
    let retry_at = now.saturating_add(backoff(attempts));
    next.pending = Some(PendingOccurrence {
        occurrence,
        attempts,
        retry_at: Some(retry_at),
    });
    if next.status != ScheduleStatus::Active {
        return (next, Vec::new());
    }
    (
        next,
        vec![Effect::Arm {
            occurrence,
            at: retry_at,
        }],
    )
}

/// Pauses an active schedule.
pub fn pause(schedule: &Schedule) -> Result<Step, AlmanacError> {
    if schedule.status != ScheduleStatus::Active {
        return Err(AlmanacError::WrongStatus(schedule.status));
    }
    let next = Schedule {
        status: ScheduleStatus::Paused,
        ..schedule.clone()
    };
    Ok((next, vec![Effect::Disarm]))
}

/// Resumes a paused or stopped schedule at `now`: a pending occurrence is tried again
/// at once with a fresh count of attempts; otherwise the next occurrence is armed
/// (`next_due`: the cadence's next time after now, for a recurring schedule).
pub fn resume(schedule: &Schedule, now: u64, next_due: Option<u64>) -> Result<Step, AlmanacError> {
    if !matches!(
        schedule.status,
        ScheduleStatus::Paused | ScheduleStatus::Stopped
    ) {
        return Err(AlmanacError::WrongStatus(schedule.status));
    }
    let mut next = Schedule {
        status: ScheduleStatus::Active,
        ..schedule.clone()
    };
    if let Some(pending) = &schedule.pending {
        next.pending = Some(PendingOccurrence {
            occurrence: pending.occurrence,
            attempts: 0,
            retry_at: Some(now),
        });
        let effects = vec![Effect::Arm {
            occurrence: pending.occurrence,
            at: now,
        }];
        return Ok((next, effects));
    }
    let at = match &schedule.when {
        ScheduleWhen::Once { at } => *at,
        ScheduleWhen::Cron { .. } => next_due.unwrap_or(now),
    };
    next.next_due = Some(at);
    Ok((next, vec![Effect::Arm { occurrence: at, at }]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    const T0: u64 = 1_795_996_800_000;

    fn once(at: u64) -> Schedule {
        create(
            0,
            ScheduleId("S".into()),
            "ses_x".into(),
            "water".into(),
            ScheduleWhen::Once { at },
            at,
            T0,
        )
        .unwrap()
        .0
    }

    fn error(at: u64) -> RecordedError {
        RecordedError {
            code: "not_found".into(),
            message: "no Session".into(),
            at,
        }
    }

    #[test]
    fn the_schedule_count_is_bounded_at_its_edge() {
        let make = |existing| {
            create(
                existing,
                ScheduleId("S".into()),
                "s".into(),
                "p".into(),
                ScheduleWhen::Once { at: T0 },
                T0,
                T0,
            )
        };
        assert!(make(MAX_SCHEDULES - 1).is_ok());
        assert_eq!(make(MAX_SCHEDULES), Err(AlmanacError::TooMany));
    }

    #[test]
    fn a_one_shot_at_may_lag_now_by_the_grace_and_no_more() {
        let make = |at| {
            create(
                0,
                ScheduleId("S".into()),
                "s".into(),
                "p".into(),
                ScheduleWhen::Once { at },
                at,
                T0,
            )
        };
        let (late, effects) = make(T0 - AT_GRACE_MS).unwrap();
        assert_eq!(late.next_due, Some(T0 - AT_GRACE_MS), "fires at once");
        assert_eq!(
            effects,
            vec![Effect::Arm {
                occurrence: T0 - AT_GRACE_MS,
                at: T0 - AT_GRACE_MS
            }]
        );
        let refused = make(T0 - AT_GRACE_MS - 1).unwrap_err();
        assert_eq!(
            refused,
            AlmanacError::InThePast {
                at: T0 - AT_GRACE_MS - 1,
                now: T0
            }
        );
        assert!(
            refused.to_string().contains("60 s in the past"),
            "{refused}"
        );
        // Seconds given for milliseconds read as 1970: refused, not fired.
        assert!(matches!(
            make(T0 / 1000),
            Err(AlmanacError::InThePast { .. })
        ));
    }

    #[test]
    fn backoff_doubles_from_its_base_and_is_capped() {
        let waits: Vec<u64> = (1..=9).map(backoff).collect();
        assert_eq!(
            waits,
            vec![
                30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000
            ]
        );
    }

    #[test]
    fn a_refused_occurrence_retries_then_stops_and_resume_tries_again() {
        let mut schedule = due(&once(T0), T0).0;
        let mut now = T0;
        for attempt in 1..MAX_ATTEMPTS {
            let (next, effects) = refused(&schedule, T0, error(now), now);
            let retry_at = now + backoff(attempt);
            assert_eq!(
                effects,
                vec![Effect::Arm {
                    occurrence: T0,
                    at: retry_at
                }]
            );
            assert_eq!(next.pending.as_ref().unwrap().attempts, attempt);
            now = retry_at;
            let (again, effects) = due(&next, T0);
            assert_eq!(
                effects,
                vec![Effect::Admit(T0)],
                "the same occurrence again"
            );
            schedule = again;
        }
        let (stopped, effects) = refused(&schedule, T0, error(now), now);
        assert_eq!(
            (stopped.status, effects),
            (ScheduleStatus::Stopped, vec![Effect::Disarm])
        );
        assert_eq!(stopped.last_error, Some(error(now)));
        let (resumed, effects) = resume(&stopped, now + 5, None).unwrap();
        assert_eq!(
            (resumed.status, resumed.pending.as_ref().unwrap().attempts),
            (ScheduleStatus::Active, 0)
        );
        assert_eq!(
            effects,
            vec![Effect::Arm {
                occurrence: T0,
                at: now + 5
            }]
        );
        let (done, effects) = accepted(&due(&resumed, T0).0, T0, "cmd_1".into(), None);
        assert_eq!(
            (done.status, done.admitted, done.last_error, effects),
            (ScheduleStatus::Done, 1, None, vec![Effect::Disarm])
        );
    }

    #[test]
    fn an_occurrence_is_admitted_once_even_when_answered_twice() {
        let cron = create(
            0,
            ScheduleId("C".into()),
            "s".into(),
            "p".into(),
            ScheduleWhen::Cron {
                cadence: "0 * * * *".into(),
            },
            T0 + 3_600_000,
            T0,
        )
        .unwrap()
        .0;
        let fired = due(&cron, T0 + 3_600_000).0;
        let (first, effects) =
            accepted(&fired, T0 + 3_600_000, "cmd_a".into(), Some(T0 + 7_200_000));
        assert_eq!(
            effects,
            vec![Effect::Arm {
                occurrence: T0 + 7_200_000,
                at: T0 + 7_200_000
            }]
        );
        let (twice, effects) =
            accepted(&first, T0 + 3_600_000, "cmd_a".into(), Some(T0 + 7_200_000));
        assert_eq!((twice.admitted, effects.len()), (1, 0));
        assert!(
            due(&first, T0 + 3_600_000).1.is_empty(),
            "an admitted occurrence is not admitted again"
        );
        // A stale record (another process's older copy) still records it once.
        let (stale, _) = accepted(&cron, T0 + 3_600_000, "cmd_a".into(), Some(T0 + 7_200_000));
        assert_eq!(stale.admitted, 1);
    }

    #[test]
    fn occurrence_keys_round_trip() {
        let id = ScheduleId("01JABC".into());
        assert_eq!(
            parse_occurrence_key(&occurrence_key(&id, 42)),
            Some((id, 42))
        );
        assert_eq!(parse_occurrence_key("loop:1:2"), None);
    }

    #[derive(Clone, Debug)]
    enum Event {
        Fire,
        Accept,
        Refuse,
        Pause,
        Resume,
    }

    fn any_event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::Fire),
            Just(Event::Accept),
            Just(Event::Refuse),
            Just(Event::Pause),
            Just(Event::Resume)
        ]
    }

    proptest! {
        /// A schedule never admits an occurrence it recorded as admitted, never
        /// holds more than MAX_ATTEMPTS refusals, stops exactly at MAX_ATTEMPTS, and
        /// counts every admission once.
        #[test]
        fn schedules_keep_their_rules(events in proptest::collection::vec(any_event(), 0..60)) {
            let mut schedule = once(T0);
            let mut now = T0;
            let mut admitted_occurrences = Vec::new();
            for event in events {
                now += 1_000;
                let before = schedule.clone();
                let (next, effects) = match event {
                    Event::Fire => due(&schedule, T0),
                    Event::Accept => match &schedule.pending {
                        Some(p) => accepted(&schedule, p.occurrence, "cmd".into(), None),
                        None => (schedule.clone(), Vec::new()),
                    },
                    Event::Refuse => match &schedule.pending {
                        Some(p) => refused(&schedule, p.occurrence, error(now), now),
                        None => (schedule.clone(), Vec::new()),
                    },
                    Event::Pause => pause(&schedule).unwrap_or((schedule.clone(), Vec::new())),
                    Event::Resume => resume(&schedule, now, None).unwrap_or((schedule.clone(), Vec::new())),
                };
                for effect in &effects {
                    if let Effect::Admit(occurrence) = effect {
                        prop_assert!(!admitted_occurrences.contains(occurrence));
                        prop_assert_eq!(before.status, ScheduleStatus::Active);
                    }
                }
                if next.admitted > before.admitted {
                    prop_assert_eq!(next.admitted, before.admitted + 1);
                    admitted_occurrences.push(next.last_admission.as_ref().unwrap().occurrence);
                }
                if let Some(p) = &next.pending {
                    prop_assert!(p.attempts <= MAX_ATTEMPTS);
                    if p.attempts == MAX_ATTEMPTS {
                        prop_assert_eq!(next.status, ScheduleStatus::Stopped);
                    }
                }
                if next.status == ScheduleStatus::Done {
                    prop_assert_eq!(next.admitted, 1);
                    prop_assert!(next.pending.is_none());
                }
                schedule = next;
            }
        }
    }
}
