//! The goal state machine: plain functions over one Session's goal.
//!
//! A [`Book`] holds the Session's goal row, Goal's bookkeeping ([`Runtime`]) and the
//! sub-agent commands the roster recorded. Every transition mutates the book and
//! returns the [`Effect`]s to commit with it (continuations, attention, timers,
//! chat lines); the extension applies them to the core transaction. Nothing here
//! does I/O, so the property tests drive it directly.
//!
//! The rules, in one place:
//! - at most one live or paused goal; replacing it needs the revision the person
//!   saw, and the replaced goal is recorded as cleared;
//! - a model tool is accepted only when the goal's revision is the one its run saw
//!   ([`Fence`]); a goal a person paused or stopped accepts only `complete`, and only
//!   a person clears (or replaces) a live goal;
//! - `complete` and `block` are provisional: they apply when the run that asked
//!   settles `completed`, and are dropped otherwise;
//! - a live goal pauses when any run of the Session fails (`failed`), is cancelled
//!   (`cancelled`) or is interrupted without resuming (`no-terminal`), and after
//!   [`STALL_LIMIT`](crate::contract::STALL_LIMIT) tool-less continuations in a row (`stalled`), unless a sub-agent
//!   command is live: then it waits and rechecks on a timer;
//! - a live goal pauses as `stalled` once its goal turns since it became live reach
//!   the host's [`GoalBounds`] (turns, or tokens where the provider reports usage),
//!   with a detail that names the bound; resuming starts a fresh count;
//! - after a run settles with the goal live, one continuation is admitted unless one
//!   is already in flight. Only continuations count stalls: a run without an origin
//!   is never taken for a person's message.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use shiitake_protocol::TerminalOutcome;

use crate::contract::{
    self, ATTENTION_WAITING, AgentCommand, AgentCommandState, DEFAULT_MAX_GOAL_TOKENS,
    DEFAULT_MAX_GOAL_TURNS, Goal, GoalId, GoalStatus, MAX_MARKED_TURNS, PauseCause, PauseKind,
    Provisional, ProvisionalAction, SetBy, Spent,
};
use crate::text;

/// Why a transition was refused: told to the person or the model as is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

impl From<contract::TextError> for Refused {
    fn from(error: contract::TextError) -> Self {
        Refused(error.to_string())
    }
}

/// Goal's own bookkeeping (collection `goal`, key `runtime`); not on the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    /// The correlation of the continuation admitted and not yet settled.
    pub in_flight: Option<String>,
    /// The recheck timer of a waiting goal.
    pub timer: Option<String>,
    /// Command ids of goal turns, most recent last (at most [`MAX_MARKED_TURNS`]).
    pub turns: Vec<String>,
}

impl Runtime {
    /// Marks `command_id` as a goal turn.
    pub fn mark_turn(&mut self, command_id: String) {
        self.turns.push(command_id);
        let excess = self.turns.len().saturating_sub(MAX_MARKED_TURNS);
        self.turns.drain(..excess);
    }
}

/// Something to commit with a transition besides the rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Admit the next continuation prompt with this correlation.
    Admit {
        /// `continue:<goalId>:<n>`.
        correlation: String,
    },
    /// Raise attention of this kind (always `inbox: false`).
    Raise {
        /// `goal-blocked`, `goal-stalled` or `goal-waiting`.
        kind: &'static str,
        /// What it says.
        text: String,
    },
    /// Clear attention of this kind.
    Clear(&'static str),
    /// Set the recheck timer of a waiting goal; its id goes into [`Runtime::timer`].
    SetRecheck {
        /// The goal.
        goal_id: GoalId,
        /// Unix milliseconds.
        at: u64,
    },
    /// Clear a timer set earlier.
    ClearTimer(String),
    /// Add a chat line to the transcript.
    Line(String),
    /// Keep a finished goal in the history.
    Archive(Goal),
}

/// The goal revision a run saw when it started (`None`: there was no goal row);
/// each of its successful goal tools moves it to the revision it wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fence(pub Option<u64>);

/// A settled run as Goal sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSettled {
    /// The run's command id.
    pub run: String,
    /// How it ended.
    pub outcome: TerminalOutcome,
    /// The correlation, when Goal admitted it.
    pub correlation: Option<String>,
    /// Tool calls the model asked for.
    pub tool_calls: u32,
    /// Tokens the run's model answers reported (0 where the provider reports none).
    pub tokens: u64,
}

