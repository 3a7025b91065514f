//! The rules, as plain functions over one Session's book of approvals. Nothing here
//! does I/O; the extension runs each transition in one core transaction and turns
//! its [`Effect`]s into attention and follow-up prompts.
//!
//! An approval is born when the gate holds a call (the policy asks) and lives through:
//!
//! | stage | means | leaves it |
//! | --- | --- | --- |
//! | `Live` | the call waits in its turn | a person answers (`Answered`); the wait ends (`Parked`); the run is cancelled (closed) |
//! | `Answered` | decided while the call waited; the waiting call has not taken it | the gate takes it (`Delivered`) |
//! | `Delivered` | the call ran (allowed) or was refused with the reason (denied) | the run settles (closed) |
//! | `Parked` | the run went on without the call | a person answers: closed, with one follow-up prompt |
//!
//! The waiter letting go and a person answering are one transition on the same row,
//! so exactly one of them wins: an answer that lands as the wait ends is delivered
//! in-turn. The gate asks again after a restart about a call that never started;
//! `Answered` and `Delivered` give the same verdict every time they are asked, so a
//! decision committed before a crash is the one the resumed call gets.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::command::{COMMAND_TOOLS, allowed_by_session, session_commands};
use crate::contract::{
    ApprovalId, ApprovalProjection, ApprovalView, Decision, Delivery, MAX_ALLOWED_COMMAND_BYTES,
    MAX_ALLOWED_COMMANDS, MAX_ALLOWED_TOOLS, MAX_CLOSED_REMEMBERED, MAX_ONE_TIME_ALLOWANCES,
    MAX_OPEN_APPROVALS, MAX_REASON_CHARS,
};
use crate::policy::{Policy, Ruling};
use crate::text;

/// A person's answer, as kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// Allow once, allow for the Session, deny.
    pub decision: Decision,
    /// Why, with a denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where an approval is (see the module's table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum Stage {
    /// The call waits in its turn.
    Live,
    /// Decided while the call waited; not yet taken by it.
    Answered {
        /// The answer.
        answer: Answer,
    },
    /// Taken by the call.
    Delivered {
        /// The answer.
        answer: Answer,
    },
    /// The run went on without the call.
    Parked,
}

/// One held call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// Its number in the Session; its id is `ap<number>`.
    pub number: u64,
    /// The call's execution id (`<command id>:<call id>`).
    pub execution: String,
    /// The run.
    pub run: String,
    /// The tool the model called.
    pub tool: String,
    /// What a person is shown of its arguments.
    pub arguments: Value,
    /// What the tool says a person should know besides them ([`crate::preview::facts`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
    /// For a tool that runs commands, what "allow for this Session" allows instead of
    /// the tool: its simple commands, exactly ([`crate::command::session_commands`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// The call's fingerprint: its tool and its whole arguments ([`crate::fingerprint`]).
    pub fingerprint: String,
    /// Why the host asks.
    pub why: String,
    /// Unix milliseconds it was made.
    pub created_at: u64,
    /// Where it is.
    pub stage: Stage,
}

impl Approval {
    /// Its id.
    pub fn id(&self) -> ApprovalId {
        ApprovalId::numbered(self.number)
    }

    /// What clients see of it, while it waits for a person.
    pub fn view(&self) -> Option<ApprovalView> {
        let parked = match self.stage {
            Stage::Live => false,
            Stage::Parked => true,
            Stage::Answered { .. } | Stage::Delivered { .. } => return None,
        };
        Some(ApprovalView {
            approval_id: self.id(),
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            facts: self.facts.clone(),
            why: self.why.clone(),
            created_at: self.created_at,
            parked,
        })
    }
}

/// A parked call a person allowed once: the model's next call of the same tool with
/// the same arguments runs without asking, once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OneTime {
    /// The approval it came from (its number orders the allowances).
    pub number: u64,
    /// The tool.
    pub tool: String,
    /// The call's fingerprint.
    pub fingerprint: String,
}

/// How a closed approval ended, remembered so a late answer is a conflict that says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Closed {
    /// A person answered it.
    Answered,
    /// Its run was cancelled before anyone answered.
    Withdrawn,
}

/// One Session's approvals and allowances.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Book {
    /// Held calls not closed yet, by number.
    pub approvals: BTreeMap<u64, Approval>,
    /// Tools a person allowed for the rest of the Session.
    pub allowed: BTreeSet<String>,
    /// Commands a person allowed for the rest of the Session, each exactly.
    pub allowed_commands: BTreeSet<String>,
    /// Parked calls allowed once, by the number of their approval.
    pub one_time: BTreeMap<u64, OneTime>,
    /// How the latest closed approvals ended, by number.
    pub closed: BTreeMap<u64, Closed>,
    /// The number the next approval gets.
    pub next: u64,
}

