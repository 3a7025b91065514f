//! The Goal side of conversation agents (`shiitake-ext-agents`): what it calls when this Session
//! sends a sub-agent a command, and when that command settles or the child replies.
//!
//! Each function is a transaction body for
//! [`LocalSession::host_transaction`](shiitake_core::LocalSession::host_transaction)
//! on the sending Session, so no client reaches it over the wire. Goal reads only
//! these rows: a tool-less goal turn that ends while a recorded command is live is
//! not a stall; the goal raises `goal-waiting` attention, rechecks on a core timer,
//! and continues once a recorded command settles or its child replies.
//!
//! ```no_run
//! # async fn demo(parent: shiitake_core::LocalSession) -> Result<(), shiitake_protocol::ShiitakeError> {
//! use shiitake_ext_goal::{extension_id, roster};
//! let id = extension_id().map_err(|e| shiitake_protocol::ShiitakeError::internal(e.to_string()))?;
//! parent.host_transaction(&id, |tx| roster::command_sent(tx, "cmd_child", "helper")).await?;
//! parent.host_transaction(&id, |tx| roster::command_settled(tx, "cmd_child")).await?;
//! # Ok(()) }
//! ```

use serde_json::{Value, json};
use shiitake_core::extension::{HookError, Tx};

use crate::contract::{AgentCommand, AgentCommandState};
use crate::store;

/// This Session sent `agent` the command `command_id` (the id the child's Session
/// gave it): recorded as live. Recording it again changes nothing.
pub fn command_sent(tx: &mut Tx<'_>, command_id: &str, agent: &str) -> Result<Value, HookError> {
    store::transact(tx, |book, now| {
        Ok(((), book.agent_sent(command_id, agent, now)?))
    })?;
    Ok(json!({"commandId": command_id, "state": AgentCommandState::Live}))
}

/// The child's work on `command_id` settled.
pub fn command_settled(tx: &mut Tx<'_>, command_id: &str) -> Result<Value, HookError> {
    update(tx, command_id, AgentCommandState::Settled)
}

/// The child replied to `command_id`.
pub fn command_replied(tx: &mut Tx<'_>, command_id: &str) -> Result<Value, HookError> {
    update(tx, command_id, AgentCommandState::Replied)
}

fn update(tx: &mut Tx<'_>, command_id: &str, state: AgentCommandState) -> Result<Value, HookError> {
    store::transact(tx, |book, _now| {
        Ok(((), book.agent_update(command_id, state)))
    })?;
    Ok(json!({"commandId": command_id, "state": state}))
}

/// The sub-agent commands recorded as live, oldest first.
pub fn live_commands(tx: &Tx<'_>) -> Result<Vec<AgentCommand>, HookError> {
    Ok(store::load(tx)?.live_agents().cloned().collect())
}
