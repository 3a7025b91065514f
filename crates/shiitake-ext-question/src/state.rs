//! The Ask state machine: plain functions over one Session's Asks.
//!
//! A [`Book`] holds the Asks of a Session that are open, or resolved while a live
//! waiter held them and not yet delivered. Every transition mutates the book and
//! returns the [`Effect`]s to commit with it (follow-up prompts, attention, timers);
//! the extension applies them to the core transaction. Nothing here does I/O, so
//! the property tests drive it directly.
//!
//! Delivery rules, in one place:
//! - an Ask resolved while its waiter is live stays as `Resolved` (its delivery
//!   receipt) until the tool outcome that carries it is committed successfully
//!   ([`Book::tool_result`]), or until its run settles: then it is sent once as a
//!   follow-up, unless the run was cancelled;
//! - an Ask resolved while parked is delivered at once by one follow-up and leaves
//!   the book;
//! - the waiter's park, a person's answer and the expiry timer all go through
//!   `Book::close` or [`Book::park`] on the same row, so exactly one of them wins;
//! - a closed Ask leaves a small [`ClosedAsk`] record (the most recent
//!   [`MAX_CLOSED_REMEMBERED`](crate::contract::MAX_CLOSED_REMEMBERED)), so an answer that lost the race is told `conflict`
//!   with how the Ask closed, while an id the Session never held is `not_found`
//!   ([`AskError`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::closed;
pub use crate::closed::{AskError, ClosedAsk, Closure};
use crate::contract::{
    AskId, AskInput, AskView, Delivery, ExpireAction, MAX_OPEN_ASKS, OnExpire, Question,
    QuestionAnswer, SENDER_FALLBACK_MINUTES, WaitingOn,
};
use crate::text;
use crate::validate::{self, Refused};

/// Who answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Responder {
    /// A person, through the contract or the `/answer` flow.
    Person,
    /// The Agent that sent the work, through `agents.answer`.
    Sender,
}

/// How an Ask was closed with something to tell the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resolution {
    /// Answered.
    Answered {
        /// One per question.
        answers: Vec<QuestionAnswer>,
        /// By whom.
        by: Responder,
    },
    /// A person declined.
    Declined {
        /// Why, if said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Nobody answered in time.
    Expired {
        /// What expiry does.
        action: ExpireAction,
    },
}

impl Resolution {
    /// How an Ask closed with this resolution.
    fn closure(&self) -> Closure {
        match self {
            Resolution::Answered { .. } => Closure::Answered,
            Resolution::Declined { .. } => Closure::Declined,
            Resolution::Expired { .. } => Closure::Expired,
        }
    }
}

/// Where an Ask is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AskState {
    /// Waiting for an answer; `live` while a tool call of its run waits in-turn.
    Open {
        /// A waiter holds it.
        live: bool,
    },
    /// Resolved while live: the receipt, kept until the model has it durably.
    Resolved {
        /// What to deliver.
        resolution: Resolution,
    },
}

/// One stored Ask (collection `asks`, keyed by its id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AskRow {
    /// Its id.
    pub ask_id: AskId,
    /// Its questions, validated.
    pub questions: Vec<Question>,
    /// Unix milliseconds it opened.
    pub created_at: u64,
    /// The run (command id) that asked.
    pub run: String,
    /// The tool call's execution id; a replay of the same call finds the Ask again.
    pub execution: String,
    /// Expiry, if asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expire: Option<OnExpire>,
    /// The Agent it waits on first, when the work was sent by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<WaitingOn>,
    /// Timers set for it (expiry, sender fallback), to clear when it closes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timers: Vec<String>,
    /// Where it is.
    pub state: AskState,
}

impl AskRow {
    /// Unix milliseconds it expires, with `onExpire`.
    pub fn expires_at(&self) -> Option<u64> {
        self.on_expire
            .map(|e| self.created_at + u64::from(e.after_minutes) * 60_000)
    }

    fn is_open(&self) -> bool {
        matches!(self.state, AskState::Open { .. })
    }

    fn needs_person(&self) -> bool {
        self.waiting_on.as_ref().is_none_or(|w| w.escalated)
    }

    /// How clients see it.
    pub fn view(&self) -> AskView {
        AskView {
            ask_id: self.ask_id.clone(),
            questions: self.questions.clone(),
            created_at: self.created_at,
            expires_at: self.expires_at(),
            on_expire: self.on_expire.map(|e| e.action),
            waiting_on: self.waiting_on.clone(),
        }
    }
}

/// Why a timer was set for an Ask; stored in the timer's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerPurpose {
    /// `onExpire` came due.
    Expire,
    /// The sending Agent did not answer within [`SENDER_FALLBACK_MINUTES`].
    SenderFallback,
}

