//! The bridge between the pure [`Book`] and a core transaction: load the Session's
//! Asks, run a transition, commit its rows and effects.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;
use shiitake_core::extension::{Due, HookError, StateScope, StateView, TimerId, Tx};
use shiitake_protocol::PromptDelivery;

use crate::contract::{AskId, AskStatus, QuestionAnswer, QuestionProjection, Receipt};
use crate::state::{AskError, AskRow, Book, ClosedAsk, Effect, Responder, TimerPurpose};

/// The collection holding one row per Ask.
pub(crate) const ASKS: &str = "asks";
/// The collection remembering how recently closed Asks closed, keyed by Ask id.
pub(crate) const CLOSED: &str = "closed";

/// The payload of an Ask's timer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TimerPayload {
    pub(crate) ask_id: AskId,
    pub(crate) purpose: TimerPurpose,
}

/// The attention kind of one Ask: each open Ask raises and clears its own.
pub(crate) fn attention_kind(ask_id: &AskId) -> String {
    format!("question/{ask_id}")
}

/// The Asks of the transaction's Session.
pub(crate) fn load(tx: &Tx<'_>) -> Result<Book, HookError> {
    let asks = tx
        .scan::<AskRow>(StateScope::Session, ASKS)?
        .into_iter()
        .map(|(_, row)| (row.ask_id.clone(), row))
        .collect();
    let closed = tx
        .scan::<ClosedAsk>(StateScope::Session, CLOSED)?
        .into_iter()
        .map(|(key, closed)| (AskId::new(key), closed))
        .collect();
    Ok(Book { asks, closed })
}

/// The committed Asks, for projections and run contributions (without the closed
/// records, which only a transition reads).
pub(crate) fn read(state: &StateView<'_>) -> Book {
    let asks = state
        .scan::<AskRow>(StateScope::Session, ASKS)
        .into_iter()
        .map(|(_, row)| (row.ask_id.clone(), row))
        .collect();
    Book {
        asks,
        closed: Default::default(),
    }
}

/// What clients see of the Asks: the open ones, oldest first.
pub(crate) fn projection(book: &Book) -> QuestionProjection {
    QuestionProjection {
        asks: book.open().map(AskRow::view).collect(),
    }
}

/// A person (or the sending Agent, from its Session `from`) answers: the receipt an
/// exact retry gets again.
pub(crate) fn answer(
    tx: &mut Tx<'_>,
    ask_id: &AskId,
    answers: Vec<QuestionAnswer>,
    by: Responder,
    from: Option<&str>,
) -> Result<Receipt, HookError> {
    let delivery = transact(tx, |book| book.answer(ask_id, answers, by, from))?;
    Ok(Receipt {
        ask_id: ask_id.clone(),
        status: AskStatus::Answered,
        delivery,
    })
}

/// How a refused transition answers: `invalid`, `not_found` or `conflict`.
fn hook_error(error: AskError) -> HookError {
    match error {
        AskError::Invalid(refused) => HookError::Invalid(refused.0),
        unknown @ AskError::Unknown(_) => HookError::NotFound(unknown.to_string()),
        closed @ AskError::Closed { .. } => HookError::Conflict(closed.to_string()),
    }
}

/// Runs `transition` over the Session's Asks and commits what it changed.
pub(crate) fn transact<T>(
    tx: &mut Tx<'_>,
    transition: impl FnOnce(&mut Book) -> Result<(T, Vec<Effect>), AskError>,
) -> Result<T, HookError> {
    let before = load(tx)?;
    let mut book = before.clone();
    let (value, effects) = transition(&mut book).map_err(hook_error)?;
    apply(tx, &mut book, effects)?;
    save(tx, &before, &book)?;
    Ok(value)
}

fn apply(tx: &mut Tx<'_>, book: &mut Book, effects: Vec<Effect>) -> Result<(), HookError> {
    for effect in effects {
        match effect {
            Effect::Admit { ask_id, text } => {
                tx.admit(&text, PromptDelivery::FollowUp, ask_id.as_str())?;
            }
            Effect::Raise {
                ask_id,
                inbox,
                text,
            } => tx.raise_attention(&attention_kind(&ask_id), inbox, &text)?,
            Effect::Clear { ask_id } => tx.clear_attention(&attention_kind(&ask_id))?,
            Effect::SetTimer {
                ask_id,
                purpose,
                at,
            } => {
                let payload = json!(TimerPayload {
                    ask_id: ask_id.clone(),
                    purpose,
                });
                let id = tx.set_timer(Due::At(at), payload)?;
                if let Some(row) = book.asks.get_mut(&ask_id) {
                    row.timers.push(id.as_str().to_owned());
                }
            }
            Effect::ClearTimers(ids) => {
                for id in ids {
                    tx.clear_timer(&TimerId::new(id))?;
                }
            }
        }
    }
    Ok(())
}

fn save(tx: &mut Tx<'_>, before: &Book, after: &Book) -> Result<(), HookError> {
    save_rows(tx, ASKS, &before.asks, &after.asks)?;
    save_rows(tx, CLOSED, &before.closed, &after.closed)
}

/// Writes the rows of `collection` that changed from `before` to `after`, and deletes
/// those that went.
fn save_rows<V: Serialize + PartialEq>(
    tx: &mut Tx<'_>,
    collection: &str,
    before: &BTreeMap<AskId, V>,
    after: &BTreeMap<AskId, V>,
) -> Result<(), HookError> {
    for (ask_id, row) in after {
        if before.get(ask_id) != Some(row) {
            tx.put(StateScope::Session, collection, ask_id.as_str(), row)?;
        }
    }
    for ask_id in before.keys() {
        if !after.contains_key(ask_id) {
            tx.delete(StateScope::Session, collection, ask_id.as_str())?;
        }
    }
    Ok(())
}
