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
//!   [`STALL_LIMIT`] tool-less continuations in a row (`stalled`), unless a sub-agent
//!   command is live: then it waits and rechecks on a timer;
//! - after a run settles with the goal live, one continuation is admitted unless one
//!   is already in flight. Only continuations count stalls: a run without an origin
//!   is never taken for a person's message.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use shiitake_protocol::TerminalOutcome;

use crate::contract::{
    self, ATTENTION_WAITING, AgentCommand, AgentCommandState, Goal, GoalId, GoalStatus,
    MAX_AGENT_COMMANDS, MAX_MARKED_TURNS, PauseCause, PauseKind, Provisional, ProvisionalAction,
    RECHECK_MS, STALL_LIMIT, SetBy,
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
                        status_name(current.status),
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

    /// A run of the Session settled (or a prompt was cancelled before it ran).
    pub fn settled(&mut self, settled: &RunSettled, now: u64) -> Vec<Effect> {
        let mut effects = Vec::new();
        if settled.correlation.is_some() && self.runtime.in_flight == settled.correlation {
            self.runtime.in_flight = None;
        }
        let goal_turn = match (
            settled.correlation.as_deref().and_then(parse_correlation),
            &self.goal,
        ) {
            (Some((goal_id, _)), Some(goal)) => goal_id == goal.goal_id,
            _ => false,
        };
        let Some(goal) = self.goal.as_mut().filter(|goal| goal.status.is_active()) else {
            return effects;
        };
        if let Some(provisional) = goal
            .provisional
            .take_if(|provisional| provisional.run == settled.run)
        {
            goal.revision += 1;
            if settled.outcome == TerminalOutcome::Completed {
                let by_person = goal
                    .pause_cause
                    .as_ref()
                    .is_some_and(|cause| cause.kind.by_person());
                match provisional.action {
                    ProvisionalAction::Complete => {
                        effects.extend(self.finish(
                            GoalStatus::Achieved,
                            now,
                            provisional.note.as_deref(),
                        ));
                        return effects;
                    }
                    ProvisionalAction::Block if !by_person => {
                        effects.extend(self.pause_with(PauseKind::Blocked, provisional.note));
                        return effects;
                    }
                    ProvisionalAction::Block => {}
                }
            }
        }
        let Some(goal) = self.live().cloned() else {
            return effects;
        };
        let kind = match settled.outcome {
            TerminalOutcome::Failed => Some(PauseKind::Failed),
            TerminalOutcome::Cancelled => Some(PauseKind::Cancelled),
            TerminalOutcome::Interrupted => Some(PauseKind::NoTerminal),
            TerminalOutcome::Completed => None,
        };
        if let Some(kind) = kind {
            effects.extend(self.pause_with(kind, text::detail(kind)));
            return effects;
        }
        if goal_turn {
            if settled.tool_calls == 0 {
                if let Some(agent) = self.live_agents().next().map(|a| a.agent.clone()) {
                    effects.extend(self.start_waiting(&goal.goal_id, &agent, now));
                    return effects;
                }
                let stalls = goal.stalls.saturating_add(1);
                if let Some(goal) = self.goal.as_mut() {
                    goal.stalls = stalls;
                }
                if stalls >= STALL_LIMIT {
                    effects.extend(
                        self.pause_with(PauseKind::Stalled, text::detail(PauseKind::Stalled)),
                    );
                    return effects;
                }
            } else if let Some(goal) = self.goal.as_mut() {
                goal.stalls = 0;
            }
        }
        effects.extend(self.continue_now());
        effects
    }

    fn start_waiting(&mut self, goal_id: &GoalId, agent: &str, now: u64) -> Vec<Effect> {
        let mut effects = Vec::new();
        if let Some(goal) = self.goal.as_mut() {
            goal.waiting = true;
        }
        if let Some(timer) = self.runtime.timer.take() {
            effects.push(Effect::ClearTimer(timer));
        }
        effects.push(Effect::Raise {
            kind: ATTENTION_WAITING,
            text: format!("Waiting on {agent}"),
        });
        effects.push(Effect::SetRecheck {
            goal_id: goal_id.clone(),
            at: now.saturating_add(RECHECK_MS),
        });
        effects
    }

    /// Ends waiting and continues, when the goal waits.
    fn resume_waiting(&mut self) -> Vec<Effect> {
        if !self.live().is_some_and(|goal| goal.waiting) {
            return Vec::new();
        }
        let mut effects = self.stop_waiting();
        effects.extend(self.continue_now());
        effects
    }

    /// The recheck timer `timer` of goal `goal_id` fired: continue if no recorded
    /// sub-agent command is live any more, else look again later.
    pub fn recheck(&mut self, timer: &str, goal_id: &GoalId, now: u64) -> Vec<Effect> {
        if self.runtime.timer.as_deref() == Some(timer) {
            // The scheduler consumed it when it fired.
            self.runtime.timer = None;
        }
        let waits = self
            .live()
            .is_some_and(|goal| &goal.goal_id == goal_id && goal.waiting);
        if !waits {
            return Vec::new();
        }
        if self.live_agents().next().is_none() {
            return self.resume_waiting();
        }
        vec![Effect::SetRecheck {
            goal_id: goal_id.clone(),
            at: now.saturating_add(RECHECK_MS),
        }]
    }

    /// The roster recorded a sub-agent command sent from this Session; recording it
    /// again changes nothing.
    pub fn agent_sent(
        &mut self,
        command_id: &str,
        agent: &str,
        now: u64,
    ) -> Result<Vec<Effect>, Refused> {
        if self.agents.contains_key(command_id) {
            return Ok(Vec::new());
        }
        if self.live_agents().count() >= MAX_AGENT_COMMANDS {
            return Err(Refused(format!(
                "{MAX_AGENT_COMMANDS} sub-agent commands are already recorded as live"
            )));
        }
        self.agents.insert(
            command_id.to_owned(),
            AgentCommand {
                command_id: command_id.to_owned(),
                agent: agent.to_owned(),
                sent_at: now,
                state: AgentCommandState::Live,
            },
        );
        self.prune_agents();
        Ok(Vec::new())
    }

    /// The roster recorded that a sub-agent command settled or its child replied: a
    /// goal waiting on it continues.
    pub fn agent_update(&mut self, command_id: &str, state: AgentCommandState) -> Vec<Effect> {
        let Some(command) = self.agents.get_mut(command_id) else {
            return Vec::new();
        };
        if command.state != AgentCommandState::Live || state == AgentCommandState::Live {
            return Vec::new();
        }
        command.state = state;
        self.prune_agents();
        self.resume_waiting()
    }

    /// Keeps at most [`MAX_AGENT_COMMANDS`] rows, dropping the oldest finished ones.
    fn prune_agents(&mut self) {
        while self.agents.len() > MAX_AGENT_COMMANDS {
            let oldest = self
                .agents
                .values()
                .filter(|command| command.state != AgentCommandState::Live)
                .min_by_key(|command| command.sent_at)
                .map(|command| command.command_id.clone());
            match oldest {
                Some(id) => {
                    self.agents.remove(&id);
                }
                None => return,
            }
        }
    }
}

