//! The durable rows and the pure state machine: plain functions over values.

use serde::{Deserialize, Serialize};

use crate::contract::{
    ClearedBy, MAX_HISTORY, MAX_STEP_BYTES, MAX_STEPS, PlanEnd, PlanStep, StepStatus,
};

/// Collection and key of the live plan.
pub const CURRENT: (&str, &str) = ("plan", "current");
/// Collection of finished and cleared plans, keyed by zero-padded revision.
pub const HISTORY: &str = "history";

/// Why an update was refused; the model is told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// More than [`MAX_STEPS`] steps.
    #[error("a plan has at most {MAX_STEPS} steps; this one has {0}")]
    TooManySteps(usize),
    /// More than one step in progress.
    #[error("at most one step may be in progress; {0} are")]
    SeveralInProgress(usize),
    /// A step with no text.
    #[error("step {0} has no text")]
    BlankStep(usize),
    /// A step longer than [`MAX_STEP_BYTES`].
    #[error("step {index} is {bytes} bytes; at most {MAX_STEP_BYTES}")]
    StepTooLong {
        /// Its position, from 1.
        index: usize,
        /// Its length.
        bytes: usize,
    },
}

/// The live plan of a Session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanRecord {
    /// One more with every update.
    pub revision: u64,
    /// The checklist.
    pub steps: Vec<PlanStep>,
    /// Whether a person opened the full checklist since the last update.
    pub expanded: bool,
    /// Unix milliseconds of the last change.
    pub updated_at: u64,
}

/// A plan that left the footer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// Its last revision.
    pub revision: u64,
    /// Its steps when it ended.
    pub steps: Vec<PlanStep>,
    /// How it ended.
    pub end: PlanEnd,
    /// Unix milliseconds when it ended.
    pub ended_at: u64,
}

/// What a change does to the stored rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The live plan afterwards (`None`: no plan is live).
    pub current: Option<PlanRecord>,
    /// A plan that ended with this change, for the history.
    pub ended: Option<HistoryEntry>,
}

/// Checks a whole checklist against the bounds.
pub fn validate(steps: &[PlanStep]) -> Result<(), PlanError> {
    if steps.len() > MAX_STEPS {
        return Err(PlanError::TooManySteps(steps.len()));
    }
    let in_progress = steps
        .iter()
        .filter(|s| s.status == StepStatus::InProgress)
        .count();
    if in_progress > 1 {
        return Err(PlanError::SeveralInProgress(in_progress));
    }
    for (index, step) in steps.iter().enumerate() {
        if step.step.trim().is_empty() {
            return Err(PlanError::BlankStep(index + 1));
        }
        if step.step.len() > MAX_STEP_BYTES {
            return Err(PlanError::StepTooLong {
                index: index + 1,
                bytes: step.step.len(),
            });
        }
    }
    Ok(())
}

/// Whether every step is completed (a plan with steps).
pub fn finished(steps: &[PlanStep]) -> bool {
    !steps.is_empty() && steps.iter().all(|s| s.status == StepStatus::Completed)
}

/// The last revision used, live or in the history.
fn next_revision(current: Option<&PlanRecord>, last_revision: u64) -> u64 {
    current.map_or(last_revision, |c| c.revision.max(last_revision)) + 1
}

/// `plan.update_plan`: replaces the checklist whole. `[]` clears it (by the model);
/// a checklist with every step completed finishes it. Either leaves the footer and
/// goes to the history.
pub fn update(
    current: Option<&PlanRecord>,
    last_revision: u64,
    steps: Vec<PlanStep>,
    now: u64,
) -> Result<Change, PlanError> {
    validate(&steps)?;
    let revision = next_revision(current, last_revision);
    if steps.is_empty() {
        return Ok(clear(current, ClearedBy::Model, now));
    }
    if finished(&steps) {
        return Ok(Change {
            current: None,
            ended: Some(HistoryEntry {
                revision,
                steps,
                end: PlanEnd::Finished,
                ended_at: now,
            }),
        });
    }
    Ok(Change {
        current: Some(PlanRecord {
            revision,
            steps,
            expanded: false,
            updated_at: now,
        }),
        ended: None,
    })
}

/// Clears the live plan, if there is one.
pub fn clear(current: Option<&PlanRecord>, by: ClearedBy, now: u64) -> Change {
    Change {
        current: None,
        ended: current.map(|plan| HistoryEntry {
            revision: plan.revision,
            steps: plan.steps.clone(),
            end: PlanEnd::Cleared { by },
            ended_at: now,
        }),
    }
}

/// `/plan`: opens the full checklist until the next update.
pub fn open(current: Option<&PlanRecord>) -> Option<PlanRecord> {
    current.map(|plan| PlanRecord {
        expanded: true,
        ..plan.clone()
    })
}

/// The history key of a revision: zero-padded so keys sort by revision.
pub fn history_key(revision: u64) -> String {
    format!("{revision:020}")
}

/// History keys to drop so that at most [`MAX_HISTORY`] remain after adding one.
pub fn history_overflow(mut keys: Vec<String>) -> Vec<String> {
    keys.sort();
    let keep = MAX_HISTORY.saturating_sub(1);
    let drop = keys.len().saturating_sub(keep);
    keys.truncate(drop);
    keys
}

