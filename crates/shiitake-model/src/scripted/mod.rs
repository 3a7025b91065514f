//! A deterministic model driven by a [`Script`], for tests and benchmarks.
//!
//! It goes through the same message builder as the providers, so it emits
//! the same events in the same order, fails before the first byte with the
//! same classified errors, and ends on cancellation with the same `aborted`
//! event. The contexts it receives are recorded for assertions, up to a bound
//! ([`Recording`]): a long benchmark's model must not keep every context. It keeps its
//! place in the script in memory, or in a place file ([`ScriptedModel::keeping_place_in`],
//! `scripted/place.rs`) shared by every model built from the same script.

pub(crate) mod place;
mod script;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream;
use shiitake_protocol::message::{
    AssistantContent, InputContent, Message, StopReason, UsageSource, UserContent,
};
use tokio_util::sync::CancellationToken;

use crate::builder::MessageBuilder;
use crate::error::{ModelError, ModelErrorKind};
use crate::event::AssistantEvent;
use crate::http::aborted;
use crate::model::{AssistantStream, Model, ModelContext, ModelInfo, ModelOptions};
use crate::profile::ModelProfile;

pub use script::{Script, ScriptError, ScriptFailure, ScriptToolCall, Step, Turn};

/// The `api` and `provider` the scripted model stamps on messages.
pub const SCRIPTED_API: &str = "scripted";

/// How many received contexts a [`ScriptedModel`] keeps for [`ScriptedModel::requests`].
///
/// A context is shared with the runner that sent it, so a recorded context makes the
/// runner copy its transcript at its next append, and an unbounded record would keep
/// every copy (growing with the square of a long Session's history); a benchmark
/// turns it off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recording {
    /// Keep no context: each call costs the same however many came before.
    Off,
    /// Keep the most recent `n` contexts, dropping the oldest.
    Last(usize),
}

impl Default for Recording {
    fn default() -> Self {
        Self::Last(DEFAULT_RECORDED)
    }
}

/// Contexts kept by default: more than any test makes calls, few enough to stay bounded.
pub const DEFAULT_RECORDED: usize = 1024;

/// A [`Model`] that plays a [`Script`], one turn per call.
#[derive(Debug)]
pub struct ScriptedModel {
    script: Script,
    info: ModelInfo,
    recording: Recording,
    /// The place file, when the place is kept outside this value.
    place: Option<PathBuf>,
    /// What it says it can handle, so tests see the tools and prompt a profile gets.
    profile: ModelProfile,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    calls: usize,
    requests: VecDeque<ModelContext>,
}

impl ScriptedModel {
    /// A model playing `script` (see [`Script::validate`] for the placement rules;
    /// a misplaced `fail` acts as a `cut`).
    pub fn new(script: Script) -> Self {
        let model = script
            .model
            .clone()
            .unwrap_or_else(|| SCRIPTED_API.to_owned());
        let info = ModelInfo::new(SCRIPTED_API, SCRIPTED_API, model);
        Self {
            script,
            info,
            recording: Recording::default(),
            place: None,
            profile: ModelProfile::Full,
            state: Mutex::new(State::default()),
        }
    }

    /// Keeps its place in the script in `file` instead of in memory: every model built
    /// with the same file plays on where the last left off, so a host that builds one
    /// per run (or a restarted process) plays the script across runs, not from its first
    /// turn each time. A fresh file starts at the first turn. `select` uses it for
    /// `scripted:<path>` when [`ModelEnv::scripted_places`](crate::ModelEnv::scripted_places)
    /// names a directory.
    #[must_use]
    pub fn keeping_place_in(mut self, file: impl Into<PathBuf>) -> Self {
        self.place = Some(file.into());
        self
    }

    /// Says it is a model of `profile` (`scripted:<path>?profile=small`), so a run
    /// offers it what a model of that profile gets.
    #[must_use]
    pub fn with_profile(mut self, profile: ModelProfile) -> Self {
        self.profile = profile;
        self
    }

    /// Keeps received contexts as `recording` says (by default the last
    /// [`DEFAULT_RECORDED`]).
    #[must_use]
    pub fn with_recording(mut self, recording: Recording) -> Self {
        self.recording = recording;
        self
    }

    /// The contexts received so far that the recording bound kept, in call order
    /// (including failed calls); every one of them unless more than the bound were made.
    pub fn requests(&self) -> Vec<ModelContext> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .requests
            .iter()
            .cloned()
            .collect()
    }

    /// How many calls were made to this value (with a place file, other models built
    /// from the same file count their own).
    pub fn calls(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .calls
    }
}

/// One thing the stream does next.
enum Action {
    StartText,
    Text(String),
    StartThinking,
    Thinking(String),
    StartToolCall { id: String, name: String },
    Arguments(String),
    Close,
    Pause(u64),
    Cut(String),
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    let characters: Vec<char> = text.chars().collect();
    characters
        .chunks(size.max(1))
        .map(|chunk| chunk.iter().collect())
        .collect()
}

