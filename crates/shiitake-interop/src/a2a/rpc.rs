//! The JSON-RPC endpoint: reads one request, runs its method over [`Delegate`], and
//! answers with JSON, JSON after a wait, or an SSE stream ([`reply`]). Every failure,
//! the client's or the Agent's, is a JSON-RPC error with HTTP 200, never a 500.
//!
//! - `SendMessage` / `SendStreamingMessage`: a message without `taskId` is a prompt,
//!   in the Session `contextId` names or a new one (created with the `messageId` as
//!   its idempotency key, which is the prompt's `requestId` too: a retried send starts
//!   nothing new). A message with the `taskId` of a task in input-required is the
//!   answer to its question or approval, and the same task goes on.
//! - `GetTask`, `CancelTask`, `SubscribeToTask`: the task id names its Session and run
//!   ([`TaskId`]), read from the durable Session by whichever process is asked.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use shiitake_protocol::{
    AgentApi, CancelInput, CancelResult, ErrorCode, PromptText, RequestId, SessionApi, SessionId,
};

use super::Shared;
use super::envelope::{self, Call, Method};
use super::error::A2aError;
use super::events::{self, Item};
use super::reply;
use super::state::{Phase, RunView, observe};
use super::task::{state_of, task};
use super::task_id::TaskId;
use super::wire::{GetTaskParams, Message, SendMessageParams, TaskIdParams, TaskState};
use crate::delegate::Reply;

/// Largest request body read, in bytes (the server's bound for its own API).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Longest a blocking `SendMessage` waits for its task to end or need input; then it
/// answers with the task as it is (working), to be followed with `GetTask` or
/// `SubscribeToTask`.
pub const MAX_BLOCKING_WAIT: Duration = Duration::from_secs(240);

/// Longest `CancelTask` waits for the cancelled run's ending before it answers.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// How a method answers.
enum Answer {
    /// With this result now.
    Now(Value),
    /// With the result of this wait.
    Later(Pin<Box<dyn Future<Output = Result<Value, A2aError>> + Send>>),
    /// With these events.
    Stream(tokio::sync::mpsc::UnboundedReceiver<Item>),
}

/// `POST /v1/a2a`.
pub async fn serve<A>(
    State(shared): State<Arc<Shared<A>>>,
    headers: HeaderMap,
    body: Body,
) -> Response
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        let error = A2aError::InvalidRequest(format!(
            "the request is larger than {MAX_BODY_BYTES} bytes, or its body could not be read"
        ));
        return reply::json(&envelope::error(&Value::Null, &error));
    };
    let call = match envelope::parse(&bytes) {
        Ok(call) => call,
        Err(refused) => return reply::json(&envelope::error(&refused.id, &refused.error)),
    };
    let id = call.id.clone();
    let answered = match version(&headers) {
        Ok(()) => shared.call(call).await,
        Err(error) => Err(error),
    };
    // A wait or a stream holds one of the process's places for open responses.
    let place = match &answered {
        Ok(Answer::Later(_) | Answer::Stream(_)) => match shared.places.enter() {
            Ok(place) => Some(place),
            Err(error) => return reply::json(&envelope::error(&id, &A2aError::from_agent(error))),
        },
        _ => None,
    };
    match (answered, place) {
        (Ok(Answer::Now(result)), _) => reply::json(&envelope::result(&id, result)),
        (Ok(Answer::Later(result)), Some(place)) => {
            let wrapped = Box::pin(async move {
                match result.await {
                    Ok(result) => envelope::result(&id, result),
                    Err(error) => envelope::error(&id, &error),
                }
            });
            reply::json_later(wrapped, shared.keep_alive, place)
        }
        (Ok(Answer::Stream(items)), Some(place)) => reply::sse(id, items, shared.keep_alive, place),
        (Ok(Answer::Later(_) | Answer::Stream(_)), None) => reply::json(&envelope::error(
            &id,
            &A2aError::Internal("a long answer without its place".to_owned()),
        )),
        (Err(error), _) => reply::json(&envelope::error(&id, &error)),
    }
}