/// The step shown in the footer: the one in progress, else the first pending one.
pub fn current_step(steps: &[PlanStep]) -> Option<&PlanStep> {
    steps
        .iter()
        .find(|s| s.status == StepStatus::InProgress)
        .or_else(|| steps.iter().find(|s| s.status == StepStatus::Pending))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn step(text: &str, status: StepStatus) -> PlanStep {
        PlanStep {
            step: text.into(),
            status,
        }
    }

    fn steps(n: usize, in_progress: usize) -> Vec<PlanStep> {
        (0..n)
            .map(|i| {
                let status = if i < in_progress {
                    StepStatus::InProgress
                } else {
                    StepStatus::Pending
                };
                step(&format!("step {i}"), status)
            })
            .collect()
    }

    #[test]
    fn fifty_steps_pass_and_fifty_one_do_not() {
        assert!(validate(&steps(50, 0)).is_ok());
        assert_eq!(validate(&steps(51, 0)), Err(PlanError::TooManySteps(51)));
    }

    #[test]
    fn zero_or_one_step_in_progress_pass_and_two_do_not() {
        assert!(validate(&steps(3, 0)).is_ok());
        assert!(validate(&steps(3, 1)).is_ok());
        assert_eq!(validate(&steps(3, 2)), Err(PlanError::SeveralInProgress(2)));
    }

    #[test]
    fn step_text_is_bounded_and_not_blank() {
        let at_bound = "é".repeat(MAX_STEP_BYTES / 2);
        assert!(validate(&[step(&at_bound, StepStatus::Pending)]).is_ok());
        let over = format!("{at_bound}x");
        assert_eq!(
            validate(&[step(&over, StepStatus::Pending)]),
            Err(PlanError::StepTooLong {
                index: 1,
                bytes: MAX_STEP_BYTES + 1
            })
        );
        assert_eq!(
            validate(&[step("  ", StepStatus::Pending)]),
            Err(PlanError::BlankStep(1))
        );
    }

    #[test]
    fn an_update_replaces_a_finished_plan_ends_and_empty_clears() {
        let first = update(None, 0, steps(2, 1), 10).unwrap();
        let live = first.current.clone().unwrap();
        assert_eq!((live.revision, first.ended.clone()), (1, None));
        let opened = open(Some(&live)).unwrap();
        assert!(opened.expanded);
        let second = update(Some(&opened), 1, steps(3, 0), 20).unwrap();
        let second_live = second.current.unwrap();
        assert_eq!(second_live.revision, 2);
        assert!(!second_live.expanded, "an update closes the checklist");
        let done = vec![
            step("a", StepStatus::Completed),
            step("b", StepStatus::Completed),
        ];
        let finished_change = update(Some(&second_live), 2, done.clone(), 30).unwrap();
        assert_eq!(
            finished_change,
            Change {
                current: None,
                ended: Some(HistoryEntry {
                    revision: 3,
                    steps: done,
                    end: PlanEnd::Finished,
                    ended_at: 30
                })
            }
        );
        let cleared = update(Some(&second_live), 2, Vec::new(), 40).unwrap();
        assert_eq!(
            cleared.ended.unwrap().end,
            PlanEnd::Cleared {
                by: ClearedBy::Model
            }
        );
        assert_eq!(update(None, 5, Vec::new(), 1).unwrap().ended, None);
    }

    #[test]
    fn history_keeps_at_most_its_bound() {
        let keys: Vec<String> = (1..=MAX_HISTORY as u64).map(history_key).collect();
        assert_eq!(history_overflow(keys.clone()), vec![history_key(1)]);
        let fewer: Vec<String> = keys[..MAX_HISTORY - 1].to_vec();
        assert!(history_overflow(fewer).is_empty());
    }

    fn any_status() -> impl Strategy<Value = StepStatus> {
        prop_oneof![
            Just(StepStatus::Pending),
            Just(StepStatus::InProgress),
            Just(StepStatus::Completed)
        ]
    }

    fn any_steps() -> impl Strategy<Value = Vec<PlanStep>> {
        proptest::collection::vec(
            ("[a-z ]{0,12}", any_status()).prop_map(|(text, status)| step(&text, status)),
            0..60,
        )
    }

    proptest! {
        /// Whatever the model sends, the live plan afterwards obeys the bounds,
        /// revisions only grow, and a plan leaves the footer exactly when it is
        /// finished or emptied.
        #[test]
        fn updates_keep_every_rule(updates in proptest::collection::vec(any_steps(), 1..12)) {
            let mut current: Option<PlanRecord> = None;
            let mut last = 0;
            for (n, steps) in updates.into_iter().enumerate() {
                let outcome = update(current.as_ref(), last, steps.clone(), n as u64);
                match outcome {
                    Err(_) => prop_assert!(validate(&steps).is_err()),
                    Ok(change) => {
                        prop_assert!(validate(&steps).is_ok());
                        if let Some(live) = &change.current {
                            prop_assert!(validate(&live.steps).is_ok());
                            prop_assert!(!live.steps.is_empty() && !finished(&live.steps));
                            prop_assert!(live.revision > last);
                            last = live.revision;
                        } else {
                            prop_assert!(steps.is_empty() || finished(&steps));
                        }
                        if let Some(ended) = &change.ended {
                            last = last.max(ended.revision);
                        }
                        prop_assert_eq!(change.ended.is_some(), (steps.is_empty() && current.is_some()) || finished(&steps));
                        current = change.current;
                    }
                }
            }
        }
    }
}
