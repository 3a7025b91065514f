//! Language models for Shiitake: one trait, streaming one assistant message per call.
//!
//! The runner in shiitake-core hands a [`Model`] a [`ModelContext`] (system
//! prompt, the Pi transcript, tools with JSON Schema), [`ModelOptions`] and a
//! cancellation token, and gets back an [`AssistantStream`] of
//! [`AssistantEvent`]s named as pi-ai names them: `start`, then
//! `text_*`/`thinking_*`/`toolcall_*` start–delta–end with a `contentIndex`,
//! then exactly one `done` or `error` carrying the complete Pi
//! [`AssistantMessage`](shiitake_protocol::message::AssistantMessage) with its
//! `usage` and `stopReason`.
//!
//! Two kinds of failure, never mixed:
//!
//! - **Before streaming** [`Model::stream`] returns `Err(`[`ModelError`]`)`,
//!   classified: rate limits, 5xx, connection failures and timeouts are
//!   [`retryable`](ModelError::retryable) (with [`retry_after`](ModelError::retry_after)
//!   from `Retry-After`); bad requests, bad keys and unknown models are not.
//! - **Once streaming**, nothing returns `Err` or panics: a broken connection,
//!   a truncated or malformed stream, or cancellation ends the stream with an
//!   `error` event whose message has `stopReason` `error` or `aborted`,
//!   `errorMessage`, and the partial content.
//!
//! Models:
//!
//! - [`OpenAiCompatible`]: chat completions over SSE (OpenAI, Ollama,
//!   llama.cpp, vLLM, OpenRouter).
//! - [`Anthropic`]: the Messages API over SSE.
//! - [`ScriptedModel`]: plays a [`Script`] deterministically, with the same
//!   events, errors and cancellation as a provider, and records every request.
//!
//! [`replay::prepare`] turns a transcript into what the model reads (skips
//! failed messages, answers dangling tool calls, strips signatures across
//! models); both providers apply it. [`select`] builds a model from a spec
//! such as `openai-compatible:http://127.0.0.1:8090/v1#smollm2`; a spec ending in
//! `?profile=small` gives a model whose [`Model::profile`] is [`ModelProfile::Small`],
//! which the runner offers a compact tool set and a short prompt.
//!
//! Usage on a message is what the provider reported, or explicitly unknown
//! ([`Usage::unknown`](shiitake_protocol::message::Usage::unknown)) when it reported
//! none: never a false zero.
//!
//! This crate knows nothing of sessions or storage; see `docs/models.md` for
//! pointing the product at a provider.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use futures::StreamExt;
//! use shiitake_model::{AssistantEvent, ModelContext, ModelEnv, ModelOptions, select};
//! use shiitake_protocol::message::{Message, UserMessage};
//! use tokio_util::sync::CancellationToken;
//!
//! let model = select("openai-compatible:http://127.0.0.1:8090/v1#smollm2", &ModelEnv::from_env())?;
//! let context = ModelContext {
//!     system_prompt: "Be brief.".into(),
//!     messages: vec![Message::User(UserMessage::text("Hello", 0))].into(),
//!     tools: vec![],
//! };
//! let mut events = model.stream(context, ModelOptions::default(), CancellationToken::new()).await?;
//! while let Some(event) = events.next().await {
//!     match event {
//!         AssistantEvent::TextDelta { delta, .. } => print!("{delta}"),
//!         AssistantEvent::Done { message, .. } => println!("\n{:?}", message.usage),
//!         AssistantEvent::Error { error, .. } => eprintln!("{:?}", error.error_message),
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod anthropic;
mod builder;
pub mod error;
pub mod event;
mod http;
pub mod model;
pub mod openai;
mod profile;
pub mod replay;
pub mod scripted;
mod select;
mod sse;

pub use anthropic::{Anthropic, AnthropicConfig};
pub use error::{ModelError, ModelErrorKind};
pub use event::{AssistantEvent, final_message};
pub use http::HttpLimits;
pub use model::{
    AssistantStream, Model, ModelContext, ModelInfo, ModelOptions, ReasoningLevel, ToolChoice,
    ToolSpec,
};
pub use openai::{OpenAiCompatible, OpenAiConfig, ToolStreaming};
pub use profile::ModelProfile;
pub use scripted::{Recording, Script, ScriptError, ScriptedModel, Step, Turn};
pub use select::{ModelEnv, SelectError, select};