/// The host's bound on what a goal's turns may use between becoming live and pausing
/// as `stalled`: a model that keeps calling tools without finishing would otherwise
/// continue for ever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoalBounds {
    /// Goal turns (at least 1; 0 counts as 1).
    pub max_turns: u32,
    /// Tokens, as the provider reports them; `None` bounds by turns alone.
    pub max_tokens: Option<u64>,
}

impl Default for GoalBounds {
    fn default() -> Self {
        Self {
            max_turns: DEFAULT_MAX_GOAL_TURNS,
            max_tokens: Some(DEFAULT_MAX_GOAL_TOKENS),
        }
    }
}

/// Which bound a goal's turns reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reached {
    /// This many goal turns.
    Turns(u32),
    /// This many tokens.
    Tokens(u64),
}

impl GoalBounds {
    /// The bound `spent` reached, if any: turns first.
    pub fn reached(&self, spent: &Spent) -> Option<Reached> {
        let max_turns = self.max_turns.max(1);
        if spent.turns >= max_turns {
            return Some(Reached::Turns(max_turns));
        }
        self.max_tokens
            .filter(|max| spent.tokens >= *max)
            .map(Reached::Tokens)
    }
}

/// The correlation of continuation `n` of a goal.
pub fn correlation(goal_id: &GoalId, n: u64) -> String {
    format!("continue:{goal_id}:{n}")
}

/// The goal and number of a continuation correlation.
pub fn parse_correlation(correlation: &str) -> Option<(GoalId, u64)> {
    let rest = correlation.strip_prefix("continue:")?;
    let (goal, n) = rest.rsplit_once(':')?;
    Some((GoalId::new(goal), n.parse().ok()?))
}

/// One Session's goal, bookkeeping and recorded sub-agent commands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Book {
    /// The live or paused goal, or the last finished one.
    pub goal: Option<Goal>,
    /// Goal's bookkeeping.
    pub runtime: Runtime,
    /// Sub-agent commands by command id.
    pub agents: BTreeMap<String, AgentCommand>,
}

impl Book {
    /// The live or paused goal.
    pub fn active(&self) -> Option<&Goal> {
        self.goal.as_ref().filter(|goal| goal.status.is_active())
    }

    /// The live goal.
    pub fn live(&self) -> Option<&Goal> {
        self.goal
            .as_ref()
            .filter(|goal| goal.status == GoalStatus::Live)
    }

    /// The revision a run starting now sees.
    pub fn fence(&self) -> Fence {
        Fence(self.goal.as_ref().map(|goal| goal.revision))
    }

    /// Sub-agent commands recorded as live, oldest first.
    pub fn live_agents(&self) -> impl Iterator<Item = &AgentCommand> {
        let mut live: Vec<_> = self
            .agents
            .values()
            .filter(|command| command.state == AgentCommandState::Live)
            .collect();
        live.sort_by_key(|command| command.sent_at);
        live.into_iter()
    }

    fn next_revision(&self) -> u64 {
        self.goal.as_ref().map_or(1, |goal| goal.revision + 1)
    }

    fn goal_mut(&mut self) -> Result<&mut Goal, Refused> {
        self.goal
            .as_mut()
            .filter(|goal| goal.status.is_active())
            .ok_or_else(|| Refused("there is no live or paused goal".into()))
    }

    fn check_seen(&self, seen: Option<u64>) -> Result<(), Refused> {
        match (seen, self.active()) {
            (Some(seen), Some(goal)) if seen != goal.revision => Err(Refused(format!(
                "the goal changed: it is at revision {}, not the {seen} you saw; look again",
                goal.revision
            ))),
            _ => Ok(()),
        }
    }

    fn check_fence(&self, fence: Fence) -> Result<(), Refused> {
        let now = self.fence();
        if now == fence {
            return Ok(());
        }
        let state = match self.active() {
            Some(goal) => format!("now revision {} ({:?})", goal.revision, goal.status),
            None => "no longer live or paused".to_owned(),
        };
        Err(Refused(format!(
            "the goal changed since this turn began ({state}); goal.get shows it, and a later \
             turn can act on it"
        )))
    }

