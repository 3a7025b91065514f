//! The Subagents footer's source: which Agents a Session reached (the record) and the
//! directory's access to read each of them.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use shiitake_ext_subagents::state::ChildState;
use shiitake_ext_subagents::{ChildPage, ChildRef, SourceError, SubagentsSource, read_core_child};
use shiitake_protocol::{AgentApi, ErrorCode, SessionId};

use crate::contract::{AgentName, ChildRecord};
use crate::record;
use crate::runtime::Shared;

/// Reads the record of one Agent's Sessions for Subagents; see
/// [`ConversationAgents::source`](crate::ConversationAgents::source).
pub struct RecordSource {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RecordSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordSource")
            .field("me", &self.shared.me)
            .finish_non_exhaustive()
    }
}

impl RecordSource {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

fn unreadable(error: impl std::fmt::Display) -> SourceError {
    SourceError::Unreadable(error.to_string())
}

#[async_trait]
impl SubagentsSource for RecordSource {
    async fn read(&self, session_id: &SessionId, limit: usize) -> Result<ChildPage, SourceError> {
        let agent = self.shared.agent().await.map_err(unreadable)?;
        let rows = agent
            .session(session_id.clone())
            .host_transaction(&self.shared.own_id, |tx| Ok(json!(record::load(tx)?)))
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(error) if error.code == ErrorCode::NotFound => {
                return Err(SourceError::NoSession(session_id.as_str().to_owned()));
            }
            Err(error) => return Err(unreadable(error.message)),
        };
        let rows: Vec<ChildRecord> = serde_json::from_value(rows).map_err(unreadable)?;
        let (newest, rest) = record::newest(&rows, limit);
        let children = newest
            .into_iter()
            .filter_map(|row| {
                Some(ChildRef {
                    agent: row.agent.into(),
                    session_id: SessionId::new(row.session_id).ok()?,
                })
            })
            .collect();
        Ok(ChildPage {
            children,
            rest: u32::try_from(rest).unwrap_or(u32::MAX),
        })
    }

    async fn open(&self, child: &ChildRef) -> Result<ChildState, SourceError> {
        let name = AgentName::new(child.agent.clone())
            .map_err(|_| SourceError::NoAgent(child.agent.clone()))?;
        let agent = self
            .shared
            .directory
            .agent(&name)
            .ok_or_else(|| SourceError::NoAgent(child.agent.clone()))?;
        read_core_child(&agent, &child.session_id).await
    }
}
