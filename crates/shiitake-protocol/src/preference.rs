//! The model a Session prefers for its next runs.

use serde::{Deserialize, Deserializer, Serialize};

use crate::bounded::BoundError;

/// How hard the model should think, where the provider supports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningLevel {
    /// The least reasoning the model allows.
    Minimal,
    /// Some reasoning.
    Low,
    /// The provider's default effort.
    Medium,
    /// More reasoning.
    High,
    /// The most the model offers.
    Xhigh,
}

/// A model selection string such as `openai:gpt-4o`: 1..=512 bytes, no control characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ModelSpec(String);

impl ModelSpec {
    /// Longest accepted spec, in bytes.
    pub const MAX_BYTES: usize = 512;

    /// Validates `value` as a model spec.
    pub fn new(value: impl Into<String>) -> Result<Self, BoundError> {
        let value = value.into();
        if value.trim().is_empty() {
            return Err(BoundError::Empty { what: "model spec" });
        }
        if value.len() > Self::MAX_BYTES {
            return Err(BoundError::TooLong {
                what: "model spec",
                len: value.len(),
                max: Self::MAX_BYTES,
            });
        }
        if let Some((at, found)) = value.char_indices().find(|(_, c)| c.is_control()) {
            return Err(BoundError::BadCharacter {
                what: "model spec",
                found,
                at,
            });
        }
        Ok(Self(value))
    }

    /// The spec text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ModelSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        ModelSpec::new(value).map_err(crate::bounded::refuse)
    }
}

/// The model a Session uses for its next run, persisted per Session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPreference {
    /// Which model, as a selection string (see `docs/models.md`).
    pub model: ModelSpec,
    /// Reasoning effort, when the model supports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningLevel>,
}