    /// Clears the waiting state: its timer and its attention.
    fn stop_waiting(&mut self) -> Vec<Effect> {
        let mut effects = Vec::new();
        if let Some(timer) = self.runtime.timer.take() {
            effects.push(Effect::ClearTimer(timer));
        }
        if let Some(goal) = self.goal.as_mut()
            && goal.waiting
        {
            goal.waiting = false;
            effects.push(Effect::Clear(ATTENTION_WAITING));
        }
        effects
    }

    /// Clears the attention the current pause raised, if any.
    fn unpause_attention(&self) -> Vec<Effect> {
        self.goal
            .as_ref()
            .and_then(|goal| goal.pause_cause.as_ref())
            .and_then(|cause| cause.kind.attention())
            .map(Effect::Clear)
            .into_iter()
            .collect()
    }

    /// Pauses the active goal with `kind`.
    fn pause_with(&mut self, kind: PauseKind, detail: Option<String>) -> Vec<Effect> {
        let mut effects = self.stop_waiting();
        effects.extend(self.unpause_attention());
        let Some(goal) = self.goal.as_mut() else {
            return effects;
        };
        goal.status = GoalStatus::Paused;
        goal.pause_cause = Some(PauseCause { kind, detail });
        goal.live_since = None;
        goal.revision += 1;
        if let Some(attention) = kind.attention() {
            effects.push(Effect::Raise {
                kind: attention,
                text: goal.objective.clone(),
            });
        }
        effects
    }

    /// Makes the active goal live again.
    fn make_live(&mut self, now: u64) -> Vec<Effect> {
        let effects = self.unpause_attention();
        if let Some(goal) = self.goal.as_mut() {
            goal.status = GoalStatus::Live;
            goal.pause_cause = None;
            goal.live_since = Some(now);
            goal.stalls = 0;
            goal.spent = Spent::default();
            goal.revision += 1;
        }
        effects
    }

    /// Ends the active goal as achieved or cleared: one chat line, kept in history.
    fn finish(&mut self, status: GoalStatus, now: u64, summary: Option<&str>) -> Vec<Effect> {
        let mut effects = self.stop_waiting();
        effects.extend(self.unpause_attention());
        let Some(goal) = self.goal.as_mut() else {
            return effects;
        };
        goal.status = status;
        goal.pause_cause = None;
        goal.live_since = None;
        goal.ended_at = Some(now);
        goal.provisional = None;
        goal.revision += 1;
        let line = match status {
            GoalStatus::Achieved => text::achieved_line(goal, summary),
            _ => text::cleared_line(goal),
        };
        effects.push(Effect::Line(line));
        effects.push(Effect::Archive(goal.clone()));
        effects
    }

    /// Admits the next continuation when the goal is live, not waiting, and none is in flight.
    fn continue_now(&mut self) -> Vec<Effect> {
        if self.runtime.in_flight.is_some() {
            return Vec::new();
        }
        let Some(goal) = self
            .goal
            .as_mut()
            .filter(|goal| goal.status == GoalStatus::Live && !goal.waiting)
        else {
            return Vec::new();
        };
        goal.continuations += 1;
        let correlation = correlation(&goal.goal_id, goal.continuations);
        self.runtime.in_flight = Some(correlation.clone());
        vec![Effect::Admit { correlation }]
    }

    fn new_goal(&mut self, goal_id: GoalId, objective: String, by: SetBy, now: u64) {
        self.goal = Some(Goal {
            goal_id,
            objective,
            status: GoalStatus::Live,
            pause_cause: None,
            revision: self.next_revision(),
            set_by: by,
            created_at: now,
            live_since: Some(now),
            ended_at: None,
            provisional: None,
            stalls: 0,
            continuations: 0,
            spent: Spent::default(),
            waiting: false,
        });
    }

    /// A person sets a goal. Replacing a live or paused goal needs its revision.
    pub fn set(
        &mut self,
        goal_id: GoalId,
        objective: &str,
        replace_revision: Option<u64>,
        now: u64,
    ) -> Result<Vec<Effect>, Refused> {
        let objective = contract::objective(objective)?;
        let mut effects = Vec::new();
        if let Some(current) = self.active() {
            match replace_revision {
                None => {
                    return Err(Refused(format!(
                        "a goal is {} (revision {}): replacing it asks first; confirm with \
                         replaceRevision {}",
                        current.status.name(),
                        current.revision,
                        current.revision
                    )));
                }
                Some(seen) if seen != current.revision => {
                    return Err(Refused(format!(
                        "the goal changed: revision {} is newer than the {seen} you saw; it was \
                         not replaced",
                        current.revision
                    )));
                }
                Some(_) => effects.extend(self.finish(GoalStatus::Cleared, now, None)),
            }
        }
        self.new_goal(goal_id, objective, SetBy::Person, now);
        effects.extend(self.continue_now());
        Ok(effects)
    }

