//! What an editor is shown of a Session, as ACP `session/update`s: the committed
//! messages (the whole transcript on `session/load`, one prompt's run while it runs)
//! and the answer streaming in. Plain functions over the Session's frames; no I/O.
//!
//! | Session | ACP update |
//! | --- | --- |
//! | a user message (on load) | `user_message_chunk` |
//! | assistant text, streamed then committed | `agent_message_chunk`, the new text only |
//! | assistant thinking | `agent_thought_chunk` |
//! | a tool call | `tool_call` (`in_progress`, its kind from the tool's name, its arguments as `rawInput`) |
//! | its tool result | `tool_call_update` (`completed` or `failed`, the text as content) |
//! | a `plan__update_plan` call that succeeded | `plan`: its steps as entries |

use std::collections::HashMap;

use agent_client_protocol::{
    ContentBlock, ContentChunk, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
    ToolCall as AcpToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind,
};
use serde_json::Value;
use shiitake_ext_plan::contract::{StepStatus, UpdatePlan};
use shiitake_protocol::message::{
    AssistantContent, InputContent, Message, ToolCall, ToolResultMessage, UserContent,
};
use shiitake_protocol::{EntryId, SessionProgress};

/// The longest part of a call's arguments its title shows, in characters.
const TITLE_ARGUMENT_CHARS: usize = 80;

/// What kind of work a tool does, read from its name, so an editor picks its icon.
pub(crate) fn tool_kind(name: &str) -> ToolKind {
    let operation = name.rsplit("__").next().unwrap_or(name);
    match operation {
        "read" | "list" | "read_file" => ToolKind::Read,
        "edit" | "apply_patch" | "write" => ToolKind::Edit,
        "grep" | "glob" | "search" => ToolKind::Search,
        "exec" => ToolKind::Execute,
        "fetch" => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

/// `commands__exec: make test`: the tool and the argument a person recognises it by
/// (a command, a path, a pattern), cut.
pub(crate) fn tool_title(call: &ToolCall) -> String {
    let shown = ["command", "path", "pattern", "query", "url"]
        .iter()
        .find_map(|key| call.arguments.get(*key).and_then(Value::as_str))
        .map(str::to_owned)
        .or_else(|| {
            call.arguments
                .get("argv")
                .and_then(Value::as_array)
                .map(|argv| {
                    argv.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
        });
    match shown {
        Some(argument) => {
            let mut cut: String = argument.chars().take(TITLE_ARGUMENT_CHARS).collect();
            if argument.chars().count() > TITLE_ARGUMENT_CHARS {
                cut.push('…');
            }
            format!("{}: {cut}", call.name)
        }
        None => call.name.clone(),
    }
}

fn text(text: impl Into<String>) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text.into()))
}

/// The update announcing a tool call the model made, with the diffs of an edit read
/// from the editor's `folder`.
fn tool_call(call: &ToolCall, folder: Option<&std::path::Path>) -> SessionUpdate {
    let (diffs, locations) = crate::diffs::of_call(call, folder);
    SessionUpdate::ToolCall(
        AcpToolCall::new(call.id.clone(), tool_title(call))
            .kind(tool_kind(&call.name))
            .status(ToolCallStatus::InProgress)
            .content(diffs)
            .locations(locations)
            .raw_input(Value::Object(call.arguments.clone())),
    )
}

/// The update settling a tool call with its result.
fn tool_result(result: &ToolResultMessage) -> SessionUpdate {
    let content: Vec<ToolCallContent> = result
        .content
        .iter()
        .map(|block| match block {
            InputContent::Text(block) => ToolCallContent::from(block.text.clone()),
            InputContent::Image(_) => ToolCallContent::from("[image]".to_owned()),
        })
        .collect();
    let status = if result.is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let mut fields = ToolCallUpdateFields::new().status(status).content(content);
    if let Some(details) = &result.details {
        fields = fields.raw_output(details.clone());
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(result.tool_call_id.clone(), fields))
}

/// The tool a plan is written with; its call's steps become the editor's plan.
const UPDATE_PLAN: &str = "plan__update_plan";

/// What a transcript said so far that later messages need: the plans its calls wrote,
/// by call id, until their results come.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    plans: HashMap<String, UpdatePlan>,
    /// The editor's folder, which an edit's paths are read from.
    folder: Option<std::path::PathBuf>,
}