/// Something to commit with a transition besides the rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Admit one self-contained follow-up prompt.
    Admit {
        /// The Ask it delivers.
        ask_id: AskId,
        /// The prompt.
        text: String,
    },
    /// Raise the Ask's attention.
    Raise {
        /// The Ask.
        ask_id: AskId,
        /// It waits on a person (inbox `needs_you`).
        inbox: bool,
        /// What it says.
        text: String,
    },
    /// Clear the Ask's attention.
    Clear {
        /// The Ask.
        ask_id: AskId,
    },
    /// Set a timer for the Ask; its id goes into the row's `timers`.
    SetTimer {
        /// The Ask.
        ask_id: AskId,
        /// Why.
        purpose: TimerPurpose,
        /// Unix milliseconds.
        at: u64,
    },
    /// Clear timers that were set for a closed Ask.
    ClearTimers(Vec<String>),
}

/// What a new `question.ask` call asks for.
#[derive(Clone, Debug)]
pub struct AskRequest {
    /// The id to give a new Ask.
    pub ask_id: AskId,
    /// The tool call's execution id.
    pub execution: String,
    /// The run.
    pub run: String,
    /// The validated-later input.
    pub input: AskInput,
    /// The Agent that sent the run's work, when the host lets Asks wait on it.
    pub sender: Option<(String, String)>,
    /// Unix milliseconds now.
    pub now: u64,
}

/// What `ask` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// A new Ask; `live` when the call waits in-turn for it.
    New {
        /// Its id.
        ask_id: AskId,
        /// The call waits for it.
        live: bool,
    },
    /// The same tool call again (a replay after a restart): its Ask, as it is now.
    Again {
        /// Its id.
        ask_id: AskId,
        /// The call waits for it.
        live: bool,
    },
}

/// What a waiter finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Still open.
    Waiting,
    /// Resolved while it waited: deliver this in-turn.
    Resolved(Resolution),
    /// Withdrawn, or delivered otherwise: nothing to deliver.
    Gone,
}

/// One Session's Asks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Book {
    /// By id (ULIDs sort by time).
    pub asks: BTreeMap<AskId, AskRow>,
    /// The most recently closed Asks, at most [`MAX_CLOSED_REMEMBERED`](crate::contract::MAX_CLOSED_REMEMBERED).
    pub closed: BTreeMap<AskId, ClosedAsk>,
}

impl Book {
    /// The open Asks, oldest first.
    pub fn open(&self) -> impl Iterator<Item = &AskRow> {
        self.asks.values().filter(|row| row.is_open())
    }

    fn find_execution(&self, execution: &str) -> Option<&AskRow> {
        self.asks.values().find(|row| row.execution == execution)
    }

    /// `question.ask`: opens an Ask, or finds the one this same call opened before a restart.
    pub fn ask(&mut self, request: AskRequest) -> Result<(Opened, Vec<Effect>), Refused> {
        let waits =
            request.input.mode == crate::contract::AskMode::Wait && request.sender.is_none();
        if let Some(existing) = self.find_execution(&request.execution) {
            let ask_id = existing.ask_id.clone();
            let mut live = false;
            if let Some(row) = self.asks.get_mut(&ask_id)
                && let AskState::Open { live: was } = &mut row.state
            {
                *was = waits;
                live = waits;
            }
            if let Some(AskState::Resolved { .. }) = self.asks.get(&ask_id).map(|r| &r.state) {
                live = true;
            }
            return Ok((Opened::Again { ask_id, live }, Vec::new()));
        }
        validate::ask_input(&request.input)?;
        if self.open().count() >= MAX_OPEN_ASKS {
            return Err(Refused(format!(
                "this Session already holds {MAX_OPEN_ASKS} open questions; wait for an answer or withdraw one (question.withdraw)"
            )));
        }
        if waits
            && self.asks.values().any(|row| {
                row.run == request.run && matches!(row.state, AskState::Open { live: true })
            })
        {
            return Err(Refused(
                "this run already waits on a question; one live question per run".into(),
            ));
        }
        let waiting_on = request.sender.map(|(agent, session_id)| WaitingOn {
            agent,
            session_id,
            escalated: false,
        });
        let row = AskRow {
            ask_id: request.ask_id.clone(),
            questions: request.input.questions,
            created_at: request.now,
            run: request.run,
            execution: request.execution,
            on_expire: request.input.on_expire,
            waiting_on,
            timers: Vec::new(),
            state: AskState::Open { live: waits },
        };
        let mut effects = vec![raise(&row)];
        if let Some(at) = row.expires_at() {
            effects.push(Effect::SetTimer {
                ask_id: row.ask_id.clone(),
                purpose: TimerPurpose::Expire,
                at,
            });
        }
        if row.waiting_on.is_some() {
            effects.push(Effect::SetTimer {
                ask_id: row.ask_id.clone(),
                purpose: TimerPurpose::SenderFallback,
                at: request.now + u64::from(SENDER_FALLBACK_MINUTES) * 60_000,
            });
        }
        let ask_id = row.ask_id.clone();
        self.asks.insert(ask_id.clone(), row);
        Ok((
            Opened::New {
                ask_id,
                live: waits,
            },
            effects,
        ))
    }

