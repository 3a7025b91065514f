//! The spans of a run, named and attributed by the OpenTelemetry GenAI semantic
//! conventions, so that any `tracing` layer that exports spans (the CLI's OTLP layer,
//! `docs/operations.md`, "Traces") gives every run as a trace: the run (`invoke_agent`),
//! a child per model call (`chat`) and per tool call (`execute_tool`), and a call's wait
//! for a person (`await_approval`). Core depends on no exporter: these are `tracing`
//! spans whose fields are the attributes, cheap when nothing listens.
//!
//! Every span meant for a trace has the field [`OPERATION`]; an exporter keeps those and
//! leaves the rest (the long-lived `owner` span of a Session, library spans) out, so a
//! run is the root of its own trace. Message content is never a field: it is an event of
//! target [`CONTENT_TARGET`], which an exporter leaves out unless the host opts in.

use shiitake_protocol::message::{StopReason, Usage};
use shiitake_protocol::{CommandId, SessionId, TerminalOutcome};
use tracing::Span;
use tracing::field::Empty;

/// The field every span meant for a trace carries (`gen_ai.operation.name`).
pub const OPERATION: &str = "gen_ai.operation.name";

/// The target of events that carry message content (prompts, answers, tool input and
/// output), exported only when the host opts in.
pub const CONTENT_TARGET: &str = "shiitake::content";

/// The span of one run: `invoke_agent <agent>`, with the Session as the conversation,
/// the command, and (recorded when it ends) its outcome.
pub(crate) fn run(
    agent: Option<&str>,
    session: &SessionId,
    command: &CommandId,
    recovering: bool,
) -> Span {
    let agent = agent.unwrap_or("shiitake");
    tracing::info_span!(
        "run",
        otel.name = %format_args!("invoke_agent {agent}"),
        otel.status_code = Empty,
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = agent,
        "gen_ai.conversation.id" = %session,
        command = %command,
        recovering,
        "shiitake.outcome" = Empty,
    )
}

/// Records how the run of the current span ended.
pub(crate) fn run_ended(outcome: TerminalOutcome) {
    let span = Span::current();
    span.record("shiitake.outcome", outcome.as_str());
    if outcome == TerminalOutcome::Failed {
        span.record("otel.status_code", "ERROR");
    }
}

/// The span of one model call: `chat <model>`, with the provider and the model asked
/// for; usage, finish reason and time to first token are recorded as they come.
pub(crate) fn model_call(provider: &str, model: &str) -> Span {
    tracing::info_span!(
        "model call",
        otel.name = %format_args!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = provider,
        "gen_ai.request.model" = model,
        "gen_ai.response.model" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "shiitake.time_to_first_token_ms" = Empty,
        "shiitake.attempts" = Empty,
    )
}

/// Records on a model call's `span` the first event after `elapsed`.
pub(crate) fn first_token(span: &Span, elapsed: std::time::Duration) {
    span.record(
        "shiitake.time_to_first_token_ms",
        i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
    );
}

/// Records on a model call's `span` what the finished call said of itself.
pub(crate) fn model_finished(
    span: &Span,
    model: &str,
    usage: &Usage,
    stop: StopReason,
    attempts: u32,
) {
    span.record("gen_ai.response.model", model);
    if usage.is_known() {
        span.record("gen_ai.usage.input_tokens", count(usage.input));
        span.record("gen_ai.usage.output_tokens", count(usage.output));
        span.record(
            "gen_ai.usage.cache_read.input_tokens",
            count(usage.cache_read),
        );
    }
    span.record("gen_ai.response.finish_reasons", finish_reason(stop));
    span.record("shiitake.attempts", i64::from(attempts));
    if stop == StopReason::Error {
        span.record("otel.status_code", "ERROR");
    }
}

/// A count as OTLP's integer (a `u64` would be exported as text).
fn count(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Records on a model call's `span` that it failed before streaming.
pub(crate) fn model_failed(span: &Span, attempts: u32) {
    span.record("shiitake.attempts", i64::from(attempts));
    span.record("otel.status_code", "ERROR");
}

/// The conventions' finish reason of a stop reason.
fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
    }
}

/// The span of one tool call: `execute_tool <tool>`, with the call's id and whether it
/// may run again after a restart; its outcome is recorded when it ends.
pub(crate) fn tool_call(tool: &str, call_id: &str, replay_safe: bool) -> Span {
    tracing::info_span!(
        "tool call",
        otel.name = %format_args!("execute_tool {tool}"),
        otel.status_code = Empty,
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "gen_ai.tool.call.id" = call_id,
        "gen_ai.tool.type" = "function",
        "shiitake.replay_safe" = replay_safe,
        "shiitake.outcome" = Empty,
    )
}

/// How a tool call ended, for its span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolOutcome {
    /// It ran and answered.
    Ok,
    /// It ran and failed, or was refused.
    Error,
    /// A gate (an approval) refused it.
    Refused,
    /// The run was cancelled.
    Cancelled,
}

/// Records how the tool call of `span` ended.
pub(crate) fn tool_ended(span: &Span, outcome: ToolOutcome) {
    let word = match outcome {
        ToolOutcome::Ok => "ok",
        ToolOutcome::Error => "error",
        ToolOutcome::Refused => "refused",
        ToolOutcome::Cancelled => "cancelled",
    };
    span.record("shiitake.outcome", word);
    if outcome == ToolOutcome::Error {
        span.record("otel.status_code", "ERROR");
    }
}

/// The span of a call held by a gate until a person decides: `await_approval <tool>`,
/// from the first hold to the decision (recorded when it comes).
pub(crate) fn gate_wait(gate: &str, tool: &str) -> Span {
    tracing::info_span!(
        "gate wait",
        otel.name = %format_args!("await_approval {tool}"),
        "gen_ai.operation.name" = "await_approval",
        "gen_ai.tool.name" = tool,
        "shiitake.gate" = gate,
        "shiitake.decision" = Empty,
    )
}

/// Emits the content of a finished model call (its answer in words and the calls it
/// asks for) as an event of [`CONTENT_TARGET`], which exporters keep only when the host
/// opted in and the log never shows.
pub(crate) fn model_content(message: &shiitake_protocol::message::AssistantMessage) {
    if !tracing::event_enabled!(target: "shiitake::content", tracing::Level::INFO) {
        return;
    }
    let calls: Vec<String> = message
        .tool_calls()
        .map(|call| {
            format!(
                "{}({})",
                call.name,
                serde_json::Value::Object(call.arguments.clone())
            )
        })
        .collect();
    tracing::info!(
        target: "shiitake::content",
        text = %message.text(),
        tool_calls = %calls.join("; "),
        "gen_ai.choice"
    );
}

/// Emits a tool call's result in words as an event of [`CONTENT_TARGET`].
pub(crate) fn tool_content(result: &shiitake_protocol::message::Message) {
    if !tracing::event_enabled!(target: "shiitake::content", tracing::Level::INFO) {
        return;
    }
    if let shiitake_protocol::message::Message::ToolResult(result) = result {
        tracing::info!(
            target: "shiitake::content",
            text = %result.text(),
            "gen_ai.tool.message"
        );
    }
}

/// Records on a gate wait's `span` what came of it.
pub(crate) fn gate_decided(span: &Span, decision: &'static str) {
    span.record("shiitake.decision", decision);
}