fn status_name(status: GoalStatus) -> &'static str {
    match status {
        GoalStatus::Live => "live",
        GoalStatus::Paused => "paused",
        GoalStatus::Achieved => "achieved",
        GoalStatus::Cleared => "cleared",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000;

    fn run_settled(run: &str, outcome: TerminalOutcome, correlation: Option<String>, tool_calls: u32) -> RunSettled {
        RunSettled {
            run: run.into(),
            outcome,
            correlation,
            tool_calls,
        }
    }

    fn set(book: &mut Book) -> Vec<Effect> {
        book.set(GoalId::new("goal_a"), "Ship it", None, NOW).unwrap()
    }

    #[test]
    fn correlations_round_trip() {
        let id = GoalId::new("goal_01J:odd");
        assert_eq!(parse_correlation(&correlation(&id, 7)), Some((id, 7)));
        assert_eq!(parse_correlation("loop:x:1"), None);
        assert_eq!(parse_correlation("continue:goal:x"), None);
    }

    #[test]
    fn setting_a_goal_admits_one_continuation() {
        let mut book = Book::default();
        let effects = set(&mut book);
        assert_eq!(
            effects,
            vec![Effect::Admit {
                correlation: "continue:goal_a:1".into()
            }]
        );
        let goal = book.goal.clone().unwrap();
        assert_eq!((goal.status, goal.revision, goal.live_since), (GoalStatus::Live, 1, Some(NOW)));
        // A human turn settling meanwhile does not stack a second continuation.
        let effects = book.settled(&run_settled("cmd_h", TerminalOutcome::Completed, None, 0), NOW);
        assert_eq!(effects, vec![]);
    }

    #[test]
    fn the_third_tool_less_continuation_stalls_and_a_tool_call_resets_the_count() {
        let mut book = Book::default();
        set(&mut book);
        let mut settle = |book: &mut Book, calls: u32| {
            let correlation = book.runtime.in_flight.clone();
            book.settled(&run_settled("cmd", TerminalOutcome::Completed, correlation, calls), NOW)
        };
        settle(&mut book, 0);
        settle(&mut book, 0);
        assert_eq!(book.goal.as_ref().unwrap().stalls, 2);
        settle(&mut book, 1);
        assert_eq!(book.goal.as_ref().unwrap().stalls, 0, "a tool call resets it");
        settle(&mut book, 0);
        settle(&mut book, 0);
        assert_eq!(book.live().map(|g| g.stalls), Some(2), "two in a row stay live");
        let effects = settle(&mut book, 0);
        let goal = book.goal.clone().unwrap();
        assert_eq!(goal.status, GoalStatus::Paused);
        assert_eq!(goal.pause_cause.unwrap().kind, PauseKind::Stalled);
        assert_eq!(
            effects,
            vec![Effect::Raise {
                kind: contract::ATTENTION_STALLED,
                text: "Ship it".into()
            }]
        );
    }

    #[test]
    fn a_live_sub_agent_command_makes_a_tool_less_turn_wait_instead() {
        let mut book = Book::default();
        set(&mut book);
        book.agent_sent("child_cmd", "helper", NOW).unwrap();
        let correlation = book.runtime.in_flight.clone();
        let effects =
            book.settled(&run_settled("cmd", TerminalOutcome::Completed, correlation, 0), NOW);
        assert_eq!(
            effects,
            vec![
                Effect::Raise {
                    kind: ATTENTION_WAITING,
                    text: "Waiting on helper".into()
                },
                Effect::SetRecheck {
                    goal_id: GoalId::new("goal_a"),
                    at: NOW + RECHECK_MS
                },
            ]
        );
        assert_eq!(book.goal.as_ref().unwrap().stalls, 0, "not a stall");
        book.runtime.timer = Some("t1".into());
        // The timer finds the child still working: it looks again later.
        assert_eq!(
            book.recheck("t1", &GoalId::new("goal_a"), NOW + RECHECK_MS),
            vec![Effect::SetRecheck {
                goal_id: GoalId::new("goal_a"),
                at: NOW + 2 * RECHECK_MS
            }]
        );
        book.runtime.timer = Some("t2".into());
        // The child replies: the goal continues.
        let effects = book.agent_update("child_cmd", AgentCommandState::Replied);
        assert_eq!(
            effects,
            vec![
                Effect::ClearTimer("t2".into()),
                Effect::Clear(ATTENTION_WAITING),
                Effect::Admit {
                    correlation: "continue:goal_a:2".into()
                },
            ]
        );
    }

    #[test]
    fn provisional_completion_applies_only_on_success() {
        for (outcome, achieved) in [
            (TerminalOutcome::Completed, true),
            (TerminalOutcome::Failed, false),
            (TerminalOutcome::Cancelled, false),
            (TerminalOutcome::Interrupted, false),
        ] {
            let mut book = Book::default();
            set(&mut book);
            let fence = book.fence();
            book.complete(fence, "cmd_run", Some("done")).unwrap();
            assert_eq!(book.live().map(|g| g.status), Some(GoalStatus::Live));
            let correlation = book.runtime.in_flight.clone();
            let effects = book.settled(&run_settled("cmd_run", outcome, correlation, 1), NOW);
            let goal = book.goal.clone().unwrap();
            assert_eq!(goal.status == GoalStatus::Achieved, achieved, "{outcome:?}");
            assert_eq!(goal.provisional, None);
            assert_eq!(
                effects
                    .iter()
                    .any(|e| e == &Effect::Line("Goal achieved: Ship it\ndone".into())),
                achieved
            );
        }
    }

    #[test]
    fn a_replacement_needs_the_observed_revision() {
        let mut book = Book::default();
        set(&mut book);
        book.pause(None).unwrap();
        let revision = book.goal.as_ref().unwrap().revision;
        assert!(book.set(GoalId::new("goal_b"), "Other", None, NOW).is_err());
        assert!(book.set(GoalId::new("goal_b"), "Other", Some(revision - 1), NOW).is_err());
        assert_eq!(book.goal.as_ref().unwrap().goal_id, GoalId::new("goal_a"));
        let effects = book
            .set(GoalId::new("goal_b"), "Other", Some(revision), NOW)
            .unwrap();
        assert!(effects.contains(&Effect::Line("Goal cleared: Ship it".into())));
        assert!(effects.iter().any(
            |e| matches!(e, Effect::Archive(goal) if goal.status == GoalStatus::Cleared && goal.goal_id.as_str() == "goal_a")
        ));
        assert_eq!(book.goal.as_ref().unwrap().revision, revision + 2);
    }
}
