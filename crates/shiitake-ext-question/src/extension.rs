//! The extension on shiitake-core: hooks, projection, prompt section, tools, catalog.

use serde::Deserialize;
use serde_json::{Value, json};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, FiredTimer, Grant, Grants, HookError, RunContext,
    Settled, StateScope, StateView, ToolOutcome, Tx,
};
use shiitake_protocol::catalog::Catalog;
use shiitake_protocol::{BoundError, ExtensionId, TerminalOutcome};

use crate::contract::{
    AnswerAsk, AskStatus, DeclineAsk, EXTENSION_ID, NAMESPACE, QuestionProjection, Receipt,
};
use crate::state::Responder;
use crate::store::{self, TimerPayload};
use crate::tools::{self, RunFacts};
use crate::{catalog, flow};

/// How the host composes the question extension.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuestionConfig {
    /// When the run's work was sent by another Agent, an Ask waits on that Agent
    /// first (on for Local, off for Hub).
    pub waits_on_sender: bool,
}

/// Ask: the model asks a person (or the sending Agent) to decide.
pub struct QuestionExtension {
    definition: ExtensionDefinition,
    config: QuestionConfig,
}

/// Exactly what the host must grant the question extension.
pub fn question_grants() -> Grants {
    Grants::none()
        .with(Grant::State)
        .with(Grant::Prompt)
        .with(Grant::Projection)
        .with(Grant::Commands)
        .with(Grant::Timers)
        .with(Grant::Admissions)
        .with(Grant::Tools)
        .with(Grant::Attention)
}

impl QuestionExtension {
    /// The extension with `config`.
    pub fn new(config: QuestionConfig) -> Result<Self, BoundError> {
        let definition = ExtensionDefinition {
            id: extension_id()?,
            namespace: NAMESPACE.into(),
            scopes: vec![StateScope::Session],
            schema_version: 1,
            migrations: Vec::new(),
            configuration: json!({"waitsOnSender": config.waits_on_sender}),
        };
        Ok(Self { definition, config })
    }
}

/// The extension's id as core takes it.
pub fn extension_id() -> Result<ExtensionId, BoundError> {
    ExtensionId::new(EXTENSION_ID)
}

fn decode<T: for<'de> Deserialize<'de>>(command: &str, input: Value) -> Result<T, HookError> {
    serde_json::from_value(input).map_err(|error| HookError::Invalid(format!("{command}: {error}")))
}

fn receipt(
    ask_id: crate::contract::AskId,
    status: AskStatus,
    delivery: crate::contract::Delivery,
) -> Value {
    json!(Receipt {
        ask_id,
        status,
        delivery,
    })
}

impl Extension for QuestionExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match command {
            "list" => {
                let book = store::load(tx)?;
                Ok(json!(book.open().map(|row| row.view()).collect::<Vec<_>>()))
            }
            "answer" => {
                let answer: AnswerAsk = decode(command, input)?;
                let ask_id = answer.ask_id.clone();
                let delivery = store::transact(tx, |book| {
                    book.answer(&ask_id, answer.answers, Responder::Person, None)
                })?;
                Ok(receipt(answer.ask_id, AskStatus::Answered, delivery))
            }
            "decline" => {
                let decline: DeclineAsk = decode(command, input)?;
                let ask_id = decline.ask_id.clone();
                let delivery = store::transact(tx, |book| book.decline(&ask_id, decline.reason))?;
                Ok(receipt(decline.ask_id, AskStatus::Declined, delivery))
            }
            flow::ANSWER_FLOW => {
                let book = store::load(tx)?;
                Ok(json!(flow::answer_step(&book, &input)))
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
        let cancelled = settled.outcome == TerminalOutcome::Cancelled;
        let run = settled.command_id.as_str().to_owned();
        store::transact(tx, |book| Ok(((), book.settled(&run, cancelled))))
    }

    fn on_tool_result(&self, tx: &mut Tx<'_>, outcome: &ToolOutcome) -> Result<(), HookError> {
        let execution = outcome.execution_id.as_str().to_owned();
        let is_error = outcome.is_error;
        store::transact(tx, |book| {
            book.tool_result(&execution, is_error);
            Ok(((), Vec::new()))
        })
    }

    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
        let Ok(payload) = serde_json::from_value::<TimerPayload>(timer.payload.clone()) else {
            return Err(HookError::Failed(format!(
                "a question timer carries an unknown payload: {}",
                timer.payload
            )));
        };
        store::transact(tx, |book| {
            Ok(((), book.fire(&payload.ask_id, payload.purpose)))
        })
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let book = store::read(state);
        serde_json::to_value(QuestionProjection {
            asks: book.open().map(|row| row.view()).collect(),
        })
        .ok()
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let sender = match (self.config.waits_on_sender, run.sender) {
            (true, Some(sender)) => {
                Some((sender.agent.clone(), sender.session_id.as_str().to_owned()))
            }
            _ => None,
        };
        let facts = RunFacts {
            run: run_id(run),
            sender,
        };
        Contribution {
            prompt_section: prompt_section(&store::read(&run.state)),
            tools: tools::module(tools, facts),
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(catalog::catalog(self.definition.id.clone()))
    }
}

/// The run's command id, which every tool call's execution id starts with.
fn run_id(run: &RunContext<'_>) -> String {
    run.command_id.as_str().to_owned()
}

/// Quiet context while questions are open, so the model knows what it already asked.
fn prompt_section(book: &crate::state::Book) -> Option<String> {
    let open: Vec<String> = book
        .open()
        .map(|row| {
            let view = row.view();
            let first = row
                .questions
                .first()
                .map(|q| format!("[{}] {}", q.header, q.question))
                .unwrap_or_default();
            let who = if view.needs_person() {
                "a person".to_owned()
            } else {
                view.status_line()
            };
            format!("- {} ({who}): {first}", row.ask_id)
        })
        .collect();
    if open.is_empty() {
        return None;
    }
    Some(format!(
        "Open questions you asked (answers arrive as messages; question.withdraw drops one that no longer matters):\n{}",
        open.join("\n")
    ))
}
