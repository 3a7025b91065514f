//! Runs, timers and sub-agent commands: settling, the stall rule, waiting and rechecks.

use shiitake_protocol::TerminalOutcome;

use super::{Book, Effect, GoalBounds, Refused, RunSettled, parse_correlation};
use crate::contract::{
    ATTENTION_WAITING, AgentCommand, AgentCommandState, GoalId, GoalStatus, MAX_AGENT_COMMANDS,
    PauseKind, ProvisionalAction, RECHECK_MS, STALL_LIMIT,
};
use crate::text;

impl Book {
    /// A run of the Session settled (or a prompt was cancelled before it ran), under
    /// the default [`GoalBounds`].
    pub fn settled(&mut self, settled: &RunSettled, now: u64) -> Vec<Effect> {
        self.settled_within(settled, now, &GoalBounds::default())
    }

    /// A run of the Session settled, under the host's `bounds`.
    pub fn settled_within(
        &mut self,
        settled: &RunSettled,
        now: u64,
        bounds: &GoalBounds,
    ) -> Vec<Effect> {
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
            let mut spent = goal.spent;
            spent.turns = spent.turns.saturating_add(1);
            spent.tokens = spent.tokens.saturating_add(settled.tokens);
            if let Some(goal) = self.goal.as_mut() {
                goal.spent = spent;
            }
            if let Some(reached) = bounds.reached(&spent) {
                effects.extend(
                    self.pause_with(PauseKind::Stalled, Some(text::bound_reached(reached))),
                );
                return effects;
            }
            if settled.tool_calls == 0 {
                let waited_on = self.live_agents().next().map(|a| a.agent.clone());
                if let Some(agent) = waited_on {
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
