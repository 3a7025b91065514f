//! What a resumed run does first, decided from that command's own committed messages.
//!
//! A Session's lineage holds the messages of every command that ever ran in it, so
//! the last message of the lineage may belong to another command (work that ran
//! while this one was left behind). Settlement is per command: the plan reads the
//! lineage from the run's own prompt on, and `completed` needs the model's answer to
//! that prompt; another prompt's work after it means the run was overtaken and cannot
//! go on where it stopped.

use shiitake_protocol::message::{Message, StopReason, ToolCall};
use shiitake_protocol::{CommandId, TerminalOutcome};

/// The first step of a run resumed after a restart, a takeover or a wait for the store.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Resume {
    /// Ask the model again: the run's last committed message is a prompt, a steer,
    /// tool results, or a model failure worth retrying.
    CallModel,
    /// These tool calls of the run's last assistant message have no committed result.
    ResolveTools(Vec<ToolCall>),
    /// The work had finished; only its terminal was not committed.
    Finish(TerminalOutcome),
    /// The run cannot go on where it stopped: its prompt is not on the selected lineage,
    /// or another prompt's work was committed after it. It settles `interrupted` with
    /// this diagnostic, never `completed` without an answer of its own.
    Abandon(&'static str),
}

/// The diagnostic of a run whose prompt is not on the selected lineage.
pub(crate) const PROMPT_NOT_ON_LINEAGE: &str =
    "this work's prompt is not on the selected lineage; it was not resumed";
/// The diagnostic of a run that other work overtook.
pub(crate) const OVERTAKEN: &str =
    "later work entered the conversation before this work could resume; it was not resumed";

/// One entry of the lineage as the plan reads it: the command whose work committed
/// it (none for an operator's or an extension's line) and its message.
pub(crate) type Owned<'a> = (Option<&'a CommandId>, &'a Message);

