//! A run as an A2A task: its state, what the agent says about that state, its answer
//! as an artifact, and its messages in words as the task's history.
//!
//! | Shiitake | A2A |
//! | --- | --- |
//! | queued prompt | `TASK_STATE_SUBMITTED` |
//! | running | `TASK_STATE_WORKING` |
//! | running, waiting on an Ask or approval | `TASK_STATE_INPUT_REQUIRED`, the question in `status.message` |
//! | completed | `TASK_STATE_COMPLETED`, the answer as artifact `answer` and in `status.message` |
//! | failed | `TASK_STATE_FAILED`, the diagnostic in `status.message` |
//! | interrupted (the process stopped under it, not resumable) | `TASK_STATE_FAILED`: nobody cancelled it, and a client may retry it |
//! | cancelled | `TASK_STATE_CANCELED` |

use chrono::{SecondsFormat, Utc};
use shiitake_protocol::message::Message as SessionValue;
use shiitake_protocol::{SessionMessage, TerminalOutcome};

use super::state::{Phase, RunView};
use super::task_id::TaskId;
use super::wire::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};
use crate::delegate::assistant_text;

/// The state a run in `phase` is in.
pub fn state_of(phase: &Phase) -> TaskState {
    match phase {
        Phase::Queued => TaskState::Submitted,
        Phase::Running => TaskState::Working,
        Phase::Needs(_) => TaskState::InputRequired,
        Phase::Ended(ended) => match ended.outcome {
            TerminalOutcome::Completed => TaskState::Completed,
            TerminalOutcome::Failed | TerminalOutcome::Interrupted => TaskState::Failed,
            TerminalOutcome::Cancelled => TaskState::Canceled,
        },
    }
}

