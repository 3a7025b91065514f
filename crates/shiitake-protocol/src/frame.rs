//! Frames: what a subscriber receives after its baseline.

use serde::{Deserialize, Serialize};

use crate::activity::{SessionActivity, SessionProgress};
use crate::bounded::Cursor;
use crate::snapshot::{
    SandboxFailureEvent, SessionCompactionMarker, SessionExtensionSlots, SessionMessage,
    SessionPendingPrompts, SessionSnapshot, SessionTerminal,
};

/// Whether an update replays history or reports a new commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameDelivery {
    /// Committed before the subscription went live.
    Replay,
    /// Committed while subscribed.
    Live,
}

/// Why a subscription restarted from a fresh baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetReason {
    /// The cursor is unknown, from another lineage, or too old to replay from.
    HistoryUnavailable,
}

/// Committed changes after the previous frame's cursor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateFrame {
    /// Replay or live.
    pub delivery: FrameDelivery,
    /// The position after these changes.
    pub cursor: Option<Cursor>,
    /// Waiting prompts now.
    pub pending: SessionPendingPrompts,
    /// New messages.
    pub messages: Vec<SessionMessage>,
    /// New terminals.
    pub terminals: Vec<SessionTerminal>,
    /// New compaction markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compactions: Option<Vec<SessionCompactionMarker>>,
    /// New sandbox failures, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_failures: Option<Vec<SandboxFailureEvent>>,
    /// Activity now.
    pub activity: SessionActivity,
    /// Extension projections now.
    pub extensions: SessionExtensionSlots,
    /// Footer rows now (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub footer: crate::footer::SessionFooter,
}

/// The streaming assistant message moved on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressFrame {
    /// The message so far.
    pub progress: SessionProgress,
    /// Activity now.
    pub activity: SessionActivity,
}

/// The subscription cannot continue from its cursor; here is a fresh baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetFrame {
    /// Why.
    pub reason: ResetReason,
    /// The baseline's cursor; later frames follow it.
    pub cursor: Option<Cursor>,
    /// The new baseline.
    pub baseline: SessionSnapshot,
}

/// One bounded replay or live frame, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionFrame {
    /// Committed changes.
    Update(UpdateFrame),
    /// Streaming progress; not durable.
    Progress(ProgressFrame),
    /// Start again from a fresh baseline.
    Reset(Box<ResetFrame>),
}

impl SessionFrame {
    /// The cursor a subscriber should resume after, if this frame moves it.
    pub fn cursor(&self) -> Option<&Cursor> {
        match self {
            SessionFrame::Update(update) => update.cursor.as_ref(),
            SessionFrame::Reset(reset) => reset.cursor.as_ref(),
            SessionFrame::Progress(_) => None,
        }
    }
}
