//! What a resumed run does first, decided from the committed transcript alone.

use shiitake_protocol::TerminalOutcome;
use shiitake_protocol::message::{Message, StopReason, ToolCall};

/// The first step of a run resumed after a restart.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Resume {
    /// Ask the model again: the last committed message is a prompt, tool results,
    /// or a model failure worth retrying.
    CallModel,
    /// These tool calls of the last assistant message have no committed result.
    ResolveTools(Vec<ToolCall>),
    /// The work had finished; only its terminal was not committed.
    Finish(TerminalOutcome),
}

/// Decides how to resume from the transcript, root first.
pub(crate) fn plan_resume(transcript: &[Message]) -> Resume {
    let Some(last_assistant) = transcript
        .iter()
        .rposition(|m| matches!(m, Message::Assistant(_)))
    else {
        return Resume::CallModel;
    };
    let Message::Assistant(assistant) = &transcript[last_assistant] else {
        return Resume::CallModel;
    };
    let after = &transcript[last_assistant + 1..];
    if after.iter().any(|m| matches!(m, Message::User(_))) {
        // A prompt or steer entered after the model's last word: it must answer.
        return Resume::CallModel;
    }
    match assistant.stop_reason {
        StopReason::Stop | StopReason::Length => Resume::Finish(TerminalOutcome::Completed),
        StopReason::Aborted => Resume::Finish(TerminalOutcome::Cancelled),
        StopReason::Error => Resume::CallModel,
        StopReason::ToolUse => {
            let answered: Vec<&str> = after
                .iter()
                .filter_map(|m| match m {
                    Message::ToolResult(result) => Some(result.tool_call_id.as_str()),
                    _ => None,
                })
                .collect();
            let missing: Vec<ToolCall> = assistant
                .tool_calls()
                .filter(|call| !answered.contains(&call.id.as_str()))
                .cloned()
                .collect();
            if missing.is_empty() {
                Resume::CallModel
            } else {
                Resume::ResolveTools(missing)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(value: serde_json::Value) -> Message {
        serde_json::from_value(value).unwrap()
    }

    fn user(text: &str) -> Message {
        message(json!({"role": "user", "content": text, "timestamp": 1}))
    }

    fn assistant(stop: &str, calls: &[&str]) -> Message {
        let content: Vec<_> = calls
            .iter()
            .map(|id| json!({"type": "toolCall", "id": id, "name": "files__read", "arguments": {}}))
            .collect();
        message(json!({
            "role": "assistant", "content": content, "api": "a", "provider": "p", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": stop, "timestamp": 2
        }))
    }

    fn result(id: &str) -> Message {
        message(
            json!({"role": "toolResult", "toolCallId": id, "toolName": "files__read",
                       "content": [], "isError": false, "timestamp": 3}),
        )
    }

    fn ids(resume: Resume) -> Vec<String> {
        match resume {
            Resume::ResolveTools(calls) => calls.into_iter().map(|c| c.id).collect(),
            other => panic!("expected tools, got {other:?}"),
        }
    }

    #[test]
    fn a_bare_prompt_calls_the_model() {
        assert_eq!(plan_resume(&[user("hi")]), Resume::CallModel);
        assert_eq!(plan_resume(&[]), Resume::CallModel);
    }

    #[test]
    fn a_finished_answer_only_needs_its_terminal() {
        assert_eq!(
            plan_resume(&[user("hi"), assistant("stop", &[])]),
            Resume::Finish(TerminalOutcome::Completed)
        );
        assert_eq!(
            plan_resume(&[user("hi"), assistant("aborted", &[])]),
            Resume::Finish(TerminalOutcome::Cancelled)
        );
        assert_eq!(
            plan_resume(&[user("hi"), assistant("error", &[])]),
            Resume::CallModel
        );
    }

    #[test]
    fn tool_calls_without_results_are_resolved() {
        let transcript = [
            user("hi"),
            assistant("toolUse", &["a", "b", "c"]),
            result("a"),
        ];
        assert_eq!(ids(plan_resume(&transcript)), vec!["b", "c"]);
        let all_answered = [user("hi"), assistant("toolUse", &["a"]), result("a")];
        assert_eq!(plan_resume(&all_answered), Resume::CallModel);
    }

    #[test]
    fn a_steer_after_the_answer_calls_the_model() {
        let transcript = [user("hi"), assistant("stop", &[]), user("and then?")];
        assert_eq!(plan_resume(&transcript), Resume::CallModel);
    }
}
