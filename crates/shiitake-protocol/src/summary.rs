//! The inbox: one bounded page of saved Sessions.

use serde::{Deserialize, Serialize};

use crate::bounded::{Cursor, SessionId};

/// Where a Session stands for the person looking at their inbox.
///
/// `running` covers queued, thinking, streaming, retrying and cancelling;
/// `errored` covers failed, interrupted and outcome unknown; `done` covers
/// completed, cancelled and never run; `needs_you` comes from attention that
/// waits on a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionInboxState {
    /// Something waits on a person.
    NeedsYou,
    /// Work is queued or running.
    Running,
    /// The latest work failed or was interrupted.
    Errored,
    /// Nothing to do.
    Done,
}

/// A read-only projection of one saved Session; opening it does not change its recency.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// Unix milliseconds of creation.
    pub created_at: u64,
    /// Unix milliseconds of the latest command or commit.
    pub last_activity_at: u64,
    /// Unix milliseconds at which the latest work settled, if it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<u64>,
    /// A short title, from the first prompt unless set.
    pub title: String,
    /// Inbox state.
    pub state: SessionInboxState,
}

/// One listed Session, or one whose rows could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "RowWire", try_from = "RowWire")]
pub enum SessionSummaryRow {
    /// A readable Session.
    Available {
        /// The Session.
        session_id: SessionId,
        /// Its summary.
        summary: SessionSummary,
    },
    /// A saved Session its owner could not read; listed rather than dropped.
    Unavailable {
        /// The Session.
        session_id: SessionId,
    },
}

impl SessionSummaryRow {
    /// The Session this row lists.
    pub fn session_id(&self) -> &SessionId {
        match self {
            SessionSummaryRow::Available { session_id, .. }
            | SessionSummaryRow::Unavailable { session_id } => session_id,
        }
    }
}

/// Flat wire form: `{sessionId, createdAt, ..., state}` or `{sessionId, state: "unavailable"}`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RowWire {
    session_id: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_activity_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    settled_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    state: RowState,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RowState {
    NeedsYou,
    Running,
    Errored,
    Done,
    Unavailable,
}

impl From<SessionSummaryRow> for RowWire {
    fn from(row: SessionSummaryRow) -> Self {
        match row {
            SessionSummaryRow::Available {
                session_id,
                summary,
            } => RowWire {
                session_id,
                created_at: Some(summary.created_at),
                last_activity_at: Some(summary.last_activity_at),
                settled_at: summary.settled_at,
                title: Some(summary.title),
                state: match summary.state {
                    SessionInboxState::NeedsYou => RowState::NeedsYou,
                    SessionInboxState::Running => RowState::Running,
                    SessionInboxState::Errored => RowState::Errored,
                    SessionInboxState::Done => RowState::Done,
                },
            },
            SessionSummaryRow::Unavailable { session_id } => RowWire {
                session_id,
                created_at: None,
                last_activity_at: None,
                settled_at: None,
                title: None,
                state: RowState::Unavailable,
            },
        }
    }
}

impl TryFrom<RowWire> for SessionSummaryRow {
    type Error = String;

    fn try_from(wire: RowWire) -> Result<Self, Self::Error> {
        let state = match wire.state {
            RowState::Unavailable => {
                let extra = wire.created_at.is_some()
                    || wire.last_activity_at.is_some()
                    || wire.settled_at.is_some()
                    || wire.title.is_some();
                if extra {
                    return Err("an unavailable row carries only sessionId and state".into());
                }
                return Ok(SessionSummaryRow::Unavailable {
                    session_id: wire.session_id,
                });
            }
            RowState::NeedsYou => SessionInboxState::NeedsYou,
            RowState::Running => SessionInboxState::Running,
            RowState::Errored => SessionInboxState::Errored,
            RowState::Done => SessionInboxState::Done,
        };
        let missing = |field: &str| format!("summary row is missing `{field}`");
        Ok(SessionSummaryRow::Available {
            session_id: wire.session_id,
            summary: SessionSummary {
                created_at: wire.created_at.ok_or_else(|| missing("createdAt"))?,
                last_activity_at: wire
                    .last_activity_at
                    .ok_or_else(|| missing("lastActivityAt"))?,
                settled_at: wire.settled_at,
                title: wire.title.ok_or_else(|| missing("title"))?,
                state,
            },
        })
    }
}

/// One bounded page: needs_you, then running, then settled rows, each newest activity first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummaryPage {
    /// The rows.
    pub sessions: Vec<SessionSummaryRow>,
    /// Opaque cursor of the next page; absent on the last page, never `null`
    /// (`next: string | undefined` in the seed's grammar: `null` is refused).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::next_cursor"
    )]
    pub next: Option<Cursor>,
}

impl SessionSummaryPage {
    /// Most rows one page holds.
    pub const MAX_ROWS: usize = 100;
}
