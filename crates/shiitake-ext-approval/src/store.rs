//! The bridge between the pure [`Book`] and a core transaction: load the Session's
//! approvals, run a transition, commit the rows it changed and its effects.

use std::collections::BTreeMap;

use serde::Serialize;
use shiitake_core::extension::{HookError, StateScope, StateView, Tx};
use shiitake_protocol::PromptDelivery;

use crate::contract::ApprovalId;
use crate::state::{Approval, Book, Closed, Effect, OneTime, Refusal};

/// One row per open approval, keyed by its number.
const APPROVALS: &str = "approvals";
/// Tools allowed for the rest of the Session, keyed by tool name.
const ALLOWED: &str = "allowed";
/// Commands allowed for the rest of the Session: the command, keyed by its hash.
const ALLOWED_COMMANDS: &str = "allowed_commands";
/// One-time allowances of parked calls, keyed by their approval's number.
const ONE_TIME: &str = "one_time";
/// How the latest closed approvals ended, keyed by number.
const CLOSED: &str = "closed";
/// The Session's counters: `next`, the number of the next approval.
const META: &str = "meta";

/// The attention kind of one approval: each raises and clears its own.
fn attention_kind(id: &ApprovalId) -> String {
    format!("approval/{id}")
}

/// Rows of a collection keyed by number; a key that is not one is not ours.
fn numbered<T>(rows: Vec<(String, T)>) -> BTreeMap<u64, T> {
    rows.into_iter()
        .filter_map(|(key, value)| Some((key.parse().ok()?, value)))
        .collect()
}

/// The Session's book, read in a transaction.
pub(crate) fn load(tx: &Tx<'_>) -> Result<Book, HookError> {
    Ok(Book {
        approvals: numbered(tx.scan::<Approval>(StateScope::Session, APPROVALS)?),
        allowed: tx
            .scan::<bool>(StateScope::Session, ALLOWED)?
            .into_iter()
            .map(|(tool, _)| tool)
            .collect(),
        allowed_commands: tx
            .scan::<String>(StateScope::Session, ALLOWED_COMMANDS)?
            .into_iter()
            .map(|(_, command)| command)
            .collect(),
        one_time: numbered(tx.scan::<OneTime>(StateScope::Session, ONE_TIME)?),
        closed: numbered(tx.scan::<Closed>(StateScope::Session, CLOSED)?),
        next: tx
            .get::<u64>(StateScope::Session, META, "next")?
            .unwrap_or(1),
    })
}

/// The committed book, for projections, footer rows and prompt sections (a row that
/// does not decode is left out rather than failing a read).
pub(crate) fn read(state: &StateView<'_>) -> Book {
    Book {
        approvals: numbered(state.scan::<Approval>(StateScope::Session, APPROVALS)),
        allowed: state
            .scan::<bool>(StateScope::Session, ALLOWED)
            .into_iter()
            .map(|(tool, _)| tool)
            .collect(),
        allowed_commands: state
            .scan::<String>(StateScope::Session, ALLOWED_COMMANDS)
            .into_iter()
            .map(|(_, command)| command)
            .collect(),
        ..Book::default()
    }
}

/// How a refused answer reaches its caller: `invalid`, `not_found` or `conflict`.
fn hook_error(refusal: Refusal) -> HookError {
    match refusal {
        Refusal::Invalid(message) => HookError::Invalid(message),
        Refusal::NotFound(message) => HookError::NotFound(message),
        Refusal::Conflict(message) => HookError::Conflict(message),
    }
}

/// Runs `transition` over the Session's book and commits what it changed.
pub(crate) fn transact<T>(
    tx: &mut Tx<'_>,
    transition: impl FnOnce(&mut Book) -> Result<(T, Vec<Effect>), Refusal>,
) -> Result<T, HookError> {
    let before = load(tx)?;
    let mut book = before.clone();
    let (value, effects) = transition(&mut book).map_err(hook_error)?;
    for effect in effects {
        match effect {
            Effect::Raise { id, text } => tx.raise_attention(&attention_kind(&id), true, &text)?,
            Effect::Clear { id } => tx.clear_attention(&attention_kind(&id))?,
            Effect::FollowUp { id, text } => {
                tx.admit(&text, PromptDelivery::FollowUp, id.as_str())?;
            }
        }
    }
    save(tx, &before, &book)?;
    Ok(value)
}

fn save(tx: &mut Tx<'_>, before: &Book, after: &Book) -> Result<(), HookError> {
    save_rows(
        tx,
        APPROVALS,
        &keyed(&before.approvals),
        &keyed(&after.approvals),
    )?;
    save_rows(
        tx,
        ONE_TIME,
        &keyed(&before.one_time),
        &keyed(&after.one_time),
    )?;
    save_rows(tx, CLOSED, &keyed(&before.closed), &keyed(&after.closed))?;
    let flag = |tools: &std::collections::BTreeSet<String>| -> BTreeMap<String, bool> {
        tools.iter().map(|tool| (tool.clone(), true)).collect()
    };
    save_rows(tx, ALLOWED, &flag(&before.allowed), &flag(&after.allowed))?;
    let by_hash = |commands: &std::collections::BTreeSet<String>| -> BTreeMap<String, String> {
        commands
            .iter()
            .map(|command| (crate::fingerprint::of_text(command), command.clone()))
            .collect()
    };
    save_rows(
        tx,
        ALLOWED_COMMANDS,
        &by_hash(&before.allowed_commands),
        &by_hash(&after.allowed_commands),
    )?;
    if before.next != after.next {
        tx.put(StateScope::Session, META, "next", &after.next)?;
    }
    Ok(())
}

fn keyed<T: Clone>(rows: &BTreeMap<u64, T>) -> BTreeMap<String, T> {
    rows.iter()
        .map(|(number, row)| (number.to_string(), row.clone()))
        .collect()
}

/// Writes the rows of `collection` that changed from `before` to `after`, and deletes
/// those that went.
fn save_rows<V: Serialize + PartialEq>(
    tx: &mut Tx<'_>,
    collection: &str,
    before: &BTreeMap<String, V>,
    after: &BTreeMap<String, V>,
) -> Result<(), HookError> {
    for (key, row) in after {
        if before.get(key) != Some(row) {
            tx.put(StateScope::Session, collection, key, row)?;
        }
    }
    for key in before.keys() {
        if !after.contains_key(key) {
            tx.delete(StateScope::Session, collection, key)?;
        }
    }
    Ok(())
}
