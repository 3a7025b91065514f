//! The tools an MCP client sees, their input schemas and their typed arguments.
//! Arguments are objects of exactly the documented fields: an unknown field, a wrong
//! type or an id past its bound is the tool's error (`isError`), never a crash.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use shiitake_protocol::{CommandId, Cursor, PageLimit, PromptText, RequestId, SessionId};

/// Longest wait of one `prompt`, `wait` or `answer` call when none is asked for:
/// a run that goes on longer answers `running`, and `wait` follows it again.
pub const DEFAULT_WAIT_SECONDS: u64 = 240;
/// Longest wait one call may ask for.
pub const MAX_WAIT_SECONDS: u64 = 3600;

/// `prompt`: start work, in a new Session or an existing one.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptArgs {
    pub text: PromptText,
    #[serde(default)]
    pub session_id: Option<SessionId>,
    #[serde(default)]
    pub idempotency_key: Option<RequestId>,
    #[serde(default)]
    pub wait: Option<bool>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// `wait`: follow a run started before.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitArgs {
    pub session_id: SessionId,
    pub command_id: CommandId,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// `answer`: answer what a run waits on, then follow it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerArgs {
    pub session_id: SessionId,
    pub command_id: CommandId,
    pub reply: String,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// `read`: a Session's recent transcript.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadArgs {
    pub session_id: SessionId,
    #[serde(default)]
    pub limit: Option<PageLimit>,
}

/// `list_sessions`: the Agent's Sessions, a page at a time.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListArgs {
    #[serde(default)]
    pub after: Option<Cursor>,
}

/// `cancel`: take back a prompt that has not started; `abort`: stop the running work.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelArgs {
    pub session_id: SessionId,
    pub command_id: CommandId,
}

/// `abort`: stop what a Session runs now.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AbortArgs {
    pub session_id: SessionId,
}

/// The tools by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    Prompt,
    Wait,
    Answer,
    Read,
    ListSessions,
    Cancel,
    Abort,
}

impl Name {
    /// Every tool, in the order they are listed.
    pub const ALL: [Name; 7] = [
        Name::Prompt,
        Name::Wait,
        Name::Answer,
        Name::Read,
        Name::ListSessions,
        Name::Cancel,
        Name::Abort,
    ];

    /// The tool's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Name::Prompt => "prompt",
            Name::Wait => "wait",
            Name::Answer => "answer",
            Name::Read => "read",
            Name::ListSessions => "list_sessions",
            Name::Cancel => "cancel",
            Name::Abort => "abort",
        }
    }

    /// The tool named `name`.
    pub fn parse(name: &str) -> Option<Name> {
        Name::ALL.into_iter().find(|tool| tool.as_str() == name)
    }
}

/// Reads a tool's arguments (absent arguments read as `{}`).
pub fn arguments<T: DeserializeOwned>(arguments: Option<JsonObject>) -> Result<T, String> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default()))
        .map_err(|error| format!("wrong arguments: {error}"))
}

/// How long a call waits: its `timeoutSeconds` within bounds, else the default.
pub fn wait_for(seconds: Option<u64>) -> Result<std::time::Duration, String> {
    match seconds {
        None => Ok(std::time::Duration::from_secs(DEFAULT_WAIT_SECONDS)),
        Some(seconds) if (1..=MAX_WAIT_SECONDS).contains(&seconds) => {
            Ok(std::time::Duration::from_secs(seconds))
        }
        Some(seconds) => Err(format!(
            "timeoutSeconds is {seconds}; it must be 1 to {MAX_WAIT_SECONDS}"
        )),
    }
}

fn id(description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 128, "description": description})
}

fn timeout() -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": MAX_WAIT_SECONDS,
        "description": format!("Longest wait in seconds ({DEFAULT_WAIT_SECONDS} when absent); \
            a run still going answers status `running`: call `wait` to follow it.")})
}

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let Value::Object(object) = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    }) else {
        return Arc::new(JsonObject::new());
    };
    Arc::new(object)
}

fn annotated(tool: Tool, read_only: bool, idempotent: bool) -> Tool {
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = Some(read_only);
    annotations.destructive_hint = Some(false);
    annotations.idempotent_hint = Some(idempotent);
    annotations.open_world_hint = Some(false);
    tool.with_annotations(annotations)
}

/// The tools, as `tools/list` answers them.
pub fn list() -> Vec<Tool> {
    Name::ALL.into_iter().map(tool).collect()
}