/// Refuses a client that says it speaks another major version than 1 (none said is
/// taken as 1.0: the real clients always say it).
fn version(headers: &HeaderMap) -> Result<(), A2aError> {
    let Some(value) = headers.get("a2a-version") else {
        return Ok(());
    };
    let said = value.to_str().unwrap_or_default().trim();
    if said == "1" || said.starts_with("1.") {
        return Ok(());
    }
    Err(A2aError::VersionNotSupported(
        said.chars().take(20).collect(),
    ))
}

fn params<T: DeserializeOwned>(params: Value) -> Result<T, A2aError> {
    serde_json::from_value(params).map_err(|error| A2aError::InvalidParams(error.to_string()))
}

fn task_id(text: &str) -> Result<TaskId, A2aError> {
    TaskId::decode(text).map_err(|error| A2aError::TaskNotFound(error.to_string()))
}

/// The history bound a client asked for: none when absent, no history at 0.
fn history_limit(length: Option<i64>) -> Result<Option<usize>, A2aError> {
    length
        .map(|length| {
            usize::try_from(length).map_err(|_| {
                A2aError::InvalidParams(format!("historyLength is {length}; it is 0 or more"))
            })
        })
        .transpose()
}

/// A present, non-empty string (ProtoJSON writers may send `""` for none).
fn given(value: Option<String>) -> Option<String> {
    value.filter(|value| !value.is_empty())
}

/// The words of `message`: its text parts, one a line.
fn words(message: &Message) -> Result<String, A2aError> {
    let mut texts = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        match (&part.text, &part.raw, &part.url, &part.data) {
            (Some(text), None, None, None) => texts.push(text.as_str()),
            (None, None, None, None) => {
                return Err(A2aError::InvalidParams(
                    "a part holds one of text, raw, url or data".to_owned(),
                ));
            }
            _ => {
                return Err(A2aError::ContentTypeNotSupported(
                    "this agent reads text parts only (text/plain)".to_owned(),
                ));
            }
        }
    }
    let text = texts.join("\n");
    if text.trim().is_empty() {
        return Err(A2aError::InvalidParams(
            "the message has no words: send a text part".to_owned(),
        ));
    }
    Ok(text)
}

/// The request id of an answer sent as message `message_id`: the same for its retry,
/// at most 128 bytes.
fn answer_request(message_id: &str) -> String {
    let mut request = String::from("a2a-");
    for c in message_id.chars() {
        if request.len() + c.len_utf8() > 128 {
            break;
        }
        request.push(c);
    }
    request
}

