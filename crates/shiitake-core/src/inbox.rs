//! The inbox state of a Session, derived from facts the owner holds.
//!
//! `needs_you` when attention waits on a person; otherwise `running` while work
//! is queued, thinking, streaming, retrying or cancelling; otherwise `errored`
//! when the latest work failed or was interrupted (its outcome unknown); otherwise
//! `done` (completed, cancelled, or never run).

use shiitake_protocol::{SessionInboxState, TerminalOutcome};

/// What the Session's work is doing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkPhase {
    /// Nothing queued or running.
    Idle,
    /// A prompt waits to start.
    Queued,
    /// The model is being asked (before its first event).
    Thinking,
    /// The model's answer is streaming.
    Streaming,
    /// A model call failed retryably and waits to try again.
    Retrying,
    /// A cancel or abort was requested and has not finished.
    Cancelling,
}

/// The facts the inbox state is derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InboxFacts {
    /// Some attention raised for this Session waits on a person.
    pub waits_on_person: bool,
    /// What the work is doing.
    pub phase: WorkPhase,
    /// How the latest settled work ended; `None` if nothing ever settled.
    pub last_outcome: Option<TerminalOutcome>,
}

/// The inbox state for these facts.
pub fn inbox_state(facts: InboxFacts) -> SessionInboxState {
    if facts.waits_on_person {
        return SessionInboxState::NeedsYou;
    }
    if facts.phase != WorkPhase::Idle {
        return SessionInboxState::Running;
    }
    match facts.last_outcome {
        Some(TerminalOutcome::Failed | TerminalOutcome::Interrupted) => SessionInboxState::Errored,
        Some(TerminalOutcome::Completed | TerminalOutcome::Cancelled) | None => {
            SessionInboxState::Done
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PHASES: [WorkPhase; 6] = [
        WorkPhase::Idle,
        WorkPhase::Queued,
        WorkPhase::Thinking,
        WorkPhase::Streaming,
        WorkPhase::Retrying,
        WorkPhase::Cancelling,
    ];
    const OUTCOMES: [Option<TerminalOutcome>; 5] = [
        None,
        Some(TerminalOutcome::Completed),
        Some(TerminalOutcome::Cancelled),
        Some(TerminalOutcome::Failed),
        Some(TerminalOutcome::Interrupted),
    ];

    /// The expected state written out independently of the implementation.
    fn expected(
        waits: bool,
        phase: WorkPhase,
        outcome: Option<TerminalOutcome>,
    ) -> SessionInboxState {
        use SessionInboxState::*;
        match (waits, phase, outcome) {
            (true, _, _) => NeedsYou,
            (false, WorkPhase::Idle, Some(TerminalOutcome::Failed)) => Errored,
            (false, WorkPhase::Idle, Some(TerminalOutcome::Interrupted)) => Errored,
            (false, WorkPhase::Idle, _) => Done,
            (false, _, _) => Running,
        }
    }

    #[test]
    fn every_combination_of_facts() {
        let mut checked = 0;
        for waits_on_person in [false, true] {
            for phase in PHASES {
                for last_outcome in OUTCOMES {
                    let facts = InboxFacts {
                        waits_on_person,
                        phase,
                        last_outcome,
                    };
                    assert_eq!(
                        inbox_state(facts),
                        expected(waits_on_person, phase, last_outcome),
                        "{facts:?}"
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 2 * 6 * 5);
    }

    #[test]
    fn spot_checks_from_the_specification() {
        let idle = |last_outcome| InboxFacts {
            waits_on_person: false,
            phase: WorkPhase::Idle,
            last_outcome,
        };
        assert_eq!(
            inbox_state(idle(None)),
            SessionInboxState::Done,
            "never run is done"
        );
        assert_eq!(
            inbox_state(idle(Some(TerminalOutcome::Cancelled))),
            SessionInboxState::Done
        );
        assert_eq!(
            inbox_state(idle(Some(TerminalOutcome::Interrupted))),
            SessionInboxState::Errored
        );
        let retrying = InboxFacts {
            phase: WorkPhase::Retrying,
            ..idle(Some(TerminalOutcome::Failed))
        };
        assert_eq!(
            inbox_state(retrying),
            SessionInboxState::Running,
            "a retry is running, not errored"
        );
    }
}
