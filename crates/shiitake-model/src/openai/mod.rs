//! The OpenAI-compatible chat completions provider.
//!
//! One client speaks to OpenAI, Ollama, llama.cpp, vLLM and OpenRouter-style
//! servers: `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options.include_usage`, parsed as SSE chunks until `data: [DONE]`.
//! Text arrives in `delta.content`, reasoning in `delta.reasoning_content` or
//! `delta.reasoning` (mapped to thinking), tool calls as `delta.tool_calls`
//! pieces keyed by `index` and assembled here.
//!
//! Some servers cannot stream a tool call (llama-cpp-python's function-calling
//! chat formats answer an empty 200 when the model picks a tool). For them
//! [`ToolStreaming::NonStreamingReplay`] asks for tool-bearing answers whole
//! (`stream: false`) and replays each as the events a stream would have given,
//! so the runner has one code path.

mod decode;
mod request;
mod whole;

use async_trait::async_trait;
use reqwest::Client;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::builder::MessageBuilder;
use crate::error::{ModelError, ModelErrorKind};
use crate::http::{self, HttpLimits};
use crate::model::{AssistantStream, Model, ModelContext, ModelInfo, ModelOptions, ToolChoice};
use crate::profile::ModelProfile;
use crate::sse;

/// The `api` name this provider stamps on messages.
pub const OPENAI_COMPLETIONS_API: &str = "openai-completions";

/// Whether the server can stream an answer that may call tools.
///
/// A capability of the server, not of one model: set it from what the server
/// does (see `docs/models.md`), in a spec as `?tool_streaming=replay`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ToolStreaming {
    /// Every request streams (OpenAI, Ollama, vLLM, OpenRouter).
    #[default]
    Streaming,
    /// Requests that offer tools (with a tool choice other than `none`) are sent
    /// with `stream: false`, and the whole answer is replayed as the same
    /// events; requests without tools still stream.
    NonStreamingReplay,
}

impl ToolStreaming {
    /// The spelling used in spec strings: `streaming` or `replay`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStreaming::Streaming => "streaming",
            ToolStreaming::NonStreamingReplay => "replay",
        }
    }
}

impl std::str::FromStr for ToolStreaming {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "streaming" => Ok(ToolStreaming::Streaming),
            "replay" => Ok(ToolStreaming::NonStreamingReplay),
            other => Err(format!(
                "tool_streaming is `streaming` or `replay`, not `{other}`"
            )),
        }
    }
}

/// Where and how to reach an OpenAI-compatible server.
#[derive(Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL including the version path, such as `https://api.openai.com/v1`.
    pub base_url: String,
    /// The model id sent as `model`.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present (local servers need none).
    pub api_key: Option<String>,
    /// The `provider` stamped on messages: `openai`, `openai-compatible`, …
    pub provider: String,
    /// Extra headers on every request (OpenRouter's `HTTP-Referer`, proxies' keys).
    pub headers: Vec<(String, String)>,
    /// Name of the output limit field: OpenAI wants `max_completion_tokens`, others `max_tokens`.
    pub max_tokens_field: String,
    /// Timeouts and size bounds.
    pub limits: HttpLimits,
    /// Whether answers that may call tools are streamed or asked whole and replayed.
    pub tool_streaming: ToolStreaming,
    /// What the model can handle (`?profile=small` in a spec).
    pub profile: ModelProfile,
}

impl OpenAiConfig {
    /// A configuration for any OpenAI-compatible server (provider `openai-compatible`).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            provider: "openai-compatible".to_owned(),
            headers: Vec::new(),
            max_tokens_field: "max_tokens".to_owned(),
            limits: HttpLimits::default(),
            tool_streaming: ToolStreaming::Streaming,
            profile: ModelProfile::Full,
        }
    }

    /// The configuration for api.openai.com (or `base_url` when set).
    pub fn openai(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        let mut config = Self::new("https://api.openai.com/v1", model);
        config.api_key = Some(api_key.into());
        config.provider = "openai".to_owned();
        config.max_tokens_field = "max_completion_tokens".to_owned();
        config
    }

    /// Sets the API key.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the provider name stamped on messages.
    #[must_use]
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }

    /// Adds a header sent with every request.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Replaces the timeouts and size bounds.
    #[must_use]
    pub fn limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Says whether the server can stream tool calls.
    #[must_use]
    pub fn tool_streaming(mut self, tool_streaming: ToolStreaming) -> Self {
        self.tool_streaming = tool_streaming;
        self
    }

    /// Says what the model can handle.
    #[must_use]
    pub fn profile(mut self, profile: ModelProfile) -> Self {
        self.profile = profile;
        self
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("provider", &self.provider)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("max_tokens_field", &self.max_tokens_field)
            .field("limits", &self.limits)
            .field("tool_streaming", &self.tool_streaming)
            .field("profile", &self.profile)
            .finish()
    }
}

/// A [`Model`] backed by an OpenAI-compatible chat completions endpoint.
#[derive(Clone, Debug)]
pub struct OpenAiCompatible {
    config: OpenAiConfig,
    info: ModelInfo,
    url: String,
    headers: HeaderMap,
    client: Client,
}

impl OpenAiCompatible {
    /// Validates the configuration and builds the provider's one HTTP client.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let base = http::base_url(&config.base_url)?;
        let url = format!("{base}/chat/completions");
        let mut headers = http::header_map(&config.headers)?;
        if let Some(key) = &config.api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ModelError::new(
                    ModelErrorKind::Config,
                    "the API key is not a valid header value",
                )
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        let client = http::client(&config.limits)?;
        let info = ModelInfo::new(OPENAI_COMPLETIONS_API, &config.provider, &config.model);
        Ok(Self {
            config,
            info,
            url,
            headers,
            client,
        })
    }

    /// The configuration this provider was built from.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }
}

#[async_trait]
impl Model for OpenAiCompatible {
    fn describe(&self) -> ModelInfo {
        self.info.clone()
    }

    fn profile(&self) -> ModelProfile {
        self.config.profile
    }

    async fn stream(
        &self,
        context: ModelContext,
        options: ModelOptions,
        cancel: CancellationToken,
    ) -> Result<AssistantStream, ModelError> {
        let whole = self.config.tool_streaming == ToolStreaming::NonStreamingReplay
            && !context.tools.is_empty()
            && options.tool_choice != ToolChoice::None;
        let body = request::body(
            &self.info,
            &context,
            &options,
            &self.config.max_tokens_field,
            !whole,
        );
        let accept = if whole {
            "application/json"
        } else {
            "text/event-stream"
        };
        let request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header("accept", accept)
            .json(&body);
        let response = http::send(request, &cancel).await?;
        let builder = MessageBuilder::new(&self.info);
        if whole {
            return whole::replay(
                response,
                builder,
                &cancel,
                self.config.limits.max_event_bytes,
            )
            .await;
        }
        sse::start(
            response,
            decode::OpenAiDecoder::default(),
            builder,
            cancel,
            self.config.limits.max_event_bytes,
        )
        .await
    }
}
