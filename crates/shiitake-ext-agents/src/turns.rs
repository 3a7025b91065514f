//! When a sender's turn ends, Asks still waiting on it go to a person.
//!
//! The extension's settled hook on the sending Session cannot reach other Agents (hooks
//! do no I/O), so it hands the Session's children to this task, which runs the
//! question extension's `sender_turn_ended` on each child's Session through
//! `LocalSession::host_transaction`. The hand-over is in memory: if the process stops
//! in between, the question's durable fifteen-minute fallback still passes the Ask on.

use std::sync::Arc;

use shiitake_core::extension::{HookError, Tx};
use shiitake_ext_question::sender;
use shiitake_protocol::SessionApi;
use tokio::sync::mpsc;

use crate::record;
use crate::runtime::{Shared, TurnEnded, session_of};

/// The settled hook of the sending Session: hands the children it reached to [`run`].
pub(crate) fn hand_over(shared: &Shared, tx: &mut Tx<'_>) -> Result<(), HookError> {
    let Some(parent) = tx.session_id().cloned() else {
        return Ok(());
    };
    let children: Vec<_> = record::load(tx)?
        .into_iter()
        .map(|row| (row.agent, row.session_id))
        .collect();
    if children.is_empty() {
        return Ok(());
    }
    if shared
        .turn_ends
        .send(TurnEnded { parent, children })
        .is_err()
    {
        tracing::debug!("the turn-end task is not running; the fallback timer passes Asks on");
    }
    Ok(())
}

/// Passes every Ask still waiting on each ended turn's Session to a person.
pub(crate) async fn run(shared: Arc<Shared>, mut turn_ends: mpsc::UnboundedReceiver<TurnEnded>) {
    while let Some(ended) = turn_ends.recv().await {
        for (agent, session_id) in &ended.children {
            let Some(child_agent) = shared.directory.agent(agent) else {
                continue;
            };
            let child = match session_of(&child_agent, session_id) {
                Ok(child) => child,
                Err(error) => {
                    tracing::debug!(%error, "a recorded child Session id does not parse");
                    continue;
                }
            };
            let parent = ended.parent.as_str().to_owned();
            let passed = child
                .host_transaction(&shared.question_id, move |tx| {
                    sender::sender_turn_ended(tx, &parent)
                })
                .await;
            match passed {
                Ok(value) => {
                    if value["escalated"].as_u64().is_some_and(|n| n > 0) {
                        tracing::debug!(child = %child.session_id(), "Asks passed to a person at the sender's turn end");
                        shared.children_changed(&ended.parent);
                    }
                }
                Err(error) => {
                    tracing::debug!(child = %child.session_id(), %error, "could not pass Asks on at a turn end");
                }
            }
        }
    }
}
