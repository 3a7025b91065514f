//! Tool calls of one assistant message: executed one at a time through the execute door.

use serde_json::Value;
use shiitake_capabilities::{
    ExecutionId, ForModelError, ForModelKind, InvocationContext, NewerInput, Replay, ToolError,
};
use shiitake_protocol::message::{InputContent, Message, TextContent, ToolCall, ToolResultMessage};
use shiitake_protocol::{EntryId, ShiitakeError};

use tracing::Instrument;

use super::RunEvent;
use super::gate::{Passage, pass, undecided};
use super::{OwnerLink, RunStart, RunTools};
use crate::clock::now_ms;
use crate::extension::{GateMoment, GatedCall};
use crate::spans::ToolOutcome;

/// The text of a call skipped because a steer arrived.
pub(crate) const SKIPPED: &str = "skipped: a newer message arrived";
/// The text of a call the run was cancelled during or before.
pub(crate) const ABORTED: &str = "aborted: the run was cancelled";
/// The text of a call whose outcome is unknown after a restart.
pub(crate) const OUTCOME_UNKNOWN: &str = "outcome unknown: the Agent stopped while this tool call \
     ran, and it was not run again because it is not marked safe to repeat";

/// What executing the calls of one message came to.
pub(crate) enum Executed {
    /// Every call has a committed result (with its entry id).
    Results(Vec<(EntryId, Message)>),
    /// The run was cancelled; every call still has a committed result.
    Cancelled,
    /// A tool failed beyond what the model can fix.
    Fatal(String),
}

fn result_message(
    call: &ToolCall,
    text: String,
    is_error: bool,
    details: Option<Value>,
) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: vec![InputContent::Text(TextContent::new(text))],
        details,
        is_error,
        timestamp: now_ms(),
        extra: Default::default(),
    })
}

/// The text the model reads for a tool's JSON output: its compact JSON, written straight
/// into the string (`Display` writes the same text through a formatter, piece by piece).
fn output_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        other => serde_json::to_string(other).unwrap_or_else(|_| other.to_string()),
    }
}

/// The execution id of one tool call of this run: stable across restarts, so an
/// operation replayed after a crash sees the id of the execution it repeats.
fn execution_id(start: &RunStart, call: &ToolCall) -> ExecutionId {
    ExecutionId::new(format!("{}:{}", start.command_id, call.id))
}

/// Commits a tool result; an extension's tool gets its tool-result hook in the same commit.
async fn commit_result(
    start: &RunStart,
    link: &OwnerLink,
    tools: &RunTools,
    call: &ToolCall,
    message: Message,
) -> Result<EntryId, ShiitakeError> {
    let outcome = tools.extension_for(&call.name).map(|extension_id| {
        let is_error = matches!(&message, Message::ToolResult(result) if result.is_error);
        crate::extension::ToolOutcome {
            extension_id: extension_id.clone(),
            command_id: start.command_id.clone(),
            execution_id: execution_id(start, call),
            tool_name: call.name.clone(),
            is_error,
        }
    });
    link.commit_tool_result(message, outcome).await
}

/// The invocation context of one call: the run's token, a fresh deadline, the steer signal.
fn invocation(start: &RunStart, call: &ToolCall) -> InvocationContext {
    InvocationContext::new(execution_id(start, call), start.cancel.child_token())
        .with_timeout(start.agent.config.tool_timeout)
        .with_newer_input(NewerInput::new(start.steer_waiting.clone()))
}

/// Asks the run's tool gates about `call` (a first call, or one resumed after a
/// restart); `Some` is the result of a call that does not run. The wait of a held call
/// has a deadline of its own, so an approved call runs with a whole one.
async fn gated(
    start: &RunStart,
    catalog: &shiitake_capabilities::Catalog,
    call: &ToolCall,
    moment: GateMoment,
) -> Option<Message> {
    let path = catalog.resolve_tool_name(&call.name);
    let replay = path
        .as_ref()
        .and_then(|path| catalog.replay(path))
        .unwrap_or(Replay::Unsafe);
    let passage = if start.gates.is_empty() {
        // Nobody to ask: the question and its context are not put together.
        undecided(moment, replay)
    } else {
        let asked = GatedCall {
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
            execution_id: execution_id(start, call),
            command_id: start.command_id.clone(),
            replay,
            moment,
            facts: path
                .map(|path| catalog.call_facts(&path, &Value::Object(call.arguments.clone())))
                .unwrap_or_default(),
        };
        pass(&start.gates, asked, &invocation(start, call)).await
    };
    match passage {
        Passage::Run => None,
        Passage::Refused(text) => Some(result_message(call, text, true, None)),
        Passage::Cancelled => Some(result_message(call, ABORTED.to_owned(), true, None)),
        Passage::Unknown => Some(result_message(call, OUTCOME_UNKNOWN.to_owned(), true, None)),
    }
}

