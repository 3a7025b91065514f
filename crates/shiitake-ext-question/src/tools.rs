//! The model tools `question.ask` and `question.withdraw`.
//!
//! `question.ask` is replay-safe: it is keyed by the call's execution id, so when
//! recovery runs the same call again after a restart it finds its Ask and either
//! delivers the answer committed meanwhile or waits again. The model has no answer
//! operation.

use std::time::Duration;

use serde_json::{Value, json};
use shiitake_capabilities::{
    InvocationContext, Module, ModulePath, Operation, OperationName, Replay, ToolError,
};
use shiitake_core::extension::host::ToolTx;

use crate::contract::{
    AskId, AskInput, LIVE_WAIT_CAP_SECS, LIVE_WAIT_RESERVE_SECS, MAX_DESCRIPTION_CHARS,
    MAX_EXPIRE_MINUTES, MAX_HEADER_CHARS, MAX_LABEL_CHARS, MAX_OPTIONS, MAX_QUESTION_CHARS,
    MAX_QUESTIONS, MIN_EXPIRE_MINUTES, NAMESPACE,
};
use crate::state::{AskRequest, Check, Opened};
use crate::store;
use crate::text;

/// What a run's tools know of the run.
#[derive(Clone, Debug)]
pub(crate) struct RunFacts {
    /// The run's command id.
    pub(crate) run: String,
    /// The Agent that sent the run's work, when Asks wait on it: (name, Session id).
    pub(crate) sender: Option<(String, String)>,
}

/// The input schema of `question.ask`: the bounds `describe` shows.
pub(crate) fn ask_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["questions"],
        "properties": {
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_QUESTIONS,
                "description": "One to four decision questions. The person may always answer in free text.",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["header", "question", "options"],
                    "properties": {
                        "header": {"type": "string", "minLength": 1, "maxLength": MAX_HEADER_CHARS,
                                   "description": "A short tag for the question, such as \"Database\"."},
                        "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
                        "options": {
                            "type": "array", "minItems": 1, "maxItems": MAX_OPTIONS,
                            "description": "The choices; put the recommended one first.",
                            "items": {
                                "type": "object",
                                "additionalProperties": false,
                                "required": ["label"],
                                "properties": {
                                    "label": {"type": "string", "minLength": 1, "maxLength": MAX_LABEL_CHARS},
                                    "description": {"type": "string", "maxLength": MAX_DESCRIPTION_CHARS}
                                }
                            }
                        },
                        "multiSelect": {"type": "boolean", "default": false}
                    }
                }
            },
            "mode": {
                "type": "string", "enum": ["wait", "continue"], "default": "wait",
                "description": "wait: receive the answer in this turn; continue: return the askId now and get the answer later as a message."
            },
            "onExpire": {
                "type": "object",
                "additionalProperties": false,
                "required": ["afterMinutes", "action"],
                "properties": {
                    "afterMinutes": {"type": "integer", "minimum": MIN_EXPIRE_MINUTES, "maximum": MAX_EXPIRE_MINUTES},
                    "action": {"type": "string", "enum": ["stop", "proceed_with_recommended"]}
                }
            }
        }
    })
}

fn withdraw_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["askId"],
        "properties": {"askId": {"type": "string", "minLength": 1, "maxLength": 64}}
    })
}

/// How long a live wait may last: the call's deadline less the reserve, at most the cap.
pub(crate) fn live_wait(remaining: Option<Duration>) -> Duration {
    let cap = Duration::from_secs(LIVE_WAIT_CAP_SECS);
    match remaining {
        Some(left) => left
            .saturating_sub(Duration::from_secs(LIVE_WAIT_RESERVE_SECS))
            .min(cap),
        None => cap,
    }
}

/// The `question` module of one run.
pub(crate) fn module(tools: ToolTx, facts: RunFacts) -> Option<Module> {
    let ask_tools = tools.clone();
    let ask = Operation::from_fn(
        OperationName::new("ask").ok()?,
        "Ask the person (or the Agent that sent this work) one to four decision questions with \
         options. By default waits for the answer; mode \"continue\" returns an askId at once and \
         the answer arrives later as a message. Do not ask what you can decide yourself.",
        move |input, ctx| {
            let tools = ask_tools.clone();
            let facts = facts.clone();
            async move { ask(tools, facts, input, ctx).await }
        },
    )
    .with_input_schema(ask_schema())
    .with_replay(Replay::Safe);
    let withdraw = Operation::from_fn(
        OperationName::new("withdraw").ok()?,
        "Withdraw one of your open questions (by askId) when it no longer matters.",
        move |input, _ctx| {
            let tools = tools.clone();
            async move { withdraw(tools, input).await }
        },
    )
    .with_input_schema(withdraw_schema());
    Module::new(
        ModulePath::new(NAMESPACE).ok()?,
        "Questions to a person, who answers or declines.",
    )
    .with_operation(ask)
    .ok()?
    .with_operation(withdraw)
    .ok()
}

