//! The MCP server of one Agent: `tools/list` and `tools/call` over [`Delegate`]. Each
//! call stands alone (no MCP session is kept), so any process of a Hub answers it and a
//! retry after a disconnect reads the same durable run.

use std::time::Duration;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, InputRequests, InputRequiredResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use shiitake_protocol::{
    AgentApi, CancelInput, CommandId, ReadOptions, SessionApi, SessionId, ShiitakeError,
    TerminalOutcome,
};
use tracing::Instrument;

use super::state::Waiting;
use super::tools::{self, Name};
use crate::delegate::{Delegate, Ended, Needed, Reply, Waited, message_line};

/// What the server tells a client it is, besides its tools.
const INSTRUCTIONS: &str = "An agent of Shiitake. `prompt` gives it work and waits for the \
answer; a Session keeps the conversation (pass its sessionId to continue). Work is durable: \
if a call is cut off, `wait` with the sessionId and commandId picks it up again.";

/// The MCP server of one Agent.
pub struct DelegateServer<A> {
    delegate: Delegate<A>,
}

impl<A> Clone for DelegateServer<A> {
    fn clone(&self) -> Self {
        Self {
            delegate: self.delegate.clone(),
        }
    }
}

impl<A: AgentApi + 'static> DelegateServer<A> {
    /// Serves `delegate`'s Agent.
    pub fn new(delegate: Delegate<A>) -> Self {
        Self { delegate }
    }
}

impl<A> ServerHandler for DelegateServer<A>
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("shiitake", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(name) = Name::parse(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool named {:?}; tools/list names them", request.name),
                None,
            ));
        };
        let call = Call {
            delegate: &self.delegate,
            context: &context,
        };
        let span = tracing::info_span!("mcp tool", tool = name.as_str());
        Ok(call
            .run(name, request)
            .instrument(span)
            .await
            .unwrap_or_else(|message| {
                CallToolResult::error(vec![ContentBlock::text(message)]).into()
            }))
    }
}

/// One `tools/call`.
struct Call<'a, A> {
    delegate: &'a Delegate<A>,
    context: &'a RequestContext<RoleServer>,
}

/// A tool's failure, as the text of an `isError` result.
type Failed = String;

fn failed(error: ShiitakeError) -> Failed {
    format!("{}: {}", error.code, error.message)
}

