//! What a Session remembers of its closed Asks, and the kinds of refusal a request
//! for an Ask gets: enough to tell a late answer that it lost (`conflict`), apart from
//! an id the Session never held (`not_found`) and a malformed request (`invalid`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::contract::{AskId, MAX_CLOSED_REMEMBERED};
use crate::validate::Refused;

/// How a closed Ask ended, as a late request is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Closure {
    /// A person or the sending Agent answered it.
    Answered,
    /// A person declined it.
    Declined,
    /// Its `onExpire` came due.
    Expired,
    /// The model withdrew it.
    Withdrawn,
}

impl Closure {
    fn phrase(self) -> &'static str {
        match self {
            Closure::Answered => "was already answered",
            Closure::Declined => "was already declined",
            Closure::Expired => "has already expired",
            Closure::Withdrawn => "was withdrawn by the model",
        }
    }
}

/// What the book remembers of a closed Ask (collection `closed`, keyed by its id):
/// enough to tell a late answer that it lost, and nothing to deliver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClosedAsk {
    /// How it closed.
    pub how: Closure,
    /// Order of closing in this Session; the lowest is forgotten first.
    pub seq: u64,
}

/// Why a transition refused, by kind: each answers the caller with its own code, so a
/// client tells a malformed request from one naming nothing or one that lost a race.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// The request breaks a rule (a bound, an unoffered label, the wrong sender): `invalid`.
    #[error(transparent)]
    Invalid(#[from] Refused),
    /// The Session holds no Ask with this id, open or recently closed: `not_found`.
    #[error("no open question {0}: this Session holds no question with that id")]
    Unknown(AskId),
    /// The Ask closed before this request came: `conflict`.
    #[error("question {ask_id} {}", how.phrase())]
    Closed {
        /// The Ask.
        ask_id: AskId,
        /// How it closed.
        how: Closure,
    },
}

/// Records that `ask_id` closed, forgetting the oldest record beyond
/// [`MAX_CLOSED_REMEMBERED`].
pub(crate) fn remember(closed: &mut BTreeMap<AskId, ClosedAsk>, ask_id: &AskId, how: Closure) {
    let seq = closed.values().map(|c| c.seq + 1).max().unwrap_or(0);
    closed.insert(ask_id.clone(), ClosedAsk { how, seq });
    while closed.len() > MAX_CLOSED_REMEMBERED {
        let oldest = closed
            .iter()
            .min_by_key(|(_, record)| record.seq)
            .map(|(id, _)| id.clone());
        match oldest {
            Some(id) => closed.remove(&id),
            None => break,
        };
    }
}