    /// A person pauses the live goal.
    pub fn pause(&mut self, seen: Option<u64>) -> Result<Vec<Effect>, Refused> {
        self.check_seen(seen)?;
        let goal = self.goal_mut()?;
        if goal.status != GoalStatus::Live {
            return Err(Refused("the goal is already paused".into()));
        }
        Ok(self.pause_with(PauseKind::Person, None))
    }

    /// A person resumes the paused goal, whatever paused it.
    pub fn resume(&mut self, seen: Option<u64>, now: u64) -> Result<Vec<Effect>, Refused> {
        self.check_seen(seen)?;
        let goal = self.goal_mut()?;
        if goal.status != GoalStatus::Paused {
            return Err(Refused("the goal is not paused".into()));
        }
        let mut effects = self.make_live(now);
        effects.extend(self.continue_now());
        Ok(effects)
    }

    /// A person clears the live or paused goal.
    pub fn clear(&mut self, seen: Option<u64>, now: u64) -> Result<Vec<Effect>, Refused> {
        self.check_seen(seen)?;
        self.goal_mut()?;
        Ok(self.finish(GoalStatus::Cleared, now, None))
    }

    /// `goal.create`: a new goal when there is none; on a goal that paused on its
    /// own, the same objective resumes it and another replaces it (recorded as cleared).
    pub fn create(
        &mut self,
        fence: Fence,
        goal_id: GoalId,
        objective: &str,
        now: u64,
    ) -> Result<Vec<Effect>, Refused> {
        self.check_fence(fence)?;
        let objective = contract::objective(objective)?;
        let mut effects = Vec::new();
        if let Some(current) = self.active() {
            match &current.pause_cause {
                None => {
                    return Err(Refused(
                        "a goal is already live; only a person replaces or clears a live goal \
                         (goal.complete when it is achieved)"
                            .into(),
                    ));
                }
                Some(cause) if cause.kind.by_person() => {
                    return Err(Refused(
                        "a person paused or stopped this goal: only goal.complete is accepted \
                         until a person resumes it"
                            .into(),
                    ));
                }
                Some(_) if current.objective == objective => {
                    // Resumed by a later turn; the continuation follows when this run settles.
                    return Ok(self.make_live(now));
                }
                Some(_) => effects.extend(self.finish(GoalStatus::Cleared, now, None)),
            }
        }
        self.new_goal(goal_id, objective, SetBy::Model, now);
        Ok(effects)
    }

    /// `goal.complete`: provisional until the run `run` settles successfully.
    pub fn complete(
        &mut self,
        fence: Fence,
        run: &str,
        summary: Option<&str>,
    ) -> Result<Vec<Effect>, Refused> {
        self.check_fence(fence)?;
        let note = summary.map(|s| contract::note(s, "summary")).transpose()?;
        let goal = self.goal_mut()?;
        goal.provisional = Some(Provisional {
            action: ProvisionalAction::Complete,
            run: run.to_owned(),
            note,
        });
        goal.revision += 1;
        Ok(Vec::new())
    }

    /// `goal.block`: provisional until the run `run` settles successfully; refused on
    /// a goal a person paused or stopped.
    pub fn block(&mut self, fence: Fence, run: &str, reason: &str) -> Result<Vec<Effect>, Refused> {
        self.check_fence(fence)?;
        let note = contract::note(reason, "reason")?;
        let goal = self.goal_mut()?;
        if goal
            .pause_cause
            .as_ref()
            .is_some_and(|cause| cause.kind.by_person())
        {
            return Err(Refused(
                "a person paused or stopped this goal: only goal.complete is accepted until a \
                 person resumes it"
                    .into(),
            ));
        }
        goal.provisional = Some(Provisional {
            action: ProvisionalAction::Block,
            run: run.to_owned(),
            note: Some(note),
        });
        goal.revision += 1;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests;

mod runs;
