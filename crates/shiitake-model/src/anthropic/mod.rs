//! The Anthropic Messages provider.
//!
//! `POST {base_url}/v1/messages` with `stream: true`, `x-api-key` and
//! `anthropic-version`. Text, thinking (signed, and redacted thinking kept as
//! an opaque signature), tool use with `input_json_delta` pieces, usage with
//! cache reads and writes, and `stop_reason` mapped to the Pi stop reason.

mod decode;
mod request;

use async_trait::async_trait;
use reqwest::Client;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::builder::MessageBuilder;
use crate::error::{ModelError, ModelErrorKind};
use crate::http::{self, HttpLimits};
use crate::model::{AssistantStream, Model, ModelContext, ModelInfo, ModelOptions};
use crate::profile::ModelProfile;
use crate::sse;

/// The `api` name this provider stamps on messages.
pub const ANTHROPIC_MESSAGES_API: &str = "anthropic-messages";

/// The `anthropic-version` header value sent by default.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Where and how to reach the Anthropic Messages API.
#[derive(Clone, PartialEq)]
pub struct AnthropicConfig {
    /// Base URL without `/v1`, such as `https://api.anthropic.com`.
    pub base_url: String,
    /// The model id, such as `claude-sonnet-4-5`.
    pub model: String,
    /// Sent as `x-api-key`.
    pub api_key: String,
    /// Sent as `anthropic-version`.
    pub version: String,
    /// Extra headers on every request (`anthropic-beta`, proxies' keys).
    pub headers: Vec<(String, String)>,
    /// Timeouts and size bounds.
    pub limits: HttpLimits,
    /// What the model can handle (`?profile=small` in a spec).
    pub profile: ModelProfile,
}

impl AnthropicConfig {
    /// A configuration for api.anthropic.com.
    pub fn new(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self {
            base_url: "https://api.anthropic.com".to_owned(),
            model: model.into(),
            api_key: api_key.into(),
            version: ANTHROPIC_VERSION.to_owned(),
            headers: Vec::new(),
            limits: HttpLimits::default(),
            profile: ModelProfile::Full,
        }
    }

    /// Points at another server (a proxy, a test server).
    #[must_use]
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
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

    /// Says what the model can handle.
    #[must_use]
    pub fn profile(mut self, profile: ModelProfile) -> Self {
        self.profile = profile;
        self
    }
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &"<redacted>")
            .field("version", &self.version)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("limits", &self.limits)
            .field("profile", &self.profile)
            .finish()
    }
}

/// A [`Model`] backed by the Anthropic Messages API.
#[derive(Clone, Debug)]
pub struct Anthropic {
    config: AnthropicConfig,
    info: ModelInfo,
    url: String,
    headers: HeaderMap,
    client: Client,
}

impl Anthropic {
    /// Validates the configuration and builds the provider's one HTTP client.
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let base = http::base_url(&config.base_url)?;
        let base = base.strip_suffix("/v1").unwrap_or(base);
        let url = format!("{base}/v1/messages");
        let mut headers = http::header_map(&config.headers)?;
        let config_error = |what: &str| {
            ModelError::new(
                ModelErrorKind::Config,
                format!("{what} is not a valid header value"),
            )
        };
        headers.insert(
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_str(&config.api_key).map_err(|_| config_error("the API key"))?,
        );
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_str(&config.version).map_err(|_| config_error("the version"))?,
        );
        let client = http::client(&config.limits)?;
        let info = ModelInfo::new(ANTHROPIC_MESSAGES_API, "anthropic", &config.model);
        Ok(Self {
            config,
            info,
            url,
            headers,
            client,
        })
    }

    /// The configuration this provider was built from.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }
}

#[async_trait]
impl Model for Anthropic {
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
        let body = request::body(&self.info, &context, &options);
        let request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header("accept", "text/event-stream")
            .json(&body);
        let response = http::send(request, &cancel).await?;
        let builder = MessageBuilder::new(&self.info);
        sse::start(
            response,
            decode::AnthropicDecoder::default(),
            builder,
            cancel,
            self.config.limits.max_event_bytes,
        )
        .await
    }
}