/// A call the gate asks about for the first time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The call's execution id.
    pub execution: String,
    /// The run.
    pub run: String,
    /// The tool the model called.
    pub tool: String,
    /// What a person may see of its arguments ([`crate::preview::preview`]).
    pub arguments: Value,
    /// What a person may see of the facts its tool gives ([`crate::preview::facts`]).
    pub facts: BTreeMap<String, String>,
    /// Its tool and whole arguments, hashed ([`crate::fingerprint`]).
    pub fingerprint: String,
    /// Whether the tool is marked safe to repeat.
    pub safe_to_repeat: bool,
    /// The command it runs, for a tool that runs commands (`crate::command`).
    pub command: Option<crate::command::Command>,
    /// Unix milliseconds now.
    pub now: u64,
}

/// What the gate answers (core's verdicts, without core).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not ours to decide.
    Pass,
    /// Run it.
    Allow,
    /// Do not run it; the model reads this.
    Deny(String),
    /// Hold it until the state changes.
    Ask,
}

/// Why the in-turn wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LetGo {
    /// It ran out, or a steer came: the run goes on without the call.
    Park,
    /// The run was cancelled.
    Cancel,
}

/// What a transition asks the extension to do besides changing the book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// The approval waits on a person: the Session's inbox state is `needs_you`.
    Raise {
        /// Which.
        id: ApprovalId,
        /// The attention's text.
        text: String,
    },
    /// Nobody needs to answer it any more.
    Clear {
        /// Which.
        id: ApprovalId,
    },
    /// One follow-up prompt tells the model what a person decided about a call that
    /// did not wait for it.
    FollowUp {
        /// Which.
        id: ApprovalId,
        /// The prompt.
        text: String,
    },
}

/// Why an answer was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The answer breaks a rule (a reason with an allow, too long, too many tools).
    #[error("{0}")]
    Invalid(String),
    /// No such approval in this Session (or closed too long ago to remember).
    #[error("{0}")]
    NotFound(String),
    /// The approval was answered or withdrawn before this answer.
    #[error("{0}")]
    Conflict(String),
}

impl Book {
    /// The open approvals a person is asked about (live or parked), oldest first.
    pub fn waiting(&self) -> impl Iterator<Item = &Approval> {
        self.approvals
            .values()
            .filter(|approval| approval.view().is_some())
    }

    /// What clients see.
    pub fn projection(&self) -> ApprovalProjection {
        ApprovalProjection {
            approvals: self.waiting().filter_map(Approval::view).collect(),
            allowed: self.allowed.iter().cloned().collect(),
            allowed_commands: self.allowed_commands.iter().cloned().collect(),
        }
    }

    fn by_execution(&self, execution: &str) -> Option<u64> {
        self.approvals
            .values()
            .find(|approval| approval.execution == execution)
            .map(|approval| approval.number)
    }

    fn close(&mut self, number: u64, how: Closed) {
        self.approvals.remove(&number);
        self.closed.insert(number, how);
        while self.closed.len() > MAX_CLOSED_REMEMBERED {
            self.closed.pop_first();
        }
    }

    /// The model called a tool: allowed for the Session, allowed once, or the policy's
    /// ruling (a new approval when it asks).
    pub fn call(&mut self, policy: &Policy, call: Call) -> (Verdict, Vec<Effect>) {
        let decided = policy.decide_call(&call.tool, call.safe_to_repeat, call.command.as_ref());
        let why = decided.why(&call.tool);
        // A command a rule denies stays denied, whatever was allowed for the Session.
        if call.command.is_some() && decided.ruling == Ruling::Deny {
            return (
                Verdict::Deny(text::denied_by_policy(&call.tool, &why)),
                Vec::new(),
            );
        }
        if self.allowed.contains(&call.tool) {
            return (Verdict::Allow, Vec::new());
        }
        let command = call
            .command
            .as_ref()
            .filter(|_| COMMAND_TOOLS.contains(&call.tool.as_str()));
        if let Some(command) = command
            && !self.allowed_commands.is_empty()
            && allowed_by_session(&policy.commands, &self.allowed_commands, command)
        {
            return (Verdict::Allow, Vec::new());
        }
        let one_time = self
            .one_time
            .iter()
            .find(|(_, allowed)| {
                allowed.tool == call.tool && allowed.fingerprint == call.fingerprint
            })
            .map(|(number, _)| *number);
        if let Some(number) = one_time {
            self.one_time.remove(&number);
            return (Verdict::Allow, Vec::new());
        }
        match decided.ruling {
            Ruling::Allow => (Verdict::Pass, Vec::new()),
            Ruling::Deny => (
                Verdict::Deny(text::denied_by_policy(&call.tool, &why)),
                Vec::new(),
            ),
            Ruling::Ask => self.ask(call, why),
        }
    }