/// Decides how the run of `run` (which had absorbed the steers `absorbed`) resumes,
/// from the selected lineage, root first.
pub(crate) fn plan_resume(
    lineage: &[Owned<'_>],
    run: &CommandId,
    absorbed: &[CommandId],
) -> Resume {
    let Some(first) = lineage
        .iter()
        .position(|(command, _)| *command == Some(run))
    else {
        return Resume::Abandon(PROMPT_NOT_ON_LINEAGE);
    };
    let own = &lineage[first..];
    let overtaken = own.iter().any(|(command, _)| {
        command.is_some_and(|command| command != run && !absorbed.contains(command))
    });
    if overtaken {
        return Resume::Abandon(OVERTAKEN);
    }
    let messages: Vec<&Message> = own.iter().map(|(_, message)| *message).collect();
    plan_from(&messages)
}

/// The plan for a run whose own messages (its prompt first) are `messages`.
fn plan_from(messages: &[&Message]) -> Resume {
    let Some(last_assistant) = messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant(_)))
    else {
        return Resume::CallModel;
    };
    let Message::Assistant(assistant) = messages[last_assistant] else {
        return Resume::CallModel;
    };
    let after = &messages[last_assistant + 1..];
    if after.iter().any(|m| matches!(m, Message::User(_))) {
        // A steer or a line entered after the model's last word: it must answer.
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
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn message(value: serde_json::Value) -> Message {
        serde_json::from_value(value).unwrap()
    }

    fn user(text: &str) -> Message {
        message(json!({"role": "user", "content": text, "timestamp": 1}))
    }

    fn assistant(stop: &str, calls: &[String]) -> Message {
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

    fn command(n: usize) -> CommandId {
        CommandId::new(format!("cmd_{n:04}")).unwrap()
    }

    fn calls(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    /// The plan of `run` over a lineage written as (command index or none, message).
    fn plan(lineage: &[(Option<usize>, Message)], run: usize, absorbed: &[usize]) -> Resume {
        let ids: Vec<Option<CommandId>> = lineage.iter().map(|(n, _)| n.map(command)).collect();
        let owned: Vec<Owned<'_>> = ids
            .iter()
            .zip(lineage)
            .map(|(id, (_, message))| (id.as_ref(), message))
            .collect();
        let absorbed: Vec<CommandId> = absorbed.iter().copied().map(command).collect();
        plan_resume(&owned, &command(run), &absorbed)
    }

    fn ids(resume: Resume) -> Vec<String> {
        match resume {
            Resume::ResolveTools(calls) => calls.into_iter().map(|c| c.id).collect(),
            other => panic!("expected tools, got {other:?}"),
        }
    }

    #[test]
    fn a_bare_prompt_calls_the_model() {
        assert_eq!(plan(&[(Some(0), user("hi"))], 0, &[]), Resume::CallModel);
    }

    #[test]
    fn a_finished_answer_only_needs_its_terminal() {
        let answered = |stop| [(Some(0), user("hi")), (Some(0), assistant(stop, &[]))];
        assert_eq!(
            plan(&answered("stop"), 0, &[]),
            Resume::Finish(TerminalOutcome::Completed)
        );
        assert_eq!(
            plan(&answered("aborted"), 0, &[]),
            Resume::Finish(TerminalOutcome::Cancelled)
        );
        assert_eq!(plan(&answered("error"), 0, &[]), Resume::CallModel);
    }

    #[test]
    fn tool_calls_without_results_are_resolved() {
        let lineage = [
            (Some(0), user("hi")),
            (Some(0), assistant("toolUse", &calls(&["a", "b", "c"]))),
            (Some(0), result("a")),
        ];
        assert_eq!(ids(plan(&lineage, 0, &[])), vec!["b", "c"]);
        let all_answered = [
            (Some(0), user("hi")),
            (Some(0), assistant("toolUse", &calls(&["a"]))),
            (Some(0), result("a")),
        ];
        assert_eq!(plan(&all_answered, 0, &[]), Resume::CallModel);
    }

    #[test]
    fn a_steer_after_the_answer_calls_the_model() {
        let lineage = [
            (Some(0), user("hi")),
            (Some(0), assistant("stop", &[])),
            (Some(1), user("and then?")),
        ];
        assert_eq!(plan(&lineage, 0, &[1]), Resume::CallModel);
    }

    /// The case: the lineage ends with another command's finished answer, and
    /// the run being resumed never heard from the model.
    #[test]
    fn another_commands_answer_does_not_complete_this_one() {
        let lineage = [
            (Some(0), user("first")),
            (Some(1), user("second")),
            (Some(1), assistant("stop", &[])),
        ];
        assert_eq!(plan(&lineage, 0, &[]), Resume::Abandon(OVERTAKEN));
        assert_eq!(
            plan(&lineage, 1, &[]),
            Resume::Finish(TerminalOutcome::Completed)
        );
        assert_eq!(
            plan(&lineage, 2, &[]),
            Resume::Abandon(PROMPT_NOT_ON_LINEAGE)
        );
    }

    /// What a generated run of one command holds, and so how it must resume.
    #[derive(Clone, Debug)]
    struct Run {
        /// Completed tool turns (every call answered), each with its number of calls.
        turns: Vec<usize>,
        /// Where the run stops.
        end: End,
        /// Steers absorbed at its boundaries, after these turns.
        steer_after: Option<usize>,
        /// An operator line appended after its prompt.
        line: bool,
    }

    #[derive(Clone, Debug)]
    enum End {
        /// The model's last message is its answer with this stop reason.
        Answer(&'static str),
        /// The model asked for `calls` tools, `answered` of which have results.
        Tools { calls: usize, answered: usize },
        /// Nothing after the last turn (a prompt or results wait for the model).
        Waiting,
    }

    fn run() -> impl Strategy<Value = Run> {
        let end = prop_oneof![
            prop_oneof![Just("stop"), Just("length"), Just("aborted"), Just("error")]
                .prop_map(End::Answer),
            (1usize..4, 0usize..4).prop_map(|(calls, answered)| End::Tools {
                calls,
                answered: answered.min(calls),
            }),
            Just(End::Waiting),
        ];
        (
            proptest::collection::vec(1usize..3, 0..3),
            end,
            proptest::option::of(0usize..3),
            any::<bool>(),
        )
            .prop_map(|(turns, end, steer_after, line)| Run {
                steer_after: steer_after.filter(|at| *at <= turns.len()),
                turns,
                end,
                line,
            })
    }

    /// Appends the messages of `run` (command `n`; its steer is command `steer`).
    fn write(run: &Run, n: usize, steer: usize, lineage: &mut Vec<(Option<usize>, Message)>) {
        lineage.push((Some(n), user("prompt")));
        if run.line {
            lineage.push((None, user("an operator's line")));
        }
        for (turn, &count) in run.turns.iter().enumerate() {
            if run.steer_after == Some(turn) {
                lineage.push((Some(steer), user("steer")));
            }
            let names: Vec<String> = (0..count).map(|c| format!("c{n}_{turn}_{c}")).collect();
            lineage.push((Some(n), assistant("toolUse", &names)));
            for name in &names {
                lineage.push((Some(n), result(name)));
            }
        }
        if run.steer_after == Some(run.turns.len()) {
            lineage.push((Some(steer), user("steer")));
        }
        match &run.end {
            End::Answer(stop) => lineage.push((Some(n), assistant(stop, &[]))),
            End::Tools { calls, answered } => {
                let names: Vec<String> = (0..*calls).map(|c| format!("c{n}_end_{c}")).collect();
                lineage.push((Some(n), assistant("toolUse", &names)));
                for name in &names[..*answered] {
                    lineage.push((Some(n), result(name)));
                }
            }
            End::Waiting => {}
        }
    }

    /// How `run` must resume, derived from how it was generated.
    fn expected(run: &Run, n: usize) -> Resume {
        let steer_last = run.steer_after == Some(run.turns.len());
        match &run.end {
            // A steer after the model's last tool turn, with no answer after it.
            _ if steer_last && matches!(run.end, End::Waiting) => Resume::CallModel,
            End::Answer("stop" | "length") => Resume::Finish(TerminalOutcome::Completed),
            End::Answer("aborted") => Resume::Finish(TerminalOutcome::Cancelled),
            End::Answer(_) | End::Waiting => Resume::CallModel,
            End::Tools { calls, answered } if answered < calls => Resume::ResolveTools(
                (*answered..*calls)
                    .map(|c| {
                        let id = format!("c{n}_end_{c}");
                        let Message::Assistant(message) =
                            assistant("toolUse", std::slice::from_ref(&id))
                        else {
                            unreachable!()
                        };
                        message.tool_calls().next().cloned().unwrap()
                    })
                    .collect(),
            ),
            End::Tools { .. } => Resume::CallModel,
        }
    }

    proptest! {
        /// Over lineages where several commands ran one after another, the last one
        /// stopped anywhere: it resumes from its own messages alone; each earlier one,
        /// were it found running, is overtaken (never `completed` by another's answer);
        /// a command with no prompt on the lineage is abandoned.
        #[test]
        fn each_command_is_planned_from_its_own_messages(
            earlier in proptest::collection::vec(run(), 0..4),
            last in run(),
        ) {
            let mut lineage = Vec::new();
            // Command 2k runs; command 2k + 1 is its steer.
            for (k, run) in earlier.iter().enumerate() {
                write(run, 2 * k, 2 * k + 1, &mut lineage);
            }
            let n = 2 * earlier.len();
            write(&last, n, n + 1, &mut lineage);
            let steers = [n + 1];
            let planned = plan(&lineage, n, &steers);
            prop_assert_eq!(&planned, &expected(&last, n));
            if let Resume::Finish(TerminalOutcome::Completed) = planned {
                let answered = lineage.iter().any(|(owner, message)| {
                    *owner == Some(n) && matches!(message, Message::Assistant(a) if a.stop_reason == StopReason::Stop || a.stop_reason == StopReason::Length)
                });
                prop_assert!(answered, "completed without an answer of its own");
            }
            for k in 0..earlier.len() {
                prop_assert_eq!(plan(&lineage, 2 * k, &[2 * k + 1]), Resume::Abandon(OVERTAKEN));
            }
            prop_assert_eq!(plan(&lineage, n + 2, &[]), Resume::Abandon(PROMPT_NOT_ON_LINEAGE));
        }
    }
}
