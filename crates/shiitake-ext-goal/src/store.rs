//! The bridge between the pure [`Book`] and a core transaction: load the Session's
//! goal, run a transition, commit its rows and effects.
//!
//! Rows (Session scope): `goal/current` (the [`Goal`], also the wire shape),
//! `goal/runtime` (Goal's bookkeeping), `agents/<command id>` (recorded sub-agent
//! commands) and `history/<goal id>` (finished goals, the most recent
//! [`MAX_HISTORY`]).

use serde::{Deserialize, Serialize};
use serde_json::json;
use shiitake_core::extension::{Due, HookError, StateScope, StateView, TimerId, Tx};
use shiitake_protocol::PromptDelivery;

use crate::contract::{AgentCommand, Goal, GoalId, GoalProjection, MAX_HISTORY};
use crate::state::{Book, Effect, Refused, Runtime};
use crate::text::CONTINUATION_PROMPT;

/// The collection of the goal row and the bookkeeping row.
pub(crate) const GOAL: &str = "goal";
/// The goal row's key.
pub(crate) const CURRENT: &str = "current";
/// The bookkeeping row's key.
pub(crate) const RUNTIME: &str = "runtime";
/// Sub-agent commands, by command id.
pub(crate) const AGENTS: &str = "agents";
/// Finished goals, by goal id.
pub(crate) const HISTORY: &str = "history";

/// Why a goal timer was set; stored as its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TimerPurpose {
    /// A waiting goal looks at its sub-agent commands again.
    Recheck,
}

/// The payload of a goal timer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TimerPayload {
    pub(crate) goal_id: GoalId,
    pub(crate) purpose: TimerPurpose,
}

/// The Session's goal as the transaction sees it.
pub(crate) fn load(tx: &Tx<'_>) -> Result<Book, HookError> {
    let agents = tx
        .scan::<AgentCommand>(StateScope::Session, AGENTS)?
        .into_iter()
        .collect();
    Ok(Book {
        goal: tx.get(StateScope::Session, GOAL, CURRENT)?,
        runtime: tx
            .get(StateScope::Session, GOAL, RUNTIME)?
            .unwrap_or_default(),
        agents,
    })
}

/// The committed goal, for projections and run contributions.
pub(crate) fn read(state: &StateView<'_>) -> Book {
    Book {
        goal: state.get(StateScope::Session, GOAL, CURRENT),
        runtime: state
            .get::<Runtime>(StateScope::Session, GOAL, RUNTIME)
            .unwrap_or_default(),
        agents: state
            .scan::<AgentCommand>(StateScope::Session, AGENTS)
            .into_iter()
            .collect(),
    }
}

/// What clients see of a book.
pub(crate) fn projection(book: &Book) -> GoalProjection {
    GoalProjection {
        goal: book.goal.clone(),
        footer: book.goal.as_ref().and_then(crate::contract::Footer::of),
        turns: book.runtime.turns.clone(),
        waiting_on: book.live_agents().cloned().collect(),
    }
}

/// Runs `transition` over the Session's goal and commits what it changed.
pub(crate) fn transact<T>(
    tx: &mut Tx<'_>,
    transition: impl FnOnce(&mut Book, u64) -> Result<(T, Vec<Effect>), Refused>,
) -> Result<T, HookError> {
    let before = load(tx)?;
    let mut book = before.clone();
    let now = tx.now();
    let (value, effects) =
        transition(&mut book, now).map_err(|refused| HookError::Invalid(refused.0))?;
    apply(tx, &mut book, effects)?;
    save(tx, &before, &book)?;
    Ok(value)
}

/// Runs a change over the Session's goal and answers the goal as it stands afterwards.
pub(crate) fn change(
    tx: &mut Tx<'_>,
    transition: impl FnOnce(&mut Book, u64) -> Result<Vec<Effect>, Refused>,
) -> Result<Option<Goal>, HookError> {
    transact(tx, |book, now| {
        let effects = transition(book, now)?;
        Ok((book.goal.clone(), effects))
    })
}

