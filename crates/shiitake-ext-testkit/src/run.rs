//! One run of the scripted model and what it committed, and small readings of a
//! transcript that every extension's tests make.

use serde_json::Value;
use shiitake_conformance::support::{send, terminal_of, transcript, wait_for};
use shiitake_core::Agent;
use shiitake_model::{ScriptedModel, Turn};
use shiitake_protocol::message::{InputContent, Message, ToolResultMessage, UserContent};
use shiitake_protocol::{
    AgentApi, QueueState, SessionActivity, SessionApi, SessionFrame, SessionId, SessionInboxState,
    SessionPendingPrompts, SessionSummaryRow, SessionTerminal,
};

/// The turns of a run that calls `tool` once with `input` and then answers `done`:
/// what a test scripts to run one tool call (`tool` is the provider name, such as
/// `plan__update_plan`).
pub fn call_tool(tool: &str, input: Value) -> Vec<Turn> {
    vec![Turn::tool_call(tool, input), Turn::text("done")]
}

/// What one tool call gave the model: its JSON output (or its text, when it is not
/// JSON), or its error details (`{error, message, details?}`).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// The call succeeded.
    Ok(Value),
    /// The call failed; the committed error details.
    Err(Value),
}

impl ToolOutput {
    /// The output of a call that must have succeeded; panics with the error otherwise.
    pub fn ok(&self) -> &Value {
        match self {
            ToolOutput::Ok(value) => value,
            ToolOutput::Err(error) => panic!("expected a tool result, got the error {error}"),
        }
    }

    /// The error of a call that must have failed; panics with the output otherwise.
    pub fn err(&self) -> &Value {
        match self {
            ToolOutput::Err(error) => error,
            ToolOutput::Ok(value) => panic!("expected a tool error, got the result {value}"),
        }
    }

    fn of(result: &ToolResultMessage) -> Self {
        if result.is_error {
            return ToolOutput::Err(result.details.clone().unwrap_or(Value::Null));
        }
        let text = text_of(result);
        ToolOutput::Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

/// What one run committed: its terminal, each tool result in order, and the text of
/// its last assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// How the run ended.
    pub terminal: SessionTerminal,
    /// The run's tool results, oldest first.
    pub tool_results: Vec<ToolOutput>,
    /// The text of the run's last assistant message, if it wrote one.
    pub reply: Option<String>,
}

/// Sends `prompt`, waits (bounded) for its terminal and returns what that run
/// committed; messages from earlier runs of the Session are left out.
pub async fn run(session: &impl SessionApi, prompt: &str) -> RunOutcome {
    let before = transcript(session).await.len();
    let command = send(session, prompt).await;
    let terminal = terminal_of(session, &command).await;
    let messages: Vec<Message> = transcript(session).await.into_iter().skip(before).collect();
    let tool_results = messages
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => Some(ToolOutput::of(result)),
            _ => None,
        })
        .collect();
    let reply = messages.iter().rev().find_map(|message| match message {
        Message::Assistant(assistant) => Some(assistant.text()),
        _ => None,
    });
    RunOutcome {
        terminal,
        tool_results,
        reply,
    }
}

fn text_of(result: &ToolResultMessage) -> String {
    result
        .content
        .iter()
        .map(|content| match content {
            InputContent::Text(text) => text.text.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// The text of every tool result in `messages`, oldest first.
pub fn tool_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => Some(text_of(result)),
            _ => None,
        })
        .collect()
}

/// Every tool result in `messages` as JSON, or as a JSON string where it is not JSON.
pub fn tool_values(messages: &[Message]) -> Vec<Value> {
    tool_texts(messages)
        .into_iter()
        .map(|text| serde_json::from_str(&text).unwrap_or(Value::String(text)))
        .collect()
}

/// The text of every user message in `messages`, oldest first.
pub fn user_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::User(user) => match &user.content {
                UserContent::Text(text) => Some(text.clone()),
                other => Some(format!("{other:?}")),
            },
            _ => None,
        })
        .collect()
}

/// The names of the tools the model was offered in its `request`-th call (from 0).
pub fn tool_names(model: &ScriptedModel, request: usize) -> Vec<String> {
    let requests = model.requests();
    let Some(context) = requests.get(request) else {
        panic!(
            "the model received {} requests, not a request {request}",
            requests.len()
        );
    };
    context.tools.iter().map(|tool| tool.name.clone()).collect()
}

/// The system prompt of every request the model received, oldest first.
pub fn system_prompts(model: &ScriptedModel) -> Vec<String> {
    model
        .requests()
        .into_iter()
        .map(|request| request.system_prompt)
        .collect()
}

/// The inbox state of one Session, as the Agent's inbox lists it.
pub async fn inbox_state(agent: &Agent, session_id: &SessionId) -> SessionInboxState {
    let page = match agent.list_sessions(None).await {
        Ok(page) => page,
        Err(error) => panic!("the inbox did not list: {error}"),
    };
    let state = page.sessions.into_iter().find_map(|row| match row {
        SessionSummaryRow::Available {
            session_id: id,
            summary,
        } if &id == session_id => Some(summary.state),
        _ => None,
    });
    match state {
        Some(state) => state,
        None => panic!("the inbox does not list the Session {session_id}"),
    }
}

/// Waits (bounded) until nothing runs or waits in the Session.
pub async fn until_idle(session: &impl SessionApi) {
    let idle = |activity: &SessionActivity, pending: &SessionPendingPrompts| {
        matches!(activity.queue, QueueState::Idle) && pending.prompts.is_empty()
    };
    wait_for(
        session,
        |snapshot| idle(&snapshot.activity, &snapshot.pending).then_some(()),
        |frame| match frame {
            SessionFrame::Update(update) => idle(&update.activity, &update.pending).then_some(()),
            _ => None,
        },
    )
    .await;
}