impl Transcript {
    /// A transcript shown to an editor working in `folder`.
    pub(crate) fn in_folder(folder: Option<std::path::PathBuf>) -> Self {
        Self {
            plans: HashMap::new(),
            folder,
        }
    }

    /// Every update a committed message is shown as, the user's own messages included
    /// (`session/load`).
    pub(crate) fn replayed(&mut self, message: &Message) -> Vec<SessionUpdate> {
        match message {
            Message::User(user) => {
                let said = match &user.content {
                    UserContent::Text(said) => said.clone(),
                    UserContent::Blocks(blocks) => blocks
                        .iter()
                        .filter_map(|block| match block {
                            InputContent::Text(block) => Some(block.text.as_str()),
                            InputContent::Image(_) => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                };
                vec![SessionUpdate::UserMessageChunk(text(said))]
            }
            Message::Assistant(assistant) => assistant
                .content
                .iter()
                .filter_map(|block| match block {
                    AssistantContent::Text(block) if !block.text.is_empty() => {
                        Some(SessionUpdate::AgentMessageChunk(text(block.text.clone())))
                    }
                    AssistantContent::Thinking(block) if !block.thinking.is_empty() => Some(
                        SessionUpdate::AgentThoughtChunk(text(block.thinking.clone())),
                    ),
                    AssistantContent::ToolCall(call) => Some(self.tool_call(call)),
                    _ => None,
                })
                .collect(),
            Message::ToolResult(result) => self.tool_result(result),
        }
    }

    /// A tool call, noting the plan it writes.
    fn tool_call(&mut self, call: &ToolCall) -> SessionUpdate {
        if call.name == UPDATE_PLAN
            && let Ok(plan) = serde_json::from_value(Value::Object(call.arguments.clone()))
        {
            self.plans.insert(call.id.clone(), plan);
        }
        tool_call(call, self.folder.as_deref())
    }

    /// A tool result, and the plan its call wrote when it succeeded.
    fn tool_result(&mut self, result: &ToolResultMessage) -> Vec<SessionUpdate> {
        let mut updates = vec![tool_result(result)];
        if let Some(plan) = self.plans.remove(&result.tool_call_id)
            && !result.is_error
        {
            updates.push(SessionUpdate::Plan(plan_of(&plan)));
        }
        updates
    }
}

/// A plan's steps as the editor's plan entries.
fn plan_of(plan: &UpdatePlan) -> Plan {
    Plan::new(
        plan.steps
            .iter()
            .map(|step| {
                let status = match step.status {
                    StepStatus::Pending => PlanEntryStatus::Pending,
                    StepStatus::InProgress => PlanEntryStatus::InProgress,
                    StepStatus::Completed => PlanEntryStatus::Completed,
                };
                PlanEntry::new(step.step.clone(), PlanEntryPriority::Medium, status)
            })
            .collect(),
    )
}

/// One prompt's run as it goes: the message streaming in is sent as it grows, each
/// piece once, and a committed message adds only what its stream did not show.
#[derive(Debug, Default)]
pub(crate) struct LiveRun {
    /// The message streaming in, and how much of its text and thinking was sent.
    streaming: Option<(EntryId, String, String)>,
    /// What the run's committed messages said.
    transcript: Transcript,
}

impl LiveRun {
    /// A run shown to an editor working in `folder`.
    pub(crate) fn in_folder(folder: Option<std::path::PathBuf>) -> Self {
        Self {
            streaming: None,
            transcript: Transcript::in_folder(folder),
        }
    }

    /// The new text and thinking of the message in progress.
    pub(crate) fn progress(&mut self, progress: &SessionProgress) -> Vec<SessionUpdate> {
        let (text_sent, thinking_sent) = match &mut self.streaming {
            Some((id, text, thinking)) if *id == progress.message_id => (text, thinking),
            _ => {
                self.streaming = Some((progress.message_id.clone(), String::new(), String::new()));
                match &mut self.streaming {
                    Some((_, text, thinking)) => (text, thinking),
                    None => return Vec::new(),
                }
            }
        };
        let mut updates = Vec::new();
        if let Some(new) = grown(thinking_sent, &progress.thinking) {
            updates.push(SessionUpdate::AgentThoughtChunk(text(new)));
        }
        if let Some(new) = grown(text_sent, &progress.text) {
            updates.push(SessionUpdate::AgentMessageChunk(text(new)));
        }
        updates
    }

    /// A message of the run, committed: what of it the stream did not show.
    pub(crate) fn committed(&mut self, id: &EntryId, message: &Message) -> Vec<SessionUpdate> {
        let streamed = match self.streaming.take() {
            Some((streamed_id, text, thinking)) if streamed_id == *id => Some((text, thinking)),
            other => {
                self.streaming = other;
                None
            }
        };
        match (message, streamed) {
            (Message::User(_), _) => Vec::new(),
            (Message::Assistant(assistant), Some((mut text_sent, mut thinking_sent))) => {
                let mut updates = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(block) => {
                            if let Some(new) = rest(&mut text_sent, &block.text) {
                                updates.push(SessionUpdate::AgentMessageChunk(text(new)));
                            }
                        }
                        AssistantContent::Thinking(block) => {
                            if let Some(new) = rest(&mut thinking_sent, &block.thinking) {
                                updates.push(SessionUpdate::AgentThoughtChunk(text(new)));
                            }
                        }
                        AssistantContent::ToolCall(call) => {
                            updates.push(self.transcript.tool_call(call));
                        }
                    }
                }
                updates
            }
            (message, _) => self.transcript.replayed(message),
        }
    }
}