    /// What the waiter of `ask_id` finds now.
    pub fn check(&self, ask_id: &AskId) -> Check {
        match self.asks.get(ask_id).map(|row| &row.state) {
            Some(AskState::Open { .. }) => Check::Waiting,
            Some(AskState::Resolved { resolution }) => Check::Resolved(resolution.clone()),
            None => Check::Gone,
        }
    }

    /// The waiter lets go (its wait ran out, a steer arrived, the run stopped): an open
    /// Ask is parked; one resolved meanwhile is delivered in-turn after all.
    pub fn park(&mut self, ask_id: &AskId) -> Check {
        match self.asks.get_mut(ask_id).map(|row| &mut row.state) {
            Some(AskState::Open { live }) => {
                *live = false;
                Check::Waiting
            }
            Some(AskState::Resolved { resolution }) => Check::Resolved(resolution.clone()),
            None => Check::Gone,
        }
    }

    /// Closes an open Ask with `resolution`: in-turn when live, else one follow-up now.
    fn close(&mut self, ask_id: &AskId, resolution: Resolution) -> Option<(Delivery, Vec<Effect>)> {
        let row = self.asks.get_mut(ask_id)?;
        let AskState::Open { live } = row.state else {
            return None;
        };
        let mut effects = vec![Effect::Clear {
            ask_id: ask_id.clone(),
        }];
        if !row.timers.is_empty() {
            effects.push(Effect::ClearTimers(std::mem::take(&mut row.timers)));
        }
        let how = resolution.closure();
        if live {
            row.state = AskState::Resolved { resolution };
            self.remember(ask_id, how);
            return Some((Delivery::InTurn, effects));
        }
        let text = text::follow_up(row, &resolution);
        self.asks.remove(ask_id);
        self.remember(ask_id, how);
        effects.push(Effect::Admit {
            ask_id: ask_id.clone(),
            text,
        });
        Some((Delivery::FollowUp, effects))
    }

    /// Records that `ask_id` closed.
    fn remember(&mut self, ask_id: &AskId, how: Closure) {
        closed::remember(&mut self.closed, ask_id, how);
    }

    /// The open Ask `ask_id`, or why a request for it cannot go on.
    fn open_row(&self, ask_id: &AskId) -> Result<&AskRow, AskError> {
        let closed = |how| AskError::Closed {
            ask_id: ask_id.clone(),
            how,
        };
        match self.asks.get(ask_id) {
            Some(row) => match &row.state {
                AskState::Open { .. } => Ok(row),
                AskState::Resolved { resolution } => Err(closed(resolution.closure())),
            },
            None => match self.closed.get(ask_id) {
                Some(record) => Err(closed(record.how)),
                None => Err(AskError::Unknown(ask_id.clone())),
            },
        }
    }

    /// A person (or the sending Agent, from its Session `from`) answers.
    pub fn answer(
        &mut self,
        ask_id: &AskId,
        answers: Vec<QuestionAnswer>,
        by: Responder,
        from: Option<&str>,
    ) -> Result<(Delivery, Vec<Effect>), AskError> {
        let row = self.open_row(ask_id)?;
        if by == Responder::Sender {
            check_sender(row, from)?;
        }
        validate::answers(&row.questions, &answers)?;
        self.close(ask_id, Resolution::Answered { answers, by })
            .ok_or_else(|| AskError::Unknown(ask_id.clone()))
    }

    /// A person declines to answer.
    pub fn decline(
        &mut self,
        ask_id: &AskId,
        reason: Option<String>,
    ) -> Result<(Delivery, Vec<Effect>), AskError> {
        self.open_row(ask_id)?;
        validate::reason(reason.as_deref())?;
        self.close(ask_id, Resolution::Declined { reason })
            .ok_or_else(|| AskError::Unknown(ask_id.clone()))
    }

    /// The model withdraws its own open Ask: nothing is delivered.
    pub fn withdraw(&mut self, ask_id: &AskId) -> Result<Vec<Effect>, AskError> {
        self.open_row(ask_id)?;
        let mut effects = vec![Effect::Clear {
            ask_id: ask_id.clone(),
        }];
        if let Some(row) = self.asks.remove(ask_id)
            && !row.timers.is_empty()
        {
            effects.push(Effect::ClearTimers(row.timers));
        }
        self.remember(ask_id, Closure::Withdrawn);
        Ok(effects)
    }

