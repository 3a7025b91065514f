//! The fixed words a store writes for core's enums, each pair written once.
//!
//! A database column holds `running`, not `CommandState::Running`. Every enum a
//! store writes as text gets its table here, in one [`words!`] invocation that
//! yields both directions: the encoding `match` has no wildcard, so a new variant
//! does not compile until it has a word, and decoding is derived from the same
//! table, so the two cannot drift. Every backend (SQLite, PostgreSQL) reads and
//! writes through [`StoredWord`].

use shiitake_protocol::{SessionInboxState, TerminalOutcome};

use super::StateScope;
use super::{CommandKind, CommandState, TimerKind};

/// An enum a store writes as one fixed word.
pub trait StoredWord: Sized + Copy + 'static {
    /// Every value, in declaration order (for tests and for listing the words).
    const ALL: &'static [Self];

    /// The word stored for this value.
    fn word(self) -> &'static str;

    /// The value stored as `word`; `None` for a word no build of this enum wrote.
    fn from_word(word: &str) -> Option<Self>;
}

/// Implements [`StoredWord`] for an enum from one table of `variant => word`.
macro_rules! words {
    ($ty:ty { $($variant:path => $word:literal),+ $(,)? }) => {
        impl StoredWord for $ty {
            const ALL: &'static [Self] = &[$($variant),+];

            fn word(self) -> &'static str {
                match self {
                    $($variant => $word),+
                }
            }

            fn from_word(word: &str) -> Option<Self> {
                match word {
                    $($word => Some($variant),)+
                    _ => None,
                }
            }
        }
    };
}

words!(StateScope {
    StateScope::Session => "session",
    StateScope::Agent => "agent",
});

words!(CommandKind {
    CommandKind::Prompt => "prompt",
    CommandKind::Operator => "operator",
});

words!(CommandState {
    CommandState::Pending => "pending",
    CommandState::Running => "running",
    CommandState::Settled => "settled",
});

words!(TimerKind {
    TimerKind::Hook => "hook",
    TimerKind::Admission => "admission",
});

words!(SessionInboxState {
    SessionInboxState::NeedsYou => "needs_you",
    SessionInboxState::Running => "running",
    SessionInboxState::Errored => "errored",
    SessionInboxState::Done => "done",
});

words!(TerminalOutcome {
    TerminalOutcome::Completed => "completed",
    TerminalOutcome::Cancelled => "cancelled",
    TerminalOutcome::Failed => "failed",
    TerminalOutcome::Interrupted => "interrupted",
});

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::fmt::Debug;

    use super::*;

    fn round_trips<T: StoredWord + PartialEq + Debug>() {
        let mut seen = HashSet::new();
        for &value in T::ALL {
            let word = value.word();
            assert!(seen.insert(word), "{word:?} names two values");
            assert_eq!(T::from_word(word), Some(value));
        }
        assert_eq!(T::from_word(""), None);
        assert_eq!(T::from_word("Unknown"), None);
    }

    #[test]
    fn every_word_decodes_to_its_value_and_no_two_share_a_word() {
        round_trips::<StateScope>();
        round_trips::<CommandKind>();
        round_trips::<CommandState>();
        round_trips::<TimerKind>();
        round_trips::<SessionInboxState>();
        round_trips::<TerminalOutcome>();
    }

    #[test]
    fn the_words_are_the_wire_words_where_the_wire_has_them() {
        // Terminal outcomes and inbox states are also wire values: the stored word is
        // the same text serde writes, so old rows and wire payloads agree.
        for &outcome in TerminalOutcome::ALL {
            let wire = serde_json::to_value(outcome).unwrap();
            assert_eq!(wire, serde_json::json!(outcome.word()));
        }
        for &state in SessionInboxState::ALL {
            let wire = serde_json::to_value(state).unwrap();
            assert_eq!(wire, serde_json::json!(state.word()));
        }
    }

    #[test]
    fn words_are_case_sensitive() {
        assert_eq!(CommandState::from_word("Running"), None);
        assert_eq!(StateScope::from_word("AGENT"), None);
    }
}