/// Now, as A2A writes times.
pub fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A message of the agent about `task`, with an id made from `what` (the same every
/// time it is said).
fn agent_says(task: &TaskId, what: &str, text: String) -> Message {
    Message {
        message_id: format!("{}:{what}", task.encode()),
        context_id: Some(task.session.to_string()),
        task_id: Some(task.encode()),
        role: Role::Agent,
        parts: vec![Part::text(text)],
    }
}

/// What the agent says about `phase`: the question, the answer, why it ended.
fn status_message(task: &TaskId, phase: &Phase) -> Option<Message> {
    let (what, text) = match phase {
        Phase::Queued | Phase::Running => return None,
        Phase::Needs(needed) => (format!("{}:{}", needed.kind(), needed.id()), needed.text()),
        Phase::Ended(ended) => {
            let said = match (ended.outcome, &ended.diagnostic) {
                (TerminalOutcome::Completed, _) if ended.text.is_empty() => return None,
                (TerminalOutcome::Completed, _) => ended.text.clone(),
                (_, Some(diagnostic)) => diagnostic.clone(),
                (TerminalOutcome::Failed, None) => "The work failed.".to_owned(),
                (TerminalOutcome::Cancelled, None) => "The work was cancelled.".to_owned(),
                (TerminalOutcome::Interrupted, None) => {
                    "The work was interrupted and could not be resumed.".to_owned()
                }
            };
            ("ended".to_owned(), said)
        }
    };
    Some(agent_says(task, &what, text))
}

/// The status of a run in `phase`, as of now.
pub fn status(task: &TaskId, phase: &Phase) -> TaskStatus {
    TaskStatus {
        state: state_of(phase),
        message: status_message(task, phase),
        timestamp: Some(now()),
    }
}

/// The answer of a completed run, as the task's one artifact.
pub fn answer_artifact(task: &TaskId, text: &str) -> Artifact {
    Artifact {
        artifact_id: format!("{}:answer", task.encode()),
        name: Some("answer".to_owned()),
        parts: vec![Part::text(text)],
    }
}

/// The artifacts of a run in `phase`: its answer once it completed with one.
fn artifacts(task: &TaskId, phase: &Phase) -> Vec<Artifact> {
    match phase {
        Phase::Ended(ended)
            if ended.outcome == TerminalOutcome::Completed && !ended.text.is_empty() =>
        {
            vec![answer_artifact(task, &ended.text)]
        }
        _ => Vec::new(),
    }
}

/// A committed message of `task`'s run as an A2A message, when it is words: a prompt
/// (`ROLE_USER`) or an answer with text (`ROLE_AGENT`); tool calls and their results
/// are not. Its id is the message's entry id, so history and events name it alike.
pub fn history_message(task: &TaskId, message: &SessionMessage) -> Option<Message> {
    let (role, text) = match &message.value {
        SessionValue::User(user) => (Role::User, user.content.text()),
        SessionValue::Assistant(_) => (Role::Agent, assistant_text(&message.value)?),
        SessionValue::ToolResult(_) => return None,
    };
    if text.is_empty() {
        return None;
    }
    Some(Message {
        message_id: message.id.to_string(),
        context_id: Some(task.session.to_string()),
        task_id: Some(task.encode()),
        role,
        parts: vec![Part::text(text)],
    })
}

/// The run's messages in words, the last `limit` of them (all when `None`).
fn history(task: &TaskId, view: &RunView, limit: Option<usize>) -> Vec<Message> {
    let mut said: Vec<Message> = Vec::new();
    if let Some(prompt) = &view.waiting_prompt {
        said.push(Message {
            message_id: format!("{}:prompt", task.encode()),
            context_id: Some(task.session.to_string()),
            task_id: Some(task.encode()),
            role: Role::User,
            parts: vec![Part::text(prompt.clone())],
        });
    }
    said.extend(
        view.messages
            .iter()
            .filter_map(|message| history_message(task, message)),
    );
    if let Some(limit) = limit {
        let skip = said.len().saturating_sub(limit);
        said.drain(..skip);
    }
    said
}

/// The task `view` shows, with at most `history_limit` messages of history.
pub fn task(task: &TaskId, view: &RunView, history_limit: Option<usize>) -> Task {
    Task {
        id: task.encode(),
        context_id: task.session.to_string(),
        status: status(task, &view.phase),
        artifacts: artifacts(task, &view.phase),
        history: history(task, view, history_limit),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::delegate::{Ended, Needed};
    use serde_json::json;
    use shiitake_protocol::{CommandId, SessionId};

    fn ended(outcome: TerminalOutcome, diagnostic: Option<&str>, text: &str) -> Phase {
        Phase::Ended(Ended {
            outcome,
            diagnostic: diagnostic.map(str::to_owned),
            text: text.to_owned(),
        })
    }

    fn ask() -> Needed {
        Needed::Ask(
            serde_json::from_value(json!({"askId": "ask_1", "createdAt": 1, "questions": [
                {"header": "Store", "question": "Which database?", "multiSelect": false,
                 "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]}]}))
            .unwrap(),
        )
    }

    fn id() -> TaskId {
        TaskId {
            session: SessionId::new("ses_1").unwrap(),
            command: CommandId::new("cmd_1").unwrap(),
        }
    }

    #[test]
    fn each_phase_has_its_state() {
        let cases = [
            (Phase::Queued, TaskState::Submitted),
            (Phase::Running, TaskState::Working),
            (Phase::Needs(ask()), TaskState::InputRequired),
            (
                ended(TerminalOutcome::Completed, None, "done"),
                TaskState::Completed,
            ),
            (
                ended(TerminalOutcome::Failed, Some("boom"), ""),
                TaskState::Failed,
            ),
            (
                ended(TerminalOutcome::Interrupted, None, ""),
                TaskState::Failed,
            ),
            (
                ended(TerminalOutcome::Cancelled, None, ""),
                TaskState::Canceled,
            ),
        ];
        for (phase, state) in cases {
            assert_eq!(state_of(&phase), state, "{phase:?}");
        }
    }

    #[test]
    fn the_status_says_the_question_the_answer_or_why_it_ended() {
        let said = |phase: &Phase| {
            status(&id(), phase)
                .message
                .map(|message| (message.role, message.parts[0].text.clone().unwrap()))
        };
        let question = said(&Phase::Needs(ask())).unwrap();
        assert_eq!(question.0, Role::Agent);
        assert!(
            question
                .1
                .contains("Which database?\n  1) SQLite\n  2) PostgreSQL"),
            "{}",
            question.1
        );
        assert_eq!(said(&Phase::Running), None);
        assert_eq!(
            said(&ended(TerminalOutcome::Completed, None, "All done.")),
            Some((Role::Agent, "All done.".to_owned()))
        );
        assert_eq!(
            said(&ended(
                TerminalOutcome::Failed,
                Some("the model failed"),
                ""
            )),
            Some((Role::Agent, "the model failed".to_owned()))
        );
        let stamp = status(&id(), &Phase::Running).timestamp.unwrap();
        assert!(stamp.ends_with('Z'), "{stamp}");
    }

    #[test]
    fn a_completed_task_carries_its_answer_and_a_limited_history() {
        let view = RunView {
            phase: ended(TerminalOutcome::Completed, None, "Two."),
            waiting_prompt: None,
            messages: serde_json::from_value(json!([
                {"id": "e1", "sequence": 1, "commandId": "cmd_1",
                 "value": {"role": "user", "content": "Count.", "timestamp": 1}},
                {"id": "e2", "sequence": 2, "commandId": "cmd_1",
                 "value": {"role": "toolResult", "toolCallId": "c", "toolName": "t",
                    "content": [{"type": "text", "text": "x"}], "isError": false, "timestamp": 1}},
                {"id": "e3", "sequence": 3, "commandId": "cmd_1",
                 "value": {"role": "assistant", "content": [{"type": "text", "text": "Two."}],
                    "api": "a", "provider": "p", "model": "m", "usage": {"input": 0, "output": 0,
                    "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0, "cost": {"input": 0,
                    "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                    "stopReason": "stop", "timestamp": 1}}
            ]))
            .unwrap(),
        };
        let whole = task(&id(), &view, None);
        assert_eq!(whole.id, "ses_1.cmd_1");
        assert_eq!(whole.context_id, "ses_1");
        assert_eq!(whole.artifacts, vec![answer_artifact(&id(), "Two.")]);
        let said: Vec<(Role, &str, &str)> = whole
            .history
            .iter()
            .map(|m| {
                (
                    m.role,
                    m.message_id.as_str(),
                    m.parts[0].text.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            said,
            [(Role::User, "e1", "Count."), (Role::Agent, "e3", "Two.")]
        );
        assert_eq!(task(&id(), &view, Some(1)).history.len(), 1);
        assert_eq!(task(&id(), &view, Some(1)).history[0].message_id, "e3");
        assert!(task(&id(), &view, Some(0)).history.is_empty());
    }
}
