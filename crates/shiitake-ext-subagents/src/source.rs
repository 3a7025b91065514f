//! What the host supplies: which Agents a Session sent work to or created, and its
//! existing access to read each child's Session.

use async_trait::async_trait;
use shiitake_core::Agent;
use shiitake_ext_approval::contract::ApprovalContract;
use shiitake_ext_question::contract::{QuestionContract, QuestionProjection};
use shiitake_protocol::extension::{ExtensionViewV0, view};
use shiitake_protocol::{AgentApi, PageLimit, ReadOptions, SessionApi, SessionId};

use crate::state::ChildState;

/// One Agent a Session sent work to or created, and the Session the work went to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildRef {
    /// The child Agent's name.
    pub agent: String,
    /// The child's Session.
    pub session_id: SessionId,
}

/// A page of children, newest first, with how many more there are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildPage {
    /// At most the limit asked for.
    pub children: Vec<ChildRef>,
    /// How many more the Session has beyond these.
    pub rest: u32,
}

/// Why the host could not read something; a child it cannot read shows `unavailable`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The directory holds no such Agent (or no longer does).
    #[error("no Agent named {0}")]
    NoAgent(String),
    /// The Agent holds no such Session.
    #[error("no Session {0}")]
    NoSession(String),
    /// Reading failed.
    #[error("{0}")]
    Unreadable(String),
}

/// The host's side of Subagents: `read` lists the children of a Session, `open` reads
/// one child's state through the host's existing Agent access.
///
/// Both are called from the extension's refresher task, never from a hook, so they
/// may do I/O. [`read_core_child`] is `open` for a child that is an in-process Agent.
#[async_trait]
pub trait SubagentsSource: Send + Sync + 'static {
    /// The Agents `session_id` sent work to or created, newest first, at most `limit`.
    async fn read(&self, session_id: &SessionId, limit: usize) -> Result<ChildPage, SourceError>;

    /// The child's own Session state.
    async fn open(&self, child: &ChildRef) -> Result<ChildState, SourceError>;
}

/// Reads a child Session of an in-process Agent: its inbox state and title from the
/// committed header (without loading it), its open Asks and the tool calls waiting for
/// approval from a one-message snapshot.
pub async fn read_core_child(
    agent: &Agent,
    session_id: &SessionId,
) -> Result<ChildState, SourceError> {
    let unreadable =
        |error: shiitake_protocol::ShiitakeError| SourceError::Unreadable(error.message);
    let summary = agent
        .session_summary(session_id)
        .await
        .map_err(unreadable)?
        .ok_or_else(|| SourceError::NoSession(session_id.as_str().to_owned()))?;
    let options = ReadOptions {
        limit: PageLimit::new(1).ok(),
        ..ReadOptions::default()
    };
    let snapshot = agent
        .session(session_id.clone())
        .read(options)
        .await
        .map_err(unreadable)?;
    let asks = match view::<QuestionContract>(&snapshot.extensions) {
        Ok(ExtensionViewV0::Running { value }) => value.unwrap_or_default().asks,
        // An Agent without questions, or with them stopped: no Asks to show.
        Ok(_) => QuestionProjection::default().asks,
        Err(error) => return Err(SourceError::Unreadable(error.to_string())),
    };
    let approvals = match view::<ApprovalContract>(&snapshot.extensions) {
        Ok(ExtensionViewV0::Running { value }) => value.unwrap_or_default().approvals,
        // An Agent without approvals, or with them stopped: no calls to show.
        Ok(_) => Vec::new(),
        Err(error) => return Err(SourceError::Unreadable(error.to_string())),
    };
    Ok(ChildState {
        inbox: summary.state,
        title: summary.title,
        asks,
        approvals,
    })
}
