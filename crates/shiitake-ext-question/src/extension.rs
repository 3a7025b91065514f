//! The extension on core's kit: the contract's commands, the `/answer` flow step, the
//! two tools, the hooks, the projection with its footer rows, the prompt section and
//! the catalog.

use serde_json::json;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_core::extension::{Grant, HookError, StateView, Tx};
use shiitake_protocol::{BoundError, CommandScope, ExtensionId, TerminalOutcome};

use crate::contract::{
    AnswerAsk, AskStatus, DeclineAsk, EXTENSION_ID, ListAsks, NAMESPACE, Question,
    QuestionContract, QuestionProjection, Receipt, footer_rows,
};
use crate::state::{Book, Responder};
use crate::store::{self, TimerPayload};
use crate::tools::{self, AskRun};
use crate::{catalog, flow};

/// How the host composes the question extension.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuestionConfig {
    /// When the run's work was sent by another Agent, an Ask waits on that Agent
    /// first (on for Local, off for Hub).
    pub waits_on_sender: bool,
}

/// The extension's id as core takes it.
pub fn extension_id() -> Result<ExtensionId, BoundError> {
    ExtensionId::new(EXTENSION_ID)
}

/// Ask, declared to core's kit: register it with `AgentBuilder::kit_extension`, which
/// grants exactly what it declares (state, prompt, projection, commands, timers,
/// admissions, tools, attention).
pub fn extension(
    config: QuestionConfig,
) -> Result<KitExtension<QuestionContract, AskRun>, KitError> {
    let waits_on_sender = config.waits_on_sender;
    ExtensionKit::<QuestionContract, AskRun>::with_run_facts(NAMESPACE, move |run| {
        AskRun::of(run, waits_on_sender)
    })?
    .session_state()
    .configuration(json!({"waitsOnSender": waits_on_sender}))
    .command(|tx, _: ListAsks| Ok(store::projection(&store::load(tx)?).asks))
    .command(|tx, input: AnswerAsk| {
        store::answer(tx, &input.ask_id, input.answers, Responder::Person, None)
    })
    .command(decline)
    .untyped_command(flow::ANSWER_FLOW, CommandScope::Session, |tx, input| {
        Ok(json!(flow::answer_step(&store::load(tx)?, &input)))
    })
    .tool(tools::ask_tool()?)
    .tool(tools::withdraw_tool()?)
    .tools_description("Questions to a person, who answers or declines.")
    .on_settled(|tx, settled| {
        let cancelled = settled.outcome == TerminalOutcome::Cancelled;
        let run = settled.command_id.as_str().to_owned();
        store::transact(tx, |book| Ok(((), book.settled(&run, cancelled))))
    })
    .on_tool_result(|tx, outcome| {
        let execution = outcome.execution_id.as_str().to_owned();
        let is_error = outcome.is_error;
        store::transact(tx, |book| {
            book.tool_result(&execution, is_error);
            Ok(((), Vec::new()))
        })
    })
    .on_timer(|tx, timer| {
        let payload =
            serde_json::from_value::<TimerPayload>(timer.payload.clone()).map_err(|_| {
                HookError::Failed(format!(
                    "a question timer carries an unknown payload: {}",
                    timer.payload
                ))
            })?;
        store::transact(tx, |book| {
            Ok(((), book.fire(&payload.ask_id, payload.purpose)))
        })
    })
    // Answers reach the model as follow-up prompts; open Asks raise attention.
    .uses(Grant::Admissions)
    .uses(Grant::Attention)
    .prompt(|run| prompt_section(&store::read(&run.state)))
    .projection(|state| Some(projection(state)))
    .footer(|state, id| footer_rows(&projection(state), id))
    .catalog(catalog::catalog)
    .build()
}

fn projection(state: &StateView<'_>) -> QuestionProjection {
    store::projection(&store::read(state))
}

fn decline(tx: &mut Tx<'_>, input: DeclineAsk) -> Result<Receipt, HookError> {
    let ask_id = input.ask_id;
    let delivery = store::transact(tx, |book| book.decline(&ask_id, input.reason))?;
    Ok(Receipt {
        ask_id,
        status: AskStatus::Declined,
        delivery,
    })
}

/// Quiet context while questions are open, so the model knows what it already asked.
fn prompt_section(book: &Book) -> Option<String> {
    let open: Vec<String> = book
        .open()
        .map(|row| {
            let view = row.view();
            let first = row
                .questions
                .first()
                .map(Question::tagged)
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