fn apply(tx: &mut Tx<'_>, book: &mut Book, effects: Vec<Effect>) -> Result<(), HookError> {
    for effect in effects {
        match effect {
            Effect::Admit { correlation } => {
                let command_id =
                    tx.admit(CONTINUATION_PROMPT, PromptDelivery::FollowUp, correlation)?;
                book.runtime.mark_turn(command_id.as_str().to_owned());
            }
            Effect::Raise { kind, text } => tx.raise_attention(kind, false, &text)?,
            Effect::Clear(kind) => tx.clear_attention(kind)?,
            Effect::SetRecheck { goal_id, at } => {
                let payload = json!(TimerPayload {
                    goal_id,
                    purpose: TimerPurpose::Recheck,
                });
                let id = tx.set_timer(Due::At(at), payload)?;
                book.runtime.timer = Some(id.as_str().to_owned());
            }
            Effect::ClearTimer(id) => tx.clear_timer(&TimerId::new(id))?,
            Effect::Line(text) => tx.append_line(&text)?,
            Effect::Archive(goal) => archive(tx, &goal)?,
        }
    }
    Ok(())
}

/// Keeps a finished goal, and at most [`MAX_HISTORY`] of them.
fn archive(tx: &mut Tx<'_>, goal: &Goal) -> Result<(), HookError> {
    tx.put(StateScope::Session, HISTORY, goal.goal_id.as_str(), goal)?;
    let kept: Vec<(String, Goal)> = tx.scan(StateScope::Session, HISTORY)?;
    for key in beyond_history(kept) {
        tx.delete(StateScope::Session, HISTORY, &key)?;
    }
    Ok(())
}

/// The keys of the oldest finished goals beyond [`MAX_HISTORY`].
fn beyond_history(mut kept: Vec<(String, Goal)>) -> Vec<String> {
    kept.sort_by_key(|(_, goal)| (goal.ended_at, goal.revision));
    let excess = kept.len().saturating_sub(MAX_HISTORY);
    kept.into_iter().take(excess).map(|(key, _)| key).collect()
}

fn save(tx: &mut Tx<'_>, before: &Book, after: &Book) -> Result<(), HookError> {
    if before.goal != after.goal {
        match &after.goal {
            Some(goal) => tx.put(StateScope::Session, GOAL, CURRENT, goal)?,
            None => tx.delete(StateScope::Session, GOAL, CURRENT)?,
        }
    }
    if before.runtime != after.runtime {
        tx.put(StateScope::Session, GOAL, RUNTIME, &after.runtime)?;
    }
    for (id, command) in &after.agents {
        if before.agents.get(id) != Some(command) {
            tx.put(StateScope::Session, AGENTS, id, command)?;
        }
    }
    for id in before.agents.keys() {
        if !after.agents.contains_key(id) {
            tx.delete(StateScope::Session, AGENTS, id)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{GoalStatus, SetBy};

    fn finished(n: u64) -> (String, Goal) {
        let goal = Goal {
            goal_id: GoalId::new(format!("goal_{n:02}")),
            objective: format!("goal {n}"),
            status: GoalStatus::Cleared,
            pause_cause: None,
            revision: n * 2,
            set_by: SetBy::Person,
            created_at: n,
            live_since: None,
            ended_at: Some(1_000 + n),
            provisional: None,
            stalls: 0,
            continuations: 0,
            spent: Default::default(),
            waiting: false,
        };
        (goal.goal_id.as_str().to_owned(), goal)
    }

    #[test]
    fn history_keeps_the_most_recent_twenty() {
        let twenty: Vec<_> = (1..=MAX_HISTORY as u64).map(finished).collect();
        assert_eq!(beyond_history(twenty.clone()), Vec::<String>::new());
        let mut one_more = twenty;
        one_more.insert(0, finished(21));
        assert_eq!(beyond_history(one_more), vec!["goal_01".to_owned()]);
    }
}