impl<A> Call<'_, A>
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    async fn run(
        &self,
        name: Name,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, Failed> {
        if let Some(state) = &request.request_state {
            // A retry with the person's input: the run it names goes on.
            let waiting = Waiting::decode(state)?;
            return self
                .resume(waiting, request.input_responses.unwrap_or_default())
                .await;
        }
        let arguments = request.arguments;
        match name {
            Name::Prompt => {
                let args: tools::PromptArgs = tools::arguments(arguments)?;
                let wait = tools::wait_for(args.timeout_seconds)?;
                let started = self
                    .delegate
                    .start(args.session_id, args.text, args.idempotency_key)
                    .await
                    .map_err(failed)?;
                if args.wait == Some(false) {
                    return Ok(status(
                        &started.session_id,
                        &started.command_id,
                        "queued",
                        json!({}),
                    ));
                }
                self.follow(&started.session_id, &started.command_id, wait)
                    .await
            }
            Name::Wait => {
                let args: tools::WaitArgs = tools::arguments(arguments)?;
                let wait = tools::wait_for(args.timeout_seconds)?;
                self.follow(&args.session_id, &args.command_id, wait).await
            }
            Name::Answer => {
                let args: tools::AnswerArgs = tools::arguments(arguments)?;
                let wait = tools::wait_for(args.timeout_seconds)?;
                let needed = self
                    .delegate
                    .needed(&args.session_id, &args.command_id)
                    .await
                    .map_err(failed)?
                    .ok_or_else(|| format!("work {} waits on nothing now", args.command_id))?;
                self.delegate
                    .answer(
                        &args.session_id,
                        &needed,
                        &Reply::Text(args.reply),
                        answer_request(&needed),
                    )
                    .await
                    .map_err(failed)?;
                self.follow(&args.session_id, &args.command_id, wait).await
            }
            Name::Read => {
                let args: tools::ReadArgs = tools::arguments(arguments)?;
                self.read(&args.session_id, args.limit).await
            }
            Name::ListSessions => {
                let args: tools::ListArgs = tools::arguments(arguments)?;
                let page = self
                    .delegate
                    .agent()
                    .list_sessions(args.after.as_ref())
                    .await
                    .map_err(failed)?;
                let value = serde_json::to_value(page).map_err(|error| error.to_string())?;
                Ok(CallToolResult::structured(value).into())
            }
            Name::Cancel => {
                let args: tools::CancelArgs = tools::arguments(arguments)?;
                let result = self
                    .delegate
                    .agent()
                    .session(args.session_id)
                    .cancel(CancelInput {
                        command_id: args.command_id,
                        only_if_pending: Some(true),
                    })
                    .await
                    .map_err(failed)?;
                let value = serde_json::to_value(result).map_err(|error| error.to_string())?;
                Ok(CallToolResult::structured(value).into())
            }
            Name::Abort => {
                let args: tools::AbortArgs = tools::arguments(arguments)?;
                self.delegate
                    .agent()
                    .session(args.session_id)
                    .abort()
                    .await
                    .map_err(failed)?;
                Ok(CallToolResult::structured(json!({"aborted": true})).into())
            }
        }
    }

    /// Applies the client's answer to what `waiting` named, then follows the run.
    async fn resume(
        &self,
        waiting: Waiting,
        mut responses: rmcp::model::InputResponses,
    ) -> Result<CallToolResponse, Failed> {
        let wait = tools::wait_for(Some(waiting.timeout_seconds))?;
        let response = responses.remove(&waiting.needed).unwrap_or(Value::Null);
        let accepted = response.get("action").and_then(Value::as_str) == Some("accept");
        let needed = self
            .delegate
            .needed(&waiting.session_id, &waiting.command_id)
            .await
            .map_err(failed)?;
        match needed {
            Some(needed) if needed.id() == waiting.needed && accepted => {
                let fields = match response.get("content") {
                    Some(Value::Object(fields)) => fields.clone(),
                    _ => serde_json::Map::new(),
                };
                self.delegate
                    .answer(
                        &waiting.session_id,
                        &needed,
                        &Reply::Fields(fields),
                        answer_request(&needed),
                    )
                    .await
                    .map_err(failed)?;
            }
            // Declined or cancelled: the question waits on, and is said in words.
            Some(needed) if needed.id() == waiting.needed => {
                return Ok(input_required(
                    &waiting.session_id,
                    &waiting.command_id,
                    &needed,
                ));
            }
            // Answered elsewhere meanwhile, or no longer waiting: the run is followed.
            _ => {}
        }
        self.follow(&waiting.session_id, &waiting.command_id, wait)
            .await
    }

    /// Follows a run for at most `wait`, with a progress notification per committed
    /// message when the client gave a progress token.
    async fn follow(
        &self,
        session: &SessionId,
        command: &CommandId,
        wait: Duration,
    ) -> Result<CallToolResponse, Failed> {
        let (lines, mut read) = tokio::sync::mpsc::unbounded_channel::<String>();
        let token = self.context.meta.get_progress_token();
        let peer = self.context.peer.clone();
        let notify = async move {
            let mut count = 0_u32;
            while let Some(line) = read.recv().await {
                let Some(token) = &token else { continue };
                count += 1;
                let progress = ProgressNotificationParam::new(token.clone(), f64::from(count))
                    .with_message(line);
                if peer.notify_progress(progress).await.is_err() {
                    break;
                }
            }
        };
        let following = async move {
            let seen = move |message: &shiitake_protocol::SessionMessage| {
                let _ = lines.send(message_line(&message.value));
            };
            tokio::select! {
                waited = tokio::time::timeout(wait, self.delegate.follow(session, command, seen)) => Some(waited),
                () = self.context.ct.cancelled() => None,
            }
        };
        let (waited, ()) = tokio::join!(following, notify);
        let Some(waited) = waited else {
            return Err("the call was cancelled; the work goes on (`wait` follows it)".to_owned());
        };
        let Ok(waited) = waited else {
            return Ok(status(session, command, "running", json!({})));
        };
        match waited.map_err(failed)? {
            Waited::Ended(ended) => Ok(ended_result(session, command, ended)),
            Waited::Needs(needed) if self.elicits() => {
                Ok(elicitation(session, command, &needed, wait)?)
            }
            Waited::Needs(needed) => Ok(input_required(session, command, &needed)),
        }
    }

    /// Whether the client takes an elicitation inside an input-required result (MCP
    /// 2026-07-28 and later, with the elicitation capability).
    fn elicits(&self) -> bool {
        let modern = self.context.protocol_version().is_some_and(|version| {
            version.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
        });
        let capable = self
            .context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        modern && capable
    }

    async fn read(
        &self,
        session: &SessionId,
        limit: Option<shiitake_protocol::PageLimit>,
    ) -> Result<CallToolResponse, Failed> {
        let snapshot = self
            .delegate
            .agent()
            .session(session.clone())
            .read(ReadOptions {
                limit,
                ..ReadOptions::default()
            })
            .await
            .map_err(failed)?;
        let messages: Vec<Value> = snapshot
            .messages
            .iter()
            .map(|message| {
                json!({
                    "role": role(&message.value),
                    "commandId": message.command_id,
                    "text": message_text(&message.value),
                })
            })
            .collect();
        let text = snapshot
            .messages
            .iter()
            .map(|message| format!("{}: {}", role(&message.value), message_text(&message.value)))
            .collect::<Vec<_>>()
            .join("\n");
        let mut result = CallToolResult::structured(json!({
            "sessionId": session,
            "hasMore": snapshot.has_more,
            "messages": messages,
        }));
        result.content = vec![ContentBlock::text(text)];
        Ok(result.into())
    }
}

