//! The model tools `question.ask` and `question.withdraw`.
//!
//! `question.ask` is replay-safe: it is keyed by the call's execution id, so when
//! recovery runs the same call again after a restart it finds its Ask and either
//! delivers the answer committed meanwhile or waits again. The model has no answer
//! operation.

use std::time::Duration;

use serde_json::{Value, json};
use shiitake_capabilities::{InvocationContext, Replay, ToolError};
use shiitake_core::extension::RunContext;
use shiitake_core::extension::host::{StateChanges, ToolTx};
use shiitake_core::extension::kit::{AsyncToolCall, KitError, Tool};

use crate::contract::{AskId, AskInput, LIVE_WAIT_CAP_SECS, LIVE_WAIT_RESERVE_SECS, WithdrawInput};
use crate::state::{AskRequest, Check, Opened};
use crate::store;
use crate::text;

/// What the question tools know of the run they serve, read when it starts.
#[derive(Clone, Debug)]
pub struct AskRun {
    /// The run's command id.
    run: String,
    /// The Agent that sent the run's work, when Asks wait on it: (name, Session id).
    sender: Option<(String, String)>,
}

impl AskRun {
    /// The facts of `run`; its sender counts only when the host lets Asks wait on it.
    pub(crate) fn of(run: &RunContext<'_>, waits_on_sender: bool) -> Self {
        let sender = run
            .sender
            .filter(|_| waits_on_sender)
            .map(|sender| (sender.agent.clone(), sender.session_id.as_str().to_owned()));
        Self {
            run: run.command_id.as_str().to_owned(),
            sender,
        }
    }
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

/// `question.ask`: waits in-turn for the answer, so it runs on the run's task.
pub(crate) fn ask_tool() -> Result<Tool<AskRun>, KitError> {
    Ok(Tool::waiting(
        "ask",
        "Ask the person (or the Agent that sent this work) one to four decision questions with \
         options. By default waits for the answer; mode \"continue\" returns an askId at once and \
         the answer arrives later as a message. Do not ask what you can decide yourself.",
        ask,
    )?
    .replay(Replay::Safe))
}

/// `question.withdraw`: drops an open Ask in one owner transaction.
pub(crate) fn withdraw_tool() -> Result<Tool<AskRun>, KitError> {
    Tool::new(
        "withdraw",
        "Withdraw one of your open questions (by askId) when it no longer matters.",
        |tx, input: WithdrawInput, _call| {
            let ask_id = input.ask_id;
            store::transact(tx, |book| Ok(((), book.withdraw(&ask_id)?)))?;
            Ok(json!({"askId": ask_id.as_str(), "status": "withdrawn"}))
        },
    )
}

async fn ask(call: AsyncToolCall<AskRun>, input: AskInput) -> Result<Value, ToolError> {
    let AsyncToolCall { call, tools, ctx } = call;
    let request = AskRequest {
        ask_id: AskId::new(format!("ask_{}", ulid::Ulid::generate())),
        execution: call.execution_id.as_str().to_owned(),
        run: call.run.run,
        input,
        sender: call.run.sender,
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
            let opened = store::transact(tx, |book| Ok(book.ask(request)?))?;
            let (Opened::New { ask_id, live } | Opened::Again { ask_id, live }) = opened;
            Ok(json!({"askId": ask_id, "live": live}))
        })
        .await?;
    let ask_id = opened
        .get("askId")
        .and_then(Value::as_str)
        .map(AskId::new)
        .ok_or_else(|| ToolError::fatal("question.ask: the Ask was opened without an id"))?;
    if opened.get("live").and_then(Value::as_bool) != Some(true) {
        return Ok(text::parked(
            ask_id.as_str(),
            "The question was sent; you do not wait for it.",
        ));
    }
    wait(&tools, &ctx, &ask_id, &mut changes).await
}

/// Waits in-turn for the Ask's resolution until the wait runs out, a steer arrives
/// or the run is cancelled; each of those parks it.
async fn wait(
    tools: &ToolTx,
    ctx: &InvocationContext,
    ask_id: &AskId,
    changes: &mut StateChanges,
) -> Result<Value, ToolError> {
    let wait = tokio::time::sleep(live_wait(ctx.remaining()));
    tokio::pin!(wait);
    loop {
        if let Some(result) = look(tools, ask_id, false).await? {
            return Ok(result);
        }
        tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => {
                look(tools, ask_id, true).await?;
                return Err(ToolError::Cancelled);
            }
            () = ctx.newer_input().raised() => {
                return park_or_deliver(tools, ask_id, "A newer message arrived.").await;
            }
            () = &mut wait => {
                return park_or_deliver(tools, ask_id, "Nobody answered yet.").await;
            }
            changed = changes.changed() => changed?,
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

    /// The schema without what only informs (descriptions, integer formats, the `type`
    /// beside an `enum`), to compare bounds and shapes.
    fn shape(schema: &Value) -> Value {
        match schema {
            Value::Object(map) => {
                let has_enum = map.contains_key("enum");
                Value::Object(
                    map.iter()
                        .filter(|(key, _)| {
                            let enum_type = has_enum && key.as_str() == "type";
                            !(enum_type || matches!(key.as_str(), "description" | "format"))
                        })
                        .map(|(key, value)| (key.clone(), shape(value)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
            other => other.clone(),
        }
    }

    #[test]
    fn the_derived_schemas_carry_the_bounds_and_refuse_unknown_fields() {
        use crate::contract::*;
        let extension = crate::extension(crate::QuestionConfig::default()).expect("it builds");
        let schemas: std::collections::BTreeMap<_, _> = extension.tool_schemas().collect();
        // The hand-written schemas these replace, bounds and all.
        let ask = json!({
            "type": "object", "additionalProperties": false, "required": ["questions"],
            "properties": {
                "questions": {
                    "type": "array", "minItems": 1, "maxItems": MAX_QUESTIONS,
                    "items": {
                        "type": "object", "additionalProperties": false,
                        "required": ["header", "question", "options"],
                        "properties": {
                            "header": {"type": "string", "minLength": 1, "maxLength": MAX_HEADER_CHARS},
                            "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
                            "options": {
                                "type": "array", "minItems": 1, "maxItems": MAX_OPTIONS,
                                "items": {
                                    "type": "object", "additionalProperties": false,
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
                "mode": {"type": "string", "enum": ["wait", "continue"], "default": "wait"},
                "onExpire": {
                    "type": "object", "additionalProperties": false,
                    "required": ["afterMinutes", "action"],
                    "properties": {
                        "afterMinutes": {"type": "integer", "minimum": MIN_EXPIRE_MINUTES, "maximum": MAX_EXPIRE_MINUTES},
                        "action": {"type": "string", "enum": ["stop", "proceed_with_recommended"]}
                    }
                }
            }
        });
        let withdraw = json!({
            "type": "object", "additionalProperties": false, "required": ["askId"],
            "properties": {"askId": {"type": "string", "minLength": 1, "maxLength": MAX_ASK_ID_CHARS}}
        });
        assert_eq!(shape(schemas["ask"]), shape(&ask));
        assert_eq!(shape(schemas["withdraw"]), shape(&withdraw));
    }
}