fn last_user_text(context: &ModelContext) -> String {
    for message in context.messages.iter().rev() {
        if let Message::User(user) = message {
            return match &user.content {
                UserContent::Text(text) => text.clone(),
                UserContent::Blocks(blocks) => blocks
                    .iter()
                    .filter_map(|block| match block {
                        InputContent::Text(text) => Some(text.text.as_str()),
                        InputContent::Image(_) => None,
                    })
                    .collect(),
            };
        }
    }
    "(nothing to echo: the context has no user message)".to_owned()
}

/// The characters of the context the model reads: the system prompt, the text of
/// every message (tool call arguments as their JSON) and the tools' descriptions.
///
/// Counted without serialising the whole context, so a long transcript costs the
/// scripted model a walk, not a copy.
fn context_chars(context: &ModelContext) -> usize {
    let input = |blocks: &[InputContent]| -> usize {
        blocks
            .iter()
            .map(|block| match block {
                InputContent::Text(text) => text.text.len(),
                InputContent::Image(image) => image.data.len(),
            })
            .sum()
    };
    let messages: usize = context
        .messages
        .iter()
        .map(|message| match message {
            Message::User(user) => match &user.content {
                UserContent::Text(text) => text.len(),
                UserContent::Blocks(blocks) => input(blocks),
            },
            Message::Assistant(assistant) => assistant
                .content
                .iter()
                .map(|block| match block {
                    AssistantContent::Text(text) => text.text.len(),
                    AssistantContent::Thinking(thinking) => thinking.thinking.len(),
                    AssistantContent::ToolCall(call) => {
                        call.name.len() + json_chars(&call.arguments)
                    }
                })
                .sum(),
            Message::ToolResult(result) => result.tool_name.len() + input(&result.content),
        })
        .sum();
    let tools: usize = context
        .tools
        .iter()
        .map(|tool| tool.name.len() + tool.description.len())
        .sum();
    context.system_prompt.len() + messages + tools
}

/// The characters of the strings and keys in a JSON object, without writing it out.
fn json_chars(object: &serde_json::Map<String, serde_json::Value>) -> usize {
    fn value(item: &serde_json::Value) -> usize {
        match item {
            serde_json::Value::String(text) => text.len(),
            serde_json::Value::Array(items) => items.iter().map(value).sum(),
            serde_json::Value::Object(object) => json_chars(object),
            serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
                1
            }
        }
    }
    object
        .iter()
        .map(|(key, item)| key.len() + value(item))
        .sum()
}

/// A rough, deterministic token estimate: four characters a token.
fn estimate_tokens(characters: usize) -> u64 {
    u64::try_from(characters.div_ceil(4)).unwrap_or(u64::MAX)
}

struct Player {
    actions: VecDeque<Action>,
    builder: MessageBuilder,
    cancel: CancellationToken,
    chunk_delay_ms: u64,
    stop_reason: Option<StopReason>,
    input_tokens: u64,
    output_chars: usize,
}

impl Player {
    async fn pause(&mut self, millis: u64) {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => {}
            () = tokio::time::sleep(Duration::from_millis(millis)) => {}
        }
    }

    async fn next(mut self) -> Option<(AssistantEvent, Self)> {
        loop {
            if let Some(event) = self.builder.pop() {
                return Some((event, self));
            }
            if self.builder.is_finished() {
                return None;
            }
            if self.cancel.is_cancelled() {
                self.builder
                    .fail(StopReason::Aborted, "aborted while the model was streaming");
                continue;
            }
            let Some(action) = self.actions.pop_front() else {
                let usage = self.builder.usage_mut();
                usage.source = UsageSource::Estimated;
                usage.input = self.input_tokens;
                usage.output = estimate_tokens(self.output_chars);
                self.builder.recompute_total();
                if let Some(reason) = self.stop_reason {
                    self.builder.set_stop_reason(reason);
                }
                self.builder.finish();
                continue;
            };
            let streamed = matches!(
                action,
                Action::Text(_) | Action::Thinking(_) | Action::Arguments(_)
            );
            match action {
                Action::StartText => self.builder.start_text(),
                Action::Text(text) => {
                    self.output_chars += text.chars().count();
                    self.builder.text(&text);
                }
                Action::StartThinking => self.builder.start_thinking(),
                Action::Thinking(text) => {
                    self.output_chars += text.chars().count();
                    self.builder.thinking(&text);
                }
                Action::StartToolCall { id, name } => self.builder.start_tool_call(&id, &name),
                Action::Arguments(text) => {
                    self.output_chars += text.chars().count();
                    self.builder.tool_call_arguments(&text);
                }
                Action::Close => self.builder.close(),
                Action::Pause(millis) => self.pause(millis).await,
                Action::Cut(message) => self.builder.fail(StopReason::Error, message),
            }
            if streamed {
                if self.chunk_delay_ms > 0 {
                    self.pause(self.chunk_delay_ms).await;
                } else {
                    tokio::task::yield_now().await;
                }
            }
        }
    }
}