    /// A timer of the Ask came due. Expiry shares `close` with the waiter and
    /// the person, so it delivers at most once; a timer of a closed Ask does nothing.
    pub fn fire(&mut self, ask_id: &AskId, purpose: TimerPurpose) -> Vec<Effect> {
        match purpose {
            TimerPurpose::Expire => {
                let Some(action) = self
                    .asks
                    .get(ask_id)
                    .filter(|row| row.is_open())
                    .and_then(|row| row.on_expire)
                    .map(|e| e.action)
                else {
                    return Vec::new();
                };
                self.close(ask_id, Resolution::Expired { action })
                    .map(|(_, effects)| effects)
                    .unwrap_or_default()
            }
            TimerPurpose::SenderFallback => self.escalate_row(ask_id),
        }
    }

    fn escalate_row(&mut self, ask_id: &AskId) -> Vec<Effect> {
        let Some(row) = self.asks.get_mut(ask_id).filter(|row| row.is_open()) else {
            return Vec::new();
        };
        match &mut row.waiting_on {
            Some(waiting) if !waiting.escalated => waiting.escalated = true,
            _ => return Vec::new(),
        }
        vec![raise(row)]
    }

    /// The sending Agent passes its Ask to a person.
    pub fn escalate(&mut self, ask_id: &AskId, from: &str) -> Result<Vec<Effect>, AskError> {
        check_sender(self.open_row(ask_id)?, Some(from))?;
        Ok(self.escalate_row(ask_id))
    }

    /// The open Asks that wait on the Session `from` and were not passed to a person.
    pub fn waiting_on<'a>(&'a self, from: &'a str) -> impl Iterator<Item = &'a AskRow> {
        self.open().filter(move |row| {
            row.waiting_on
                .as_ref()
                .is_some_and(|w| w.session_id == from && !w.escalated)
        })
    }

    /// The sending Session's turn ended: every Ask still waiting on it goes to a person.
    pub fn sender_turn_ended(&mut self, from: &str) -> Vec<Effect> {
        let waiting: Vec<AskId> = self
            .waiting_on(from)
            .map(|row| row.ask_id.clone())
            .collect();
        waiting
            .iter()
            .flat_map(|ask_id| self.escalate_row(ask_id))
            .collect()
    }

    /// The result of the tool call `execution` was committed: a successful one
    /// carried the in-turn answer, which releases the receipt.
    pub fn tool_result(&mut self, execution: &str, is_error: bool) {
        if is_error {
            return;
        }
        let delivered = self
            .find_execution(execution)
            .filter(|row| matches!(row.state, AskState::Resolved { .. }))
            .map(|row| row.ask_id.clone());
        if let Some(ask_id) = delivered {
            self.asks.remove(&ask_id);
        }
    }

    /// The run `run` settled: its live Asks are parked; an in-turn answer whose tool
    /// outcome was never saved goes once as a follow-up, unless the run was cancelled.
    pub fn settled(&mut self, run: &str, cancelled: bool) -> Vec<Effect> {
        let mut effects = Vec::new();
        let mut delivered = Vec::new();
        for row in self.asks.values_mut().filter(|row| row.run == run) {
            match &row.state {
                AskState::Open { .. } => row.state = AskState::Open { live: false },
                AskState::Resolved { resolution } => {
                    if !cancelled {
                        effects.push(Effect::Admit {
                            ask_id: row.ask_id.clone(),
                            text: text::follow_up(row, resolution),
                        });
                    }
                    delivered.push(row.ask_id.clone());
                }
            }
        }
        for ask_id in delivered {
            self.asks.remove(&ask_id);
        }
        effects
    }
}

fn check_sender(row: &AskRow, from: Option<&str>) -> Result<(), Refused> {
    match (&row.waiting_on, from) {
        (Some(waiting), Some(from)) if waiting.session_id == from => Ok(()),
        (Some(waiting), _) => Err(Refused(format!(
            "question {} waits on {}'s Session, not this one",
            row.ask_id, waiting.agent
        ))),
        (None, _) => Err(Refused(format!(
            "question {} waits on a person, not on an Agent",
            row.ask_id
        ))),
    }
}

fn raise(row: &AskRow) -> Effect {
    let text = if row.needs_person() {
        row.questions
            .first()
            .map(|q| q.question.clone())
            .unwrap_or_default()
    } else {
        row.view().status_line()
    };
    Effect::Raise {
        ask_id: row.ask_id.clone(),
        inbox: row.needs_person(),
        text,
    }
}