impl<A> Shared<A>
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    async fn call(&self, call: Call) -> Result<Answer, A2aError> {
        match call.method {
            Method::SendMessage => self.send(params(call.params)?, false).await,
            Method::SendStreamingMessage => self.send(params(call.params)?, true).await,
            Method::GetTask => {
                let query: GetTaskParams = params(call.params)?;
                let id = task_id(&query.id)?;
                let limit = history_limit(query.history_length)?;
                let view = self.observe(&id).await?;
                Ok(Answer::Now(to_json(&task(&id, &view, limit))))
            }
            Method::CancelTask => {
                let query: TaskIdParams = params(call.params)?;
                self.cancel(task_id(&query.id)?).await
            }
            Method::SubscribeToTask => {
                let query: TaskIdParams = params(call.params)?;
                let id = task_id(&query.id)?;
                let view = self.observe(&id).await?;
                Ok(self.stream(id, view))
            }
            Method::ListTasks => Err(A2aError::UnsupportedOperation(
                "ListTasks is not offered: GetTask reads a task by its id".to_owned(),
            )),
            Method::GetExtendedAgentCard => Err(A2aError::ExtendedAgentCardNotConfigured),
            Method::PushConfig => Err(A2aError::PushNotificationNotSupported),
        }
    }

    async fn observe(&self, id: &TaskId) -> Result<RunView, A2aError> {
        let session = self.delegate.agent().session(id.session.clone());
        observe(&session, &id.command)
            .await
            .map_err(A2aError::from_task)
    }

    /// The events of task `id` from `view` on, as a stream.
    fn stream(&self, id: TaskId, view: RunView) -> Answer {
        let (sender, items) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(events::stream(self.delegate.clone(), id, view, sender));
        Answer::Stream(items)
    }

    async fn send(&self, params: SendMessageParams, streaming: bool) -> Result<Answer, A2aError> {
        let message = params.message;
        let text = words(&message)?;
        let configuration = params.configuration.unwrap_or_default();
        let limit = history_limit(configuration.history_length)?;
        let context = given(message.context_id.clone());
        let id = match given(message.task_id.clone()) {
            Some(task) => {
                self.answer(&task, context, &message.message_id, text)
                    .await?
            }
            None => self.start(context, &message.message_id, text).await?,
        };
        let view = self.observe(&id).await?;
        if streaming {
            return Ok(self.stream(id, view));
        }
        if configuration.return_immediately == Some(true) || state_of(&view.phase).ends_stream() {
            return Ok(Answer::Now(json!({"task": task(&id, &view, limit)})));
        }
        let delegate = self.delegate.clone();
        Ok(Answer::Later(Box::pin(async move {
            let followed = tokio::time::timeout(
                MAX_BLOCKING_WAIT,
                delegate.follow(&id.session, &id.command, |_| {}),
            )
            .await;
            if let Ok(Err(error)) = followed {
                return Err(A2aError::from_task(error));
            }
            let session = delegate.agent().session(id.session.clone());
            let view = observe(&session, &id.command)
                .await
                .map_err(A2aError::from_task)?;
            Ok(json!({"task": task(&id, &view, limit)}))
        })))
    }

    /// Queues `text` as a prompt of `context` (a new Session when none): its task.
    async fn start(
        &self,
        context: Option<String>,
        message_id: &str,
        text: String,
    ) -> Result<TaskId, A2aError> {
        let unknown = |context: &str| {
            A2aError::InvalidParams(format!(
                "contextId {context:?} names no conversation of this agent; leave it out to start one"
            ))
        };
        let session = context
            .as_deref()
            .map(|context| SessionId::new(context).map_err(|_| unknown(context)))
            .transpose()?;
        let key = RequestId::new(message_id)
            .map_err(|error| A2aError::InvalidParams(format!("messageId: {error}")))?;
        let prompt =
            PromptText::new(text).map_err(|error| A2aError::InvalidParams(error.to_string()))?;
        let started = self
            .delegate
            .start(session.clone(), prompt, Some(key))
            .await
            .map_err(|error| match (&error.code, &context) {
                (ErrorCode::NotFound, Some(context)) => unknown(context),
                _ => A2aError::from_agent(error),
            })?;
        Ok(TaskId {
            session: started.session_id,
            command: started.command_id,
        })
    }

    /// Answers what task `task` waits on with `text`: the task.
    async fn answer(
        &self,
        task: &str,
        context: Option<String>,
        message_id: &str,
        text: String,
    ) -> Result<TaskId, A2aError> {
        let id = task_id(task)?;
        if context
            .as_deref()
            .is_some_and(|context| context != id.session.as_str())
        {
            return Err(A2aError::InvalidParams(format!(
                "contextId is not the context of task {task}"
            )));
        }
        let view = self.observe(&id).await?;
        match &view.phase {
            Phase::Needs(needed) => {
                self.delegate
                    .answer(
                        &id.session,
                        needed,
                        &Reply::Text(text),
                        answer_request(message_id),
                    )
                    .await
                    .map_err(A2aError::from_agent)?;
                Ok(id)
            }
            Phase::Ended(_) => Err(A2aError::UnsupportedOperation(format!(
                "task {task} is in terminal state: {}",
                state_name(state_of(&view.phase))
            ))),
            Phase::Queued | Phase::Running => Err(A2aError::InvalidParams(format!(
                "task {task} waits for no input (it is {}); send a message without taskId for new work",
                state_name(state_of(&view.phase))
            ))),
        }
    }

    /// Cancels task `id`: a queued prompt is taken off the queue, a running one is
    /// stopped (one cancel of that very command does either, so no other run is
    /// stopped by a race); the answer waits a little for the ending.
    async fn cancel(&self, id: TaskId) -> Result<Answer, A2aError> {
        let view = self.observe(&id).await?;
        if let Phase::Ended(_) = view.phase {
            return Err(A2aError::TaskNotCancelable(format!(
                "task {} is in terminal state: {}",
                id.encode(),
                state_name(state_of(&view.phase))
            )));
        }
        let cancelled = self
            .delegate
            .agent()
            .session(id.session.clone())
            .cancel(CancelInput {
                command_id: id.command.clone(),
                only_if_pending: Some(false),
            })
            .await
            .map_err(A2aError::from_task)?;
        if let CancelResult::Accepted(_) = cancelled {
            // The ending is committed by the run's owner; wait for it, a little.
            let ending = self.delegate.follow(&id.session, &id.command, |_| {});
            if let Ok(Err(error)) = tokio::time::timeout(CANCEL_WAIT, ending).await {
                return Err(A2aError::from_task(error));
            }
        }
        let view = self.observe(&id).await?;
        let state = state_of(&view.phase);
        if matches!(cancelled, CancelResult::TooLate(_)) && state != TaskState::Canceled {
            return Err(A2aError::TaskNotCancelable(format!(
                "task {} ended before it could be cancelled: {}",
                id.encode(),
                state_name(state)
            )));
        }
        Ok(Answer::Now(to_json(&task(&id, &view, None))))
    }
}