/// What `now` adds to what was `sent` (kept up to date); `None` when nothing, or when
/// `now` no longer starts with it (a cut stream: what was sent stands).
fn grown(sent: &mut String, now: &str) -> Option<String> {
    let new = now.strip_prefix(sent.as_str())?;
    if new.is_empty() {
        return None;
    }
    let new = new.to_owned();
    sent.push_str(&new);
    Some(new)
}

/// What of a committed block `full` the stream did not send, taking what the stream
/// showed of it from `sent` (the message's blocks come in order, and the stream showed
/// their text run together); all of it when the stream showed something else.
fn rest(sent: &mut String, full: &str) -> Option<String> {
    if let Some(left) = sent.strip_prefix(full) {
        // The stream showed this block whole, and perhaps some of the next.
        *sent = left.to_owned();
        return None;
    }
    let shown = std::mem::take(sent);
    let new = full.strip_prefix(shown.as_str()).unwrap_or(full);
    (!new.is_empty()).then(|| new.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(value: Value) -> Message {
        serde_json::from_value(value).unwrap()
    }

    fn progress(id: &str, text: &str) -> SessionProgress {
        serde_json::from_value(json!({"messageId": id, "revision": 1, "text": text,
            "thinking": "", "textTruncated": false, "thinkingTruncated": false}))
        .unwrap()
    }

    fn assistant(blocks: Value) -> Message {
        message(
            json!({"role": "assistant", "content": blocks, "api": "a", "provider": "p",
            "model": "m", "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": 0, "cost": {"input": 0, "output": 0, "cacheRead": 0,
            "cacheWrite": 0, "total": 0}}, "stopReason": "stop", "timestamp": 1}),
        )
    }

    fn wire(updates: &[SessionUpdate]) -> Vec<Value> {
        updates
            .iter()
            .map(|update| serde_json::to_value(update).unwrap())
            .collect()
    }

    #[test]
    fn a_streamed_answer_is_sent_once_piece_by_piece() {
        let mut run = LiveRun::default();
        let id: EntryId = serde_json::from_value(json!("ent_a")).unwrap();
        let first = run.progress(&progress("ent_a", "Hel"));
        let second = run.progress(&progress("ent_a", "Hello wor"));
        let again = run.progress(&progress("ent_a", "Hello wor"));
        let done = run.committed(
            &id,
            &assistant(json!([{"type": "text", "text": "Hello world"}])),
        );
        let chunks: Vec<Value> = wire(&[first, second, again, done].concat())
            .into_iter()
            .map(|update| update["content"]["text"].clone())
            .collect();
        assert_eq!(chunks, [json!("Hel"), json!("lo wor"), json!("ld")]);
    }

    #[test]
    fn a_message_nobody_streamed_is_sent_whole_with_its_tool_calls_and_results() {
        let mut run = LiveRun::default();
        let id: EntryId = serde_json::from_value(json!("ent_b")).unwrap();
        let said = run.committed(
            &id,
            &assistant(json!([
                {"type": "thinking", "thinking": "plan"},
                {"type": "text", "text": "Running it."},
                {"type": "toolCall", "id": "call_1", "name": "commands__exec",
                 "arguments": {"command": "make test"}}
            ])),
        );
        let said = wire(&said);
        assert_eq!(said[0]["sessionUpdate"], "agent_thought_chunk");
        assert_eq!(said[1]["sessionUpdate"], "agent_message_chunk");
        assert_eq!(said[2]["sessionUpdate"], "tool_call");
        assert_eq!(said[2]["toolCallId"], "call_1");
        assert_eq!(said[2]["title"], "commands__exec: make test");
        assert_eq!(said[2]["kind"], "execute");
        assert_eq!(said[2]["status"], "in_progress");
        assert_eq!(said[2]["rawInput"], json!({"command": "make test"}));
        let result = message(json!({"role": "toolResult", "toolCallId": "call_1",
            "toolName": "commands__exec", "content": [{"type": "text", "text": "exit 2"}],
            "isError": true, "timestamp": 2}));
        let id: EntryId = serde_json::from_value(json!("ent_c")).unwrap();
        let settled = wire(&run.committed(&id, &result));
        assert_eq!(settled[0]["sessionUpdate"], "tool_call_update");
        assert_eq!(settled[0]["status"], "failed");
        assert_eq!(settled[0]["content"][0]["content"]["text"], "exit 2");
    }

    #[test]
    fn the_users_own_prompt_is_not_echoed_but_is_replayed() {
        let mut run = LiveRun::default();
        let user = message(json!({"role": "user", "content": "hi", "timestamp": 1}));
        let id: EntryId = serde_json::from_value(json!("ent_u")).unwrap();
        assert!(run.committed(&id, &user).is_empty());
        let replay = wire(&Transcript::default().replayed(&user));
        assert_eq!(replay[0]["sessionUpdate"], "user_message_chunk");
        assert_eq!(replay[0]["content"]["text"], "hi");
    }

    #[test]
    fn a_plan_written_by_a_call_that_succeeded_becomes_the_editors_plan() {
        let mut transcript = Transcript::default();
        let steps = json!({"steps": [{"step": "Read", "status": "completed"},
                                      {"step": "Fix", "status": "in_progress"},
                                      {"step": "Test", "status": "pending"}]});
        let call = assistant(json!([{"type": "toolCall", "id": "p1",
            "name": "plan__update_plan", "arguments": steps}]));
        transcript.replayed(&call);
        let result = |id: &str, error: bool| {
            message(json!({"role": "toolResult", "toolCallId": id,
                "toolName": "plan__update_plan", "content": [], "isError": error,
                "timestamp": 2}))
        };
        let shown = wire(&transcript.replayed(&result("p1", false)));
        assert_eq!(shown[1]["sessionUpdate"], "plan");
        let entries: Vec<(Value, Value)> = shown[1]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| (entry["content"].clone(), entry["status"].clone()))
            .collect();
        assert_eq!(
            entries,
            [
                (json!("Read"), json!("completed")),
                (json!("Fix"), json!("in_progress")),
                (json!("Test"), json!("pending")),
            ]
        );
        // A call that failed wrote no plan.
        transcript.replayed(&call);
        assert_eq!(transcript.replayed(&result("p1", true)).len(), 1);
    }

    #[test]
    fn kinds_and_titles_come_from_the_tool() {
        assert_eq!(tool_kind("files__read"), ToolKind::Read);
        assert_eq!(tool_kind("work__files__apply_patch"), ToolKind::Edit);
        assert_eq!(tool_kind("files__grep"), ToolKind::Search);
        assert_eq!(tool_kind("commands__exec"), ToolKind::Execute);
        assert_eq!(tool_kind("question__ask"), ToolKind::Other);
        let long: ToolCall = serde_json::from_value(json!({"id": "c", "name": "files__read",
            "arguments": {"path": "x".repeat(100)}}))
        .unwrap();
        let title = tool_title(&long);
        assert_eq!(
            title.chars().count(),
            "files__read: ".len() + TITLE_ARGUMENT_CHARS + 1
        );
        let exact: ToolCall = serde_json::from_value(json!({"id": "c", "name": "files__read",
            "arguments": {"path": "x".repeat(TITLE_ARGUMENT_CHARS)}}))
        .unwrap();
        assert!(
            !tool_title(&exact).ends_with('…'),
            "at the bound nothing is cut"
        );
        let argv: ToolCall = serde_json::from_value(json!({"id": "c", "name": "commands__exec",
            "arguments": {"argv": ["ls", "-la"]}}))
        .unwrap();
        assert_eq!(tool_title(&argv), "commands__exec: ls -la");
    }
}
