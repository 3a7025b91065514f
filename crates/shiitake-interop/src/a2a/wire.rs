//! The A2A v1.0 objects as ProtoJSON (camelCase keys, `TASK_STATE_*` and `ROLE_*`
//! enum names), as the official clients write and read them. Unknown keys a client
//! sends (`metadata`, `extensions`, `tenant` ...) are accepted and ignored; empty or
//! absent values are left out of what the server writes, as ProtoJSON does.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Not said; read as the client's.
    #[default]
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    /// The client (a person or the calling agent).
    #[serde(rename = "ROLE_USER")]
    User,
    /// This agent.
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// One piece of a message or an artifact: exactly one of `text`, `raw`, `url`,
/// `data`. This server writes text only and reads text only (other kinds are refused
/// as an unsupported content type).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// A link to the content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Structured data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The content's media type, if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The writer's id of the message (the client's idempotency key for a send).
    pub message_id: String,
    /// The conversation (a Session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task (one prompt's run) it belongs to or continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Who wrote it (absent when unspecified: ProtoJSON leaves out a zero enum).
    #[serde(default)]
    pub role: Role,
    /// Its content.
    pub parts: Vec<Part>,
}

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    /// Accepted, not started.
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    /// Running.
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    /// Waits for the client's input (an answer to a question or an approval).
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    /// Finished.
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    /// Failed.
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    /// Cancelled.
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
}

impl TaskState {
    /// Whether a stream ends at this state: a terminal one, or one waiting on input.
    pub fn ends_stream(self) -> bool {
        !matches!(self, Self::Submitted | Self::Working)
    }
}

/// A task's state with what the agent said about it, and when.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// The agent's words on it (the question, the answer, the failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// RFC 3339, in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// An output of a task: here, its final answer in words.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Unique within its task.
    pub artifact_id: String,
    /// A short name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its content.
    pub parts: Vec<Part>,
}

/// One prompt's run, as A2A sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task id (see `task_id`).
    pub id: String,
    /// The Session.
    pub context_id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// Its answer, once completed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// The run's messages in words, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
}

/// A task's state changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its Session.
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
}

/// A task produced (part of) an artifact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its Session.
    pub context_id: String,
    /// The artifact.
    pub artifact: Artifact,
    /// Whether it adds to an artifact sent before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    /// Whether it is the artifact's last piece.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_chunk: bool,
}

/// One event of a stream, and the answer of `SendMessage` (`task` only here): exactly
/// one key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    /// The task as it is now.
    Task(Task),
    /// A message outside any task (never sent by this server).
    Message(Message),
    /// A state change.
    StatusUpdate(TaskStatusUpdateEvent),
    /// An artifact.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// How the client wants a `SendMessage` answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    /// Answer at once with the submitted task instead of waiting for its end.
    #[serde(default)]
    pub return_immediately: Option<bool>,
    /// At most this many messages of history in the task.
    #[serde(default)]
    pub history_length: Option<i64>,
}

/// `SendMessage` and `SendStreamingMessage`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageParams {
    /// The message.
    pub message: Message,
    /// How to answer.
    #[serde(default)]
    pub configuration: Option<SendConfiguration>,
}

/// `GetTask`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskParams {
    /// The task.
    pub id: String,
    /// At most this many messages of history.
    #[serde(default)]
    pub history_length: Option<i64>,
}

/// `CancelTask` and `SubscribeToTask`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    /// The task.
    pub id: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn a_captured_send_reads_with_its_unknown_keys_ignored() {
        let params: SendMessageParams = serde_json::from_value(json!({
            "message": {"messageId": "m1", "contextId": "ses_1", "role": "ROLE_USER",
                "parts": [{"text": "hello", "metadata": {}}], "metadata": {"x": 1},
                "extensions": []},
            "configuration": {"returnImmediately": true, "acceptedOutputModes": ["text/plain"]},
            "tenant": "t"
        }))
        .unwrap();
        assert_eq!(
            params,
            SendMessageParams {
                message: Message {
                    message_id: "m1".into(),
                    context_id: Some("ses_1".into()),
                    task_id: None,
                    role: Role::User,
                    parts: vec![Part::text("hello")],
                },
                configuration: Some(SendConfiguration {
                    return_immediately: Some(true),
                    history_length: None,
                }),
            }
        );
        let missing = serde_json::from_value::<SendMessageParams>(
            json!({"message": {"role": "ROLE_USER", "parts": []}}),
        );
        assert!(missing.is_err());
    }

    #[test]
    fn events_are_one_key_objects_without_empty_values() {
        let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::InputRequired,
                message: None,
                timestamp: None,
            },
        });
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}})
        );
        let task = StreamResponse::Task(Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Canceled,
                message: None,
                timestamp: None,
            },
            artifacts: Vec::new(),
            history: Vec::new(),
        });
        assert_eq!(
            serde_json::to_value(&task).unwrap(),
            json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_CANCELED"}}})
        );
    }
}