fn tool(name: Name) -> Tool {
    let named = name.as_str();
    match name {
        Name::Prompt => annotated(
            Tool::new(
                named,
                "Give the agent work: a prompt, queued in a new Session (or the one named) \
                 and run to its end. Waits and answers the agent's final text; progress \
                 comes as notifications. A question or an approval the run needs comes as \
                 an elicitation, or as status `input_required` with what to `answer`. \
                 Retrying with the same idempotencyKey starts nothing new.",
                schema(
                    json!({
                        "text": {"type": "string", "minLength": 1, "description": "The prompt."},
                        "sessionId": id("The Session to continue; a new one when absent."),
                        "idempotencyKey": id("Names this prompt: a retry with the same key returns the same Session and run."),
                        "wait": {"type": "boolean", "description": "Wait for the run (the default); false answers at once with status `queued`."},
                        "timeoutSeconds": timeout(),
                    }),
                    &["text"],
                ),
            ),
            false,
            false,
        ),
        Name::Wait => annotated(
            Tool::new(
                named,
                "Follow a run started by `prompt` until it ends or needs a person; \
                 answers like `prompt`.",
                schema(
                    json!({
                        "sessionId": id("The Session."),
                        "commandId": id("The run, as `prompt` answered it."),
                        "timeoutSeconds": timeout(),
                    }),
                    &["sessionId", "commandId"],
                ),
            ),
            true,
            true,
        ),
        Name::Answer => annotated(
            Tool::new(
                named,
                "Answer what a run waits on (status `input_required`): for a question, \
                 one line per question with an option's number or label or your own \
                 words; for an approval, allow_once, allow_session or deny. Then follows \
                 the run like `wait`.",
                schema(
                    json!({
                        "sessionId": id("The Session."),
                        "commandId": id("The run."),
                        "reply": {"type": "string", "minLength": 1, "description": "The answer."},
                        "timeoutSeconds": timeout(),
                    }),
                    &["sessionId", "commandId", "reply"],
                ),
            ),
            false,
            true,
        ),
        Name::Read => annotated(
            Tool::new(
                named,
                "Read a Session's recent transcript: its messages, oldest first.",
                schema(
                    json!({
                        "sessionId": id("The Session."),
                        "limit": {"type": "integer", "minimum": 1, "maximum": PageLimit::MAX,
                            "description": "Entries at most (50 when absent)."},
                    }),
                    &["sessionId"],
                ),
            ),
            true,
            true,
        ),
        Name::ListSessions => annotated(
            Tool::new(
                named,
                "List the agent's Sessions, most recent first, a page at a time.",
                schema(
                    json!({"after": {"type": "string", "minLength": 1, "maxLength": 256,
                        "description": "The `next` cursor of the page before."}}),
                    &[],
                ),
            ),
            true,
            true,
        ),
        Name::Cancel => annotated(
            Tool::new(
                named,
                "Take back a prompt that has not started yet; a running one is stopped \
                 with `abort`.",
                schema(
                    json!({"sessionId": id("The Session."), "commandId": id("The run.")}),
                    &["sessionId", "commandId"],
                ),
            ),
            false,
            true,
        ),
        Name::Abort => annotated(
            Tool::new(
                named,
                "Stop what a Session runs now; what it committed stays.",
                schema(json!({"sessionId": id("The Session.")}), &["sessionId"]),
            ),
            false,
            true,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_bounded_at_its_edges() {
        assert_eq!(
            wait_for(None).unwrap(),
            std::time::Duration::from_secs(DEFAULT_WAIT_SECONDS)
        );
        assert_eq!(wait_for(Some(1)).unwrap().as_secs(), 1);
        assert_eq!(
            wait_for(Some(MAX_WAIT_SECONDS)).unwrap().as_secs(),
            MAX_WAIT_SECONDS
        );
        assert!(wait_for(Some(0)).is_err());
        assert!(wait_for(Some(MAX_WAIT_SECONDS + 1)).is_err());
    }

    #[test]
    fn arguments_are_objects_of_exactly_the_documented_fields() {
        let read: Result<ReadArgs, _> = arguments(None);
        assert!(read.unwrap_err().contains("sessionId"));
        let mut object = JsonObject::new();
        object.insert("sessionId".into(), "ses_1".into());
        object.insert("limit".into(), 200.into());
        assert!(arguments::<ReadArgs>(Some(object.clone())).is_ok());
        object.insert("limit".into(), 201.into());
        assert!(arguments::<ReadArgs>(Some(object)).is_err());
        assert!(
            Name::ALL
                .iter()
                .all(|name| Name::parse(name.as_str()) == Some(*name))
        );
        assert_eq!(list().len(), Name::ALL.len());
    }
}