/// A state's wire name.
fn state_name(state: TaskState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::a2a::wire::{Part, Role};

    fn message(parts: Vec<Part>) -> Message {
        Message {
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            role: Role::User,
            parts,
        }
    }

    #[test]
    fn a_message_is_its_text_parts() {
        let two = message(vec![Part::text("one"), Part::text("two")]);
        assert_eq!(words(&two).unwrap(), "one\ntwo");
        let data = Part {
            data: Some(json!({"a": 1})),
            ..Part::default()
        };
        assert_eq!(words(&message(vec![data])).unwrap_err().code(), -32005);
        assert_eq!(
            words(&message(vec![Part::default()])).unwrap_err().code(),
            -32602
        );
        assert_eq!(
            words(&message(vec![Part::text("  ")])).unwrap_err().code(),
            -32602
        );
        assert_eq!(words(&message(Vec::new())).unwrap_err().code(), -32602);
    }

    #[test]
    fn small_rules() {
        assert_eq!(history_limit(None).unwrap(), None);
        assert_eq!(history_limit(Some(0)).unwrap(), Some(0));
        assert_eq!(history_limit(Some(-1)).unwrap_err().code(), -32602);
        assert_eq!(answer_request("abc"), "a2a-abc");
        assert_eq!(answer_request(&"é".repeat(100)).len(), 128);
        assert_eq!(task_id("nope").unwrap_err().code(), -32001);
        assert_eq!(
            state_name(TaskState::InputRequired),
            "TASK_STATE_INPUT_REQUIRED"
        );
        let mut headers = HeaderMap::new();
        assert!(version(&headers).is_ok());
        headers.insert("a2a-version", "1.0".parse().unwrap());
        assert!(version(&headers).is_ok());
        headers.insert("a2a-version", "0.3".parse().unwrap());
        assert_eq!(version(&headers).unwrap_err().code(), -32009);
    }
}