    fn ask(&mut self, call: Call, why: String) -> (Verdict, Vec<Effect>) {
        let same = self.approvals.values().find(|approval| {
            approval.stage == Stage::Parked
                && approval.tool == call.tool
                && approval.fingerprint == call.fingerprint
        });
        if let Some(parked) = same {
            return (Verdict::Deny(text::still_waiting(parked)), Vec::new());
        }
        let open = self
            .approvals
            .values()
            .filter(|approval| !matches!(approval.stage, Stage::Delivered { .. }))
            .count();
        if open >= MAX_OPEN_APPROVALS {
            return (Verdict::Deny(text::too_many(&call.tool)), Vec::new());
        }
        self.next = self.next.max(1);
        let number = self.next;
        self.next += 1;
        let commands = call
            .command
            .as_ref()
            .filter(|_| COMMAND_TOOLS.contains(&call.tool.as_str()))
            .map(session_commands)
            .unwrap_or_default();
        let approval = Approval {
            number,
            execution: call.execution,
            run: call.run,
            tool: call.tool,
            arguments: call.arguments,
            facts: call.facts,
            commands,
            fingerprint: call.fingerprint,
            why,
            created_at: call.now,
            stage: Stage::Live,
        };
        let raise = Effect::Raise {
            id: approval.id(),
            text: text::attention(&approval),
        };
        self.approvals.insert(number, approval);
        (Verdict::Ask, vec![raise])
    }

    /// The gate asks again about a call it held (its state changed, or after a
    /// restart): the same verdict until a person answers, then that answer, every time.
    pub fn recheck(&mut self, execution: &str) -> Verdict {
        let Some(number) = self.by_execution(execution) else {
            // Closed under the call (its run was cancelled): it does not run.
            return Verdict::Deny(text::GONE.to_owned());
        };
        self.deliver(number).unwrap_or(Verdict::Ask)
    }

    /// The answer of approval `number`, taken by its call; `None` while undecided.
    fn deliver(&mut self, number: u64) -> Option<Verdict> {
        let approval = self.approvals.get_mut(&number)?;
        let answer = match &approval.stage {
            Stage::Answered { answer } | Stage::Delivered { answer } => answer.clone(),
            Stage::Parked => return Some(Verdict::Deny(text::parked(approval))),
            Stage::Live => return None,
        };
        if answer.decision.allows() {
            // The gate records the start in this transaction; it never asks again.
            self.close(number, Closed::Answered);
            return Some(Verdict::Allow);
        }
        // Kept until the run settles: a restart asks again and is denied again.
        let denied = text::denied(&approval.tool, answer.reason.as_deref());
        approval.stage = Stage::Delivered { answer };
        Some(Verdict::Deny(denied))
    }

    /// The in-turn wait ends: an answer that landed meanwhile is delivered; otherwise
    /// the call parks (the person can still answer), or, with its run cancelled, goes.
    pub fn let_go(&mut self, execution: &str, why: LetGo) -> (Verdict, Vec<Effect>) {
        let Some(number) = self.by_execution(execution) else {
            return (Verdict::Deny(text::GONE.to_owned()), Vec::new());
        };
        if let Some(verdict) = self.deliver(number) {
            return (verdict, Vec::new());
        }
        match why {
            LetGo::Cancel => {
                self.close(number, Closed::Withdrawn);
                (
                    Verdict::Deny(text::GONE.to_owned()),
                    vec![Effect::Clear {
                        id: ApprovalId::numbered(number),
                    }],
                )
            }
            LetGo::Park => {
                let Some(approval) = self.approvals.get_mut(&number) else {
                    return (Verdict::Deny(text::GONE.to_owned()), Vec::new());
                };
                approval.stage = Stage::Parked;
                (Verdict::Deny(text::parked(approval)), Vec::new())
            }
        }
    }