/// Runs one call through its gates and the door, in the call's span; `Err` carries a
/// fatal diagnostic.
async fn execute_one(
    start: &RunStart,
    link: &OwnerLink,
    tools: &RunTools,
    call: &ToolCall,
    moment: GateMoment,
) -> Result<Message, Executed> {
    let catalog = tools.catalog_for(&call.name);
    let replay_safe = catalog
        .resolve_tool_name(&call.name)
        .and_then(|path| catalog.replay(&path))
        == Some(Replay::Safe);
    let span = crate::spans::tool_call(&call.name, &call.id, replay_safe);
    let mut refused = false;
    let mut ran_for = None;
    let executed = execute_in_span(start, link, tools, call, moment, &mut refused, &mut ran_for)
        .instrument(span.clone())
        .await;
    if let Some(elapsed) = ran_for {
        // In the run's span: an operator's log line carries the Session and the run.
        let ok = matches!(&executed, Ok(Message::ToolResult(result)) if !result.is_error);
        tracing::debug!(tool = %call.name, ok, ms = elapsed.as_millis(), "tool call");
    }
    let outcome = match &executed {
        _ if refused => ToolOutcome::Refused,
        Err(Executed::Cancelled) => ToolOutcome::Cancelled,
        Err(_) => ToolOutcome::Error,
        Ok(Message::ToolResult(result)) if result.is_error => ToolOutcome::Error,
        Ok(_) => ToolOutcome::Ok,
    };
    crate::spans::tool_ended(&span, outcome);
    if let Ok(message) = &executed {
        span.in_scope(|| crate::spans::tool_content(message));
    }
    executed
}

/// Runs one call through its gates and the door; `refused` is set when a gate (or the
/// model's tool list) kept it from running, `ran_for` to how long it ran when it did.
async fn execute_in_span(
    start: &RunStart,
    link: &OwnerLink,
    tools: &RunTools,
    call: &ToolCall,
    moment: GateMoment,
    refused: &mut bool,
    ran_for: &mut Option<std::time::Duration>,
) -> Result<Message, Executed> {
    if !tools.offers(&call.name) {
        // Not in this model's tool list (a tool the host keeps from a small model):
        // answered like a tool that does not exist, and never run.
        let error = ForModelError::new(
            ForModelKind::UnknownOperation,
            format!("no tool `{}` is available", call.name),
        );
        *refused = true;
        return Ok(result_message(
            call,
            error.message.clone(),
            true,
            Some(error.to_result_json()),
        ));
    }
    let catalog = tools.catalog_for(&call.name);
    if let Some(answer) = gated(start, catalog, call, moment).await {
        *refused = true;
        return Ok(answer);
    }
    // The owner notes the start before it happens; a stopped owner does not answer,
    // and the call does not start.
    let noted = link
        .ask(|reply| RunEvent::ToolStarting {
            call_id: call.id.clone(),
            reply,
        })
        .await;
    if noted.is_err() {
        return Err(Executed::Cancelled);
    }
    let (progress, notes) =
        tokio::sync::watch::channel(shiitake_capabilities::ProgressNote::default());
    let context =
        invocation(start, call).with_progress(shiitake_capabilities::Progress::new(progress));
    let input = Value::Object(call.arguments.clone());
    let started = std::time::Instant::now();
    let executed = super::tool_progress::forwarding(
        link,
        &call.name,
        notes,
        catalog.execute_tool(&call.name, input, &context),
    )
    .await;
    let elapsed = started.elapsed();
    crate::telemetry::tool_call(&call.name, elapsed, executed.is_ok());
    *ran_for = Some(elapsed);
    match executed {
        Ok(output) => Ok(result_message(call, output_text(&output), false, None)),
        Err(ToolError::ForModel(error)) => {
            if error.kind == ForModelKind::SandboxDenied {
                let capability = catalog
                    .resolve_tool_name(&call.name)
                    .map_or_else(|| call.name.clone(), |path| path.to_string());
                let message = error.message.clone();
                link.tell(RunEvent::SandboxFailure {
                    capability,
                    message,
                })
                .await;
            }
            Ok(result_message(
                call,
                error.message.clone(),
                true,
                Some(error.to_result_json()),
            ))
        }
        Err(ToolError::Cancelled) => Ok(result_message(call, ABORTED.to_owned(), true, None)),
        Err(ToolError::Fatal(error)) => Err(Executed::Fatal(format!(
            "tool {} failed fatally: {}",
            call.name,
            error.message()
        ))),
    }
}