async fn ask(
    tools: ToolTx,
    facts: RunFacts,
    input: Value,
    ctx: InvocationContext,
) -> Result<Value, ToolError> {
    let input: AskInput = serde_json::from_value(input)
        .map_err(|error| ToolError::for_model(format!("question.ask input: {error}")))?;
    let execution = ctx.execution_id().as_str().to_owned();
    let ask_id = AskId::new(format!("ask_{}", ulid::Ulid::generate()));
    let request = AskRequest {
        ask_id,
        execution,
        run: facts.run,
        input,
        sender: facts.sender,
        now: 0,
    };
    // Take the change signal before the first read so no answer is missed.
    let mut changes = tools.state_changes();
    let opened = tools
        .run(move |tx| {
            let request = AskRequest {
                now: tx.now(),
                ..request
            };
            let opened = store::transact(tx, |book| book.ask(request))?;
            Ok(serde_json::to_value(Summary::from(&opened)).unwrap_or(Value::Null))
        })
        .await?;
    let summary: Summary = serde_json::from_value(opened)
        .map_err(|error| ToolError::fatal(format!("question.ask summary: {error}")))?;
    let ask_id = AskId::new(summary.ask_id);
    if !summary.live {
        return Ok(text::parked(
            ask_id.as_str(),
            "The question was sent; you do not wait for it.",
        ));
    }
    let wait = tokio::time::sleep(live_wait(ctx.remaining()));
    tokio::pin!(wait);
    loop {
        if let Some(result) = look(&tools, &ask_id, false).await? {
            return Ok(result);
        }
        tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => {
                look(&tools, &ask_id, true).await?;
                return Err(ToolError::Cancelled);
            }
            () = ctx.newer_input().raised() => {
                return park_or_deliver(&tools, &ask_id, "A newer message arrived.").await;
            }
            () = &mut wait => {
                return park_or_deliver(&tools, &ask_id, "Nobody answered yet.").await;
            }
            changed = changes.changed() => changed?,
        }
    }
}

/// What the opening transaction tells the handler.
#[derive(serde::Serialize, serde::Deserialize)]
struct Summary {
    ask_id: String,
    live: bool,
}

impl From<&Opened> for Summary {
    fn from(opened: &Opened) -> Self {
        match opened {
            Opened::New { ask_id, live } | Opened::Again { ask_id, live } => Self {
                ask_id: ask_id.as_str().to_owned(),
                live: *live,
            },
        }
    }
}

/// Looks at the Ask (parking it first when `park`); `Some` is the in-turn result.
async fn look(tools: &ToolTx, ask_id: &AskId, park: bool) -> Result<Option<Value>, ToolError> {
    let id = ask_id.clone();
    let result = tools
        .run(move |tx| {
            let found = store::transact(tx, |book| {
                let check = if park {
                    book.park(&id)
                } else {
                    book.check(&id)
                };
                let questions = book
                    .asks
                    .get(&id)
                    .map(|row| row.questions.clone())
                    .unwrap_or_default();
                Ok(((check, questions), Vec::new()))
            })?;
            Ok(match found {
                (Check::Waiting, _) => Value::Null,
                (Check::Resolved(resolution), questions) => {
                    text::in_turn(&questions, id.as_str(), &resolution)
                }
                (Check::Gone, _) => json!({
                    "askId": id.as_str(),
                    "status": "closed",
                    "message": "The question was withdrawn or already delivered.",
                }),
            })
        })
        .await?;
    Ok((!result.is_null()).then_some(result))
}

/// Parks the Ask, unless an answer arrived in the meantime: then that is the result.
async fn park_or_deliver(tools: &ToolTx, ask_id: &AskId, why: &str) -> Result<Value, ToolError> {
    Ok(match look(tools, ask_id, true).await? {
        Some(result) => result,
        None => text::parked(ask_id.as_str(), why),
    })
}

async fn withdraw(tools: ToolTx, input: Value) -> Result<Value, ToolError> {
    let ask_id = input
        .get("askId")
        .and_then(Value::as_str)
        .map(AskId::new)
        .ok_or_else(|| ToolError::for_model("question.withdraw needs an askId"))?;
    tools
        .run(move |tx| {
            store::transact(tx, |book| Ok(((), book.withdraw(&ask_id)?)))?;
            Ok(json!({"askId": ask_id.as_str(), "status": "withdrawn"}))
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_wait_leaves_the_reserve_and_is_capped() {
        assert_eq!(live_wait(None), Duration::from_secs(600));
        assert_eq!(
            live_wait(Some(Duration::from_secs(120))),
            Duration::from_secs(60)
        );
        assert_eq!(
            live_wait(Some(Duration::from_secs(3600))),
            Duration::from_secs(600)
        );
        assert_eq!(live_wait(Some(Duration::from_secs(30))), Duration::ZERO);
    }
}