fn failure_error(failure: &ScriptFailure) -> ModelError {
    let message = failure
        .message
        .clone()
        .unwrap_or_else(|| format!("scripted failure with HTTP status {}", failure.status));
    ModelError::from_status(failure.status, message)
        .with_retry_after(failure.retry_after_ms.map(Duration::from_millis))
}

#[async_trait]
impl Model for ScriptedModel {
    fn describe(&self) -> ModelInfo {
        self.info.clone()
    }

    fn profile(&self) -> ModelProfile {
        self.profile
    }

    async fn stream(
        &self,
        context: ModelContext,
        _options: ModelOptions,
        cancel: CancellationToken,
    ) -> Result<AssistantStream, ModelError> {
        // With a place file, the call's number comes from the file (blocking only for
        // the lock held by a concurrent call's read and rename).
        let shared = match &self.place {
            Some(file) => Some(place::take_call(file).map_err(|error| {
                ModelError::new(
                    ModelErrorKind::Config,
                    format!(
                        "the scripted model cannot keep its place in {}: {error}",
                        file.display()
                    ),
                )
            })?),
            None => None,
        };
        let (call, turn) = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.calls += 1;
            if let Recording::Last(keep) = self.recording
                && keep > 0
            {
                if state.requests.len() == keep {
                    state.requests.pop_front();
                }
                state.requests.push_back(context.clone());
            }
            let index = shared.map_or(state.calls - 1, |made| {
                usize::try_from(made).unwrap_or(usize::MAX)
            });
            let count = self.script.turns.len();
            let turn = if index < count {
                self.script.turns.get(index)
            } else if self.script.cycle && count > 0 {
                self.script.turns.get(index % count)
            } else {
                None
            };
            (index.saturating_add(1), turn.cloned())
        };
        let Some(turn) = turn else {
            return Err(ModelError::new(
                ModelErrorKind::ScriptExhausted,
                format!(
                    "the script has {} turn(s) and all were used; call {call} has no turn \
                     (add turns, or set \"cycle\": true to repeat them)",
                    self.script.turns.len()
                ),
            ));
        };
        let size = self.script.chunk_chars;
        let mut steps = turn.steps.into_iter().peekable();
        // Leading delays and a failure happen before the first byte, as with a server.
        while let Some(step) = steps.next_if(|s| matches!(s, Step::DelayMs(_) | Step::Fail(_))) {
            match step {
                Step::DelayMs(millis) => {
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => return Err(aborted()),
                        () = tokio::time::sleep(Duration::from_millis(millis)) => {}
                    }
                }
                Step::Fail(failure) => return Err(failure_error(&failure)),
                _ => {}
            }
        }
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        let mut actions = VecDeque::new();
        let mut tool_index = 0;
        for step in steps {
            match step {
                Step::Text(text) => {
                    actions.push_back(Action::StartText);
                    actions.extend(chunks(&text, size).into_iter().map(Action::Text));
                    actions.push_back(Action::Close);
                }
                Step::Echo => {
                    actions.push_back(Action::StartText);
                    actions.extend(
                        chunks(&last_user_text(&context), size)
                            .into_iter()
                            .map(Action::Text),
                    );
                    actions.push_back(Action::Close);
                }
                Step::Thinking(text) => {
                    actions.push_back(Action::StartThinking);
                    actions.extend(chunks(&text, size).into_iter().map(Action::Thinking));
                    actions.push_back(Action::Close);
                }
                Step::ToolCall(tool) => {
                    tool_index += 1;
                    let id = tool
                        .id
                        .unwrap_or_else(|| format!("call_{call}_{tool_index}"));
                    actions.push_back(Action::StartToolCall {
                        id,
                        name: tool.name,
                    });
                    let arguments = serde_json::Value::Object(tool.arguments).to_string();
                    actions.extend(chunks(&arguments, size).into_iter().map(Action::Arguments));
                    actions.push_back(Action::Close);
                }
                Step::DelayMs(millis) => actions.push_back(Action::Pause(millis)),
                Step::Cut(message) => {
                    actions.push_back(Action::Cut(format!("stream cut: {message}")))
                }
                Step::Fail(failure) => {
                    actions.push_back(Action::Cut(failure_error(&failure).to_string()))
                }
            }
        }
        let context_chars = context_chars(&context);
        let player = Player {
            actions,
            builder: MessageBuilder::new(&self.info),
            cancel,
            chunk_delay_ms: self.script.chunk_delay_ms,
            stop_reason: turn.stop_reason,
            input_tokens: estimate_tokens(context_chars),
            output_chars: 0,
        };
        Ok(stream::unfold(player, Player::next).fuse().boxed())
    }
}