    /// A person answers: a waiting call takes it in-turn; a parked one is closed and
    /// the model gets one follow-up prompt.
    pub fn answer(
        &mut self,
        id: &ApprovalId,
        answer: Answer,
    ) -> Result<(Delivery, Vec<Effect>), Refusal> {
        if let Some(reason) = &answer.reason {
            if answer.decision.allows() {
                return Err(Refusal::Invalid("a reason goes with deny only".into()));
            }
            if reason.chars().count() > MAX_REASON_CHARS {
                return Err(Refusal::Invalid(format!(
                    "the reason is longer than {MAX_REASON_CHARS} characters"
                )));
            }
        }
        let answer = Answer {
            reason: answer.reason.filter(|reason| !reason.trim().is_empty()),
            ..answer
        };
        let number = id.number();
        let found = number.and_then(|number| self.approvals.get(&number));
        let Some(approval) = found else {
            return Err(match number.and_then(|number| self.closed.get(&number)) {
                Some(Closed::Answered) => {
                    Refusal::Conflict(format!("approval {id} was already answered"))
                }
                Some(Closed::Withdrawn) => Refusal::Conflict(format!(
                    "approval {id} was withdrawn: its run was cancelled"
                )),
                None => {
                    Refusal::NotFound(format!("no call waits for approval {id} in this Session"))
                }
            });
        };
        let number = approval.number;
        let tool = approval.tool.clone();
        let commands = approval.commands.clone();
        let parked = match approval.stage {
            Stage::Live => false,
            Stage::Parked => true,
            Stage::Answered { .. } | Stage::Delivered { .. } => {
                return Err(Refusal::Conflict(format!(
                    "approval {id} was already answered"
                )));
            }
        };
        if answer.decision == Decision::AllowSession {
            self.allow_for_session(tool, commands)?;
        }
        let mut effects = vec![Effect::Clear { id: id.clone() }];
        if !parked {
            if let Some(approval) = self.approvals.get_mut(&number) {
                approval.stage = Stage::Answered { answer };
            }
            return Ok((Delivery::InTurn, effects));
        }
        effects.push(self.follow_up(number, &answer));
        self.close(number, Closed::Answered);
        Ok((Delivery::FollowUp, effects))
    }

    /// Allows `tool` for the rest of the Session, or for a tool that runs commands, its
    /// `commands` (each exactly); refused past the bounds.
    fn allow_for_session(&mut self, tool: String, commands: Vec<String>) -> Result<(), Refusal> {
        if commands.is_empty() {
            if !self.allowed.contains(&tool) && self.allowed.len() >= MAX_ALLOWED_TOOLS {
                return Err(Refusal::Invalid(format!(
                    "this Session already allows {MAX_ALLOWED_TOOLS} tools; allow this call once instead"
                )));
            }
            self.allowed.insert(tool);
            return Ok(());
        }
        if commands
            .iter()
            .any(|command| command.len() > MAX_ALLOWED_COMMAND_BYTES)
        {
            return Err(Refusal::Invalid(format!(
                "a command longer than {MAX_ALLOWED_COMMAND_BYTES} bytes is not allowed for \
                 the Session; allow this call once instead"
            )));
        }
        let new = commands
            .iter()
            .filter(|command| !self.allowed_commands.contains(*command))
            .count();
        if self.allowed_commands.len() + new > MAX_ALLOWED_COMMANDS {
            return Err(Refusal::Invalid(format!(
                "this Session already allows {} of at most {MAX_ALLOWED_COMMANDS} commands; \
                 allow this call once instead",
                self.allowed_commands.len()
            )));
        }
        self.allowed_commands.extend(commands);
        Ok(())
    }

    /// The follow-up for a decision the call did not wait for; an allow-once leaves a
    /// one-time allowance for the model's next identical call.
    fn follow_up(&mut self, number: u64, answer: &Answer) -> Effect {
        let id = ApprovalId::numbered(number);
        let Some(approval) = self.approvals.get(&number) else {
            return Effect::FollowUp {
                id,
                text: text::GONE.to_owned(),
            };
        };
        let text = text::follow_up(approval, answer);
        if answer.decision == Decision::AllowOnce {
            let allowance = OneTime {
                number,
                tool: approval.tool.clone(),
                fingerprint: approval.fingerprint.clone(),
            };
            self.one_time.insert(number, allowance);
            while self.one_time.len() > MAX_ONE_TIME_ALLOWANCES {
                self.one_time.pop_first();
            }
        }
        Effect::FollowUp { id, text }
    }

    /// A run settled: its calls that still wait are parked (or withdrawn when it was
    /// cancelled); a decision its call never took goes as a follow-up (not when
    /// cancelled); delivered ones close.
    pub fn settled(&mut self, run: &str, cancelled: bool) -> Vec<Effect> {
        let numbers: Vec<u64> = self
            .approvals
            .values()
            .filter(|approval| approval.run == run)
            .map(|approval| approval.number)
            .collect();
        let mut effects = Vec::new();
        for number in numbers {
            let Some(stage) = self.approvals.get(&number).map(|a| a.stage.clone()) else {
                continue;
            };
            match stage {
                Stage::Live if cancelled => {
                    self.close(number, Closed::Withdrawn);
                    effects.push(Effect::Clear {
                        id: ApprovalId::numbered(number),
                    });
                }
                Stage::Live => {
                    if let Some(approval) = self.approvals.get_mut(&number) {
                        approval.stage = Stage::Parked;
                    }
                }
                Stage::Answered { answer } => {
                    if !cancelled {
                        effects.push(self.follow_up(number, &answer));
                    }
                    self.close(number, Closed::Answered);
                }
                Stage::Delivered { .. } => self.close(number, Closed::Answered),
                Stage::Parked => {}
            }
        }
        effects
    }
}

#[cfg(test)]
mod tests;