fn role(message: &shiitake_protocol::message::Message) -> &'static str {
    use shiitake_protocol::message::Message;
    match message {
        Message::User(_) => "user",
        Message::Assistant(_) => "assistant",
        Message::ToolResult(_) => "tool",
    }
}

/// A message in words: a prompt's text, an answer's text (or the calls it makes), a
/// tool's name and result.
fn message_text(message: &shiitake_protocol::message::Message) -> String {
    use shiitake_protocol::message::Message;
    match message {
        Message::User(user) => user.content.text(),
        Message::Assistant(_) => crate::delegate::assistant_text(message)
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| message_line(message)),
        Message::ToolResult(result) => {
            let text: String = result.text().chars().take(MAX_TOOL_TEXT_CHARS).collect();
            format!("{}: {text}", result.tool_name)
        }
    }
}

/// Most characters of a tool's result `read` shows.
const MAX_TOOL_TEXT_CHARS: usize = 2000;

/// The request id of an answer given over MCP: the same for a retry of it.
fn answer_request(needed: &Needed) -> String {
    let id: String = needed.id().chars().take(120).collect();
    format!("mcp-{id}")
}

/// A result that names the run and its `status`, with `more` fields.
fn status(session: &SessionId, command: &CommandId, status: &str, more: Value) -> CallToolResponse {
    let mut value = json!({"status": status, "sessionId": session, "commandId": command});
    if let (Some(object), Value::Object(more)) = (value.as_object_mut(), more) {
        object.extend(more);
    }
    let mut result = CallToolResult::structured(value.clone());
    let said = match status {
        "running" => format!(
            "The work is still running: call `wait` with sessionId {session} and commandId {command}."
        ),
        "queued" => format!(
            "The work is queued: call `wait` with sessionId {session} and commandId {command}."
        ),
        _ => value.to_string(),
    };
    result.content = vec![ContentBlock::text(said)];
    result.into()
}

fn ended_result(session: &SessionId, command: &CommandId, ended: Ended) -> CallToolResponse {
    let word = ended.outcome.as_str();
    let value = json!({
        "status": word, "sessionId": session, "commandId": command,
        "text": ended.text, "diagnostic": ended.diagnostic,
    });
    let said = match (ended.outcome, &ended.diagnostic) {
        (TerminalOutcome::Completed, _) => ended.text.clone(),
        (_, Some(diagnostic)) => format!("The work {word}: {diagnostic}"),
        (_, None) => format!("The work {word}."),
    };
    let mut result = if ended.outcome == TerminalOutcome::Failed {
        CallToolResult::structured_error(value)
    } else {
        CallToolResult::structured(value)
    };
    result.content = vec![ContentBlock::text(said)];
    result.into()
}

fn needs_value(needed: &Needed) -> Value {
    json!({"kind": needed.kind(), "id": needed.id(), "text": needed.text()})
}

/// What a run needs, said in words for a client without elicitation.
fn input_required(session: &SessionId, command: &CommandId, needed: &Needed) -> CallToolResponse {
    let mut result = CallToolResult::structured(json!({
        "status": "input_required", "sessionId": session, "commandId": command,
        "needs": needs_value(needed),
    }));
    result.content = vec![ContentBlock::text(format!(
        "The work waits for a person:\n{}\nCall `answer` with sessionId {session}, commandId {command} and the reply.",
        needed.text()
    ))];
    result.into()
}

/// What a run needs, as an elicitation the client asks its person, and the state
/// its answer comes back with.
fn elicitation(
    session: &SessionId,
    command: &CommandId,
    needed: &Needed,
    wait: Duration,
) -> Result<CallToolResponse, Failed> {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for field in needed.fields() {
        let mut schema =
            json!({"type": "string", "title": field.title, "description": field.description});
        if field.free_text {
            if !field.options.is_empty() {
                schema["description"] = json!(format!(
                    "{} Options: {} (or your own words).",
                    field.description,
                    field.options.join(", ")
                ));
            }
        } else {
            schema["enum"] = json!(field.options);
        }
        properties.insert(field.name.clone(), schema);
        required.push(field.name);
    }
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": needed.form_message(),
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        }
    });
    let mut requests = InputRequests::new();
    requests.insert(
        needed.id().to_owned(),
        serde_json::from_value(request)
            .map_err(|error| format!("an elicitation was not made: {error}"))?,
    );
    let state = Waiting {
        session_id: session.clone(),
        command_id: command.clone(),
        needed: needed.id().to_owned(),
        timeout_seconds: wait.as_secs().max(1),
    };
    Ok(InputRequiredResult::new(Some(requests), Some(state.encode())).into())
}
