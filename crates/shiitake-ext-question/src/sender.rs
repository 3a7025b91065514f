//! The Ask side of "waits on the sender": what the `agents.*` extension's
//! (`shiitake-ext-agents`) `agents.answer` and `agents.escalate` tools call.
//!
//! Each function is a transaction body for
//! [`LocalSession::host_transaction`](shiitake_core::LocalSession::host_transaction)
//! on the child's Session (the one that asked), so no client can reach it over the
//! wire. `from` is the sending Session's id: only that Session may answer or escalate
//! an Ask that waits on it. A person may always answer through the contract.
//!
//! ```no_run
//! # async fn demo(child: shiitake_core::LocalSession, parent: String,
//! #               ask_id: shiitake_ext_question::contract::AskId) -> Result<(), shiitake_protocol::ShiitakeError> {
//! use shiitake_ext_question::{extension_id, sender};
//! let id = extension_id().map_err(|e| shiitake_protocol::ShiitakeError::internal(e.to_string()))?;
//! child.host_transaction(&id, move |tx| sender::escalate(tx, &ask_id, &parent)).await?;
//! # Ok(()) }
//! ```

use serde_json::{Value, json};
use shiitake_core::extension::{HookError, Tx};

use crate::contract::{AskId, AskView, QuestionAnswer};
use crate::state::{AskRow, Responder};
use crate::store;

/// The sending Agent answers an Ask that waits on its Session `from`.
pub fn answer(
    tx: &mut Tx<'_>,
    ask_id: &AskId,
    from: &str,
    answers: Vec<QuestionAnswer>,
) -> Result<Value, HookError> {
    let receipt = store::answer(tx, ask_id, answers, Responder::Sender, Some(from))?;
    Ok(json!(receipt))
}

/// The sending Agent passes an Ask that waits on its Session `from` to a person.
pub fn escalate(tx: &mut Tx<'_>, ask_id: &AskId, from: &str) -> Result<Value, HookError> {
    store::transact(tx, |book| Ok(((), book.escalate(ask_id, from)?)))?;
    Ok(json!({"askId": ask_id, "escalated": true}))
}

/// The sending Session's turn ended: every Ask still waiting on it goes to a person.
pub fn sender_turn_ended(tx: &mut Tx<'_>, from: &str) -> Result<Value, HookError> {
    let escalated = store::transact(tx, |book| {
        let effects = book.sender_turn_ended(from);
        Ok((effects.len(), effects))
    })?;
    Ok(json!({"escalated": escalated}))
}

/// The open Asks that wait on the Session `from` (not yet escalated): what rides the
/// child's reply to the sender as `waiting_on_you`.
pub fn waiting_on(tx: &Tx<'_>, from: &str) -> Result<Vec<AskView>, HookError> {
    Ok(store::load(tx)?
        .waiting_on(from)
        .map(AskRow::view)
        .collect())
}