/// Executes the calls in order and has each result committed as it completes.
///
/// Before each call: a cancelled run answers it `aborted`; a waiting steer
/// answers it `skipped`, so the steer enters at the next boundary.
pub(crate) async fn execute_all(
    start: &RunStart,
    link: &OwnerLink,
    tools: &RunTools,
    calls: &[ToolCall],
) -> Result<Executed, ShiitakeError> {
    let mut results = Vec::with_capacity(calls.len());
    let mut fatal = None;
    for call in calls {
        let message = if start.cancel.is_cancelled() {
            result_message(call, ABORTED.to_owned(), true, None)
        } else if fatal.is_some() {
            result_message(
                call,
                "skipped: an earlier tool call failed".to_owned(),
                true,
                None,
            )
        } else if *start.steer_waiting.borrow() {
            result_message(call, SKIPPED.to_owned(), true, None)
        } else {
            // The commit of its result ends it: one frame, not two.
            link.tell(RunEvent::ActiveTool(call.name.clone())).await;
            let outcome = execute_one(start, link, tools, call, GateMoment::Call).await;
            match outcome {
                Ok(message) => message,
                Err(Executed::Fatal(diagnostic)) => {
                    let message = result_message(call, diagnostic.clone(), true, None);
                    fatal = Some(diagnostic);
                    message
                }
                Err(_) => result_message(call, ABORTED.to_owned(), true, None),
            }
        };
        let id = commit_result(start, link, tools, call, message.clone()).await?;
        results.push((id, message));
    }
    Ok(match fatal {
        Some(diagnostic) => Executed::Fatal(diagnostic),
        None if start.cancel.is_cancelled() => Executed::Cancelled,
        None => Executed::Results(results),
    })
}

/// After a restart: re-runs calls marked replay-safe; tells the model the outcome of
/// the others is unknown, unless a tool gate vouches that the call never started (an
/// approved call that had not run yet), which then runs once.
pub(crate) async fn resolve_after_restart(
    start: &RunStart,
    link: &OwnerLink,
    run_tools: &RunTools,
    calls: &[ToolCall],
) -> Result<Vec<(EntryId, Message)>, ShiitakeError> {
    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        let catalog = run_tools.catalog_for(&call.name);
        let replay = catalog
            .resolve_tool_name(&call.name)
            .filter(|_| run_tools.offers(&call.name))
            .and_then(|path| catalog.replay(&path));
        // An unsafe call goes to the gates, which answer "outcome unknown" unless one
        // held it and knows it never started.
        let asks_again =
            replay == Some(Replay::Safe) || (replay.is_some() && !start.gates.is_empty());
        // After a pause for the store the owner knows which calls its run started: one
        // it never started runs now, as a first call.
        let never_started = replay.is_some()
            && start
                .started_calls
                .as_ref()
                .is_some_and(|started| !started.contains(&call.id));
        let message = if never_started {
            match execute_one(start, link, run_tools, call, GateMoment::Call).await {
                Ok(message) => message,
                Err(_) => result_message(call, OUTCOME_UNKNOWN.to_owned(), true, None),
            }
        } else if asks_again {
            match execute_one(start, link, run_tools, call, GateMoment::Resumed).await {
                Ok(message) => message,
                Err(_) => result_message(call, OUTCOME_UNKNOWN.to_owned(), true, None),
            }
        } else {
            result_message(call, OUTCOME_UNKNOWN.to_owned(), true, None)
        };
        let id = commit_result(start, link, run_tools, call, message.clone()).await?;
        results.push((id, message));
    }
    Ok(results)
}
