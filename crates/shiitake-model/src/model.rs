//! The [`Model`] trait and the values a caller hands it.

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use shiitake_protocol::message::Message;
use tokio_util::sync::CancellationToken;

use crate::error::ModelError;
use crate::event::AssistantEvent;
use crate::profile::ModelProfile;

/// The events of one assistant message; it always ends with exactly one `done` or `error`.
pub type AssistantStream = BoxStream<'static, AssistantEvent>;

/// A language model that streams one assistant message per call.
///
/// Implementations are the OpenAI-compatible and Anthropic providers and the
/// scripted model; the runner only ever sees this trait.
#[async_trait]
pub trait Model: Send + Sync {
    /// Which wire API, provider and model id answer, stamped on every message.
    fn describe(&self) -> ModelInfo;

    /// What the model can handle, as its spec says; [`ModelProfile::Full`] unless told.
    fn profile(&self) -> ModelProfile {
        ModelProfile::Full
    }

    /// Sends `context` to the model and streams its answer.
    ///
    /// `Err` means the call failed before streaming started (see
    /// [`ModelError::retryable`]); once this returns `Ok` every failure, abort
    /// included, arrives as the stream's final `error` event. Cancelling
    /// `cancel` ends the call promptly and drops the connection.
    async fn stream(
        &self,
        context: ModelContext,
        options: ModelOptions,
        cancel: CancellationToken,
    ) -> Result<AssistantStream, ModelError>;
}

#[async_trait]
impl<M: Model + ?Sized> Model for Arc<M> {
    fn describe(&self) -> ModelInfo {
        (**self).describe()
    }

    fn profile(&self) -> ModelProfile {
        (**self).profile()
    }

    async fn stream(
        &self,
        context: ModelContext,
        options: ModelOptions,
        cancel: CancellationToken,
    ) -> Result<AssistantStream, ModelError> {
        (**self).stream(context, options, cancel).await
    }
}

/// Identity of a model, as written into `AssistantMessage.{api, provider, model}`.
///
/// Replay compares it with the identity on earlier messages to decide whether
/// provider signatures can be sent back.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The wire API, such as `openai-completions`, `anthropic-messages` or `scripted`.
    pub api: String,
    /// Who serves it, such as `openai`, `anthropic`, `openai-compatible`.
    pub provider: String,
    /// The model id sent to the provider.
    pub model: String,
}

impl ModelInfo {
    /// Builds an identity from its three parts.
    pub fn new(
        api: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        Self {
            api: api.into(),
            provider: provider.into(),
            model: model.into(),
        }
    }
}

/// Everything the model reads: the system prompt, the transcript and the tools.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelContext {
    /// Instructions sent ahead of the transcript; empty means none.
    pub system_prompt: String,
    /// The transcript, oldest first; providers apply [`crate::replay::prepare`] to it.
    ///
    /// Shared, so handing a long transcript to a model costs nothing: the runner
    /// appends to its own copy once the call is over, and copies only when a
    /// model still holds this one.
    pub messages: Arc<Vec<Message>>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
}

/// A tool the model may call, described by a JSON Schema for its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model uses to call it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Per-call knobs; `None` leaves the provider's default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelOptions {
    /// Upper bound on generated tokens.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// How hard a reasoning model should think; `None` sends nothing.
    pub reasoning: Option<ReasoningLevel>,
    /// Whether and which tool the model must call.
    pub tool_choice: ToolChoice,
}

/// Reasoning effort, mapped to `reasoning_effort` (OpenAI) or a thinking budget (Anthropic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningLevel {
    /// Least effort.
    Minimal,
    /// Some effort.
    Low,
    /// The usual effort.
    Medium,
    /// Most effort.
    High,
}

/// Whether the model may, must not, or must call a given tool.
///
/// Some servers (llama.cpp with a function-calling chat format) only stream
/// tool calls when one is named, so the runner can force it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must answer without tools.
    None,
    /// The model must call this tool.
    Tool(String),
}
