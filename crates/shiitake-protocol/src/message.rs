//! The Pi transcript message: what a `SessionMessage.value` holds.
//!
//! The shapes follow the public pi-ai library exactly: messages are tagged by
//! `role`, content blocks by `type`, fields are camelCase, optional fields are
//! omitted when absent, and every struct keeps fields it does not know in an
//! `extra` map so a message written by another implementation survives a read
//! and a write unchanged.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::number::JsNumber;

/// Fields this implementation does not know, kept verbatim for a faithful re-encode.
pub type Extra = Map<String, Value>;

/// One completed transcript message.
// The assistant message is the largest and the most common; boxing it would add an
// allocation to every message of every transcript.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum Message {
    /// What a person (or an extension on their behalf) said.
    #[serde(rename = "user")]
    User(UserMessage),
    /// One complete answer of the model, possibly asking for tools.
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage),
    /// The outcome of one tool call, fed back to the model.
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage),
}

impl Message {
    /// Unix milliseconds at which the message was completed.
    pub fn timestamp(&self) -> u64 {
        match self {
            Message::User(m) => m.timestamp,
            Message::Assistant(m) => m.timestamp,
            Message::ToolResult(m) => m.timestamp,
        }
    }
}

/// A user turn: plain text or text and image blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// The text, or blocks of text and images.
    pub content: UserContent,
    /// Unix milliseconds.
    pub timestamp: u64,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}

impl UserMessage {
    /// A plain-text user message, the common case.
    pub fn text(text: impl Into<String>, timestamp: u64) -> Self {
        Self {
            content: UserContent::Text(text.into()),
            timestamp,
            extra: Extra::new(),
        }
    }
}

/// User content is either a bare string or a list of blocks; both forms occur on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    /// The bare-string form.
    Text(String),
    /// The block form.
    Blocks(Vec<InputContent>),
}

impl UserContent {
    /// The text of the content: the bare string, or its text blocks joined (images
    /// left out).
    pub fn text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Blocks(blocks) => input_text(blocks),
        }
    }
}

/// The text blocks of `blocks`, joined.
fn input_text(blocks: &[InputContent]) -> String {
    blocks
        .iter()
        .filter_map(|block| match block {
            InputContent::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect()
}

/// A block a person or a tool can send: text or an image.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum InputContent {
    /// Text.
    #[serde(rename = "text")]
    Text(TextContent),
    /// A base64 image.
    #[serde(rename = "image")]
    Image(ImageContent),
}

/// A block of an assistant message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum AssistantContent {
    /// Visible text.
    #[serde(rename = "text")]
    Text(TextContent),
    /// Reasoning the model exposed (or redacted).
    #[serde(rename = "thinking")]
    Thinking(ThinkingContent),
    /// A request to run a tool.
    #[serde(rename = "toolCall")]
    ToolCall(ToolCall),
}

/// A text block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Provider signature of the block, replayed only to the same model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_signature: Option<String>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}

impl TextContent {
    /// A text block with no signature.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            text_signature: None,
            extra: Extra::new(),
        }
    }
}

/// A thinking block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingContent {
    /// The reasoning text (empty when redacted).
    pub thinking: String,
    /// Provider signature (or the encrypted payload of redacted thinking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// True when the provider withheld the reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ThinkingContent {
    /// A plain thinking block.
    pub fn new(thinking: impl Into<String>) -> Self {
        Self {
            thinking: thinking.into(),
            thinking_signature: None,
            redacted: None,
            extra: Extra::new(),
        }
    }
}

/// An image block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64 data.
    pub data: String,
    /// Media type such as `image/png`.
    pub mime_type: String,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool call block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Provider-assigned call id; the matching result carries it as `toolCallId`.
    pub id: String,
    /// The tool name as the model called it.
    pub name: String,
    /// Decoded arguments.
    pub arguments: Map<String, Value>,
    /// Provider signature, replayed only to the same model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Why an assistant message ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The model finished its answer.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model asked for tools.
    ToolUse,
    /// The provider or transport failed; `errorMessage` says how.
    Error,
    /// The run was aborted while the message streamed.
    Aborted,
}

/// One complete assistant message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool call blocks in the order the model produced them.
    pub content: Vec<AssistantContent>,
    /// The wire API used, such as `openai-completions` or `anthropic-messages`.
    pub api: String,
    /// The provider, such as `openai`.
    pub provider: String,
    /// The model id.
    pub model: String,
    /// Token counts and cost.
    pub usage: Usage,
    /// Why the message ended.
    pub stop_reason: StopReason,
    /// Present when `stopReason` is `error` or `aborted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Unix milliseconds.
    pub timestamp: u64,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}

impl AssistantMessage {
    /// The tool calls of this message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            AssistantContent::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The visible text of this message, blocks joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|block| match block {
                AssistantContent::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// The result of one tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The `id` of the tool call this answers.
    pub tool_call_id: String,
    /// The tool name as the model called it.
    pub tool_name: String,
    /// What the model reads.
    pub content: Vec<InputContent>,
    /// Structured details for clients, never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// True when the tool failed; the content explains.
    pub is_error: bool,
    /// Unix milliseconds.
    pub timestamp: u64,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ToolResultMessage {
    /// What the model reads of the result in words: its text blocks, joined.
    pub fn text(&self) -> String {
        input_text(&self.content)
    }
}

/// Token counts and cost of one assistant message.
///
/// `source` says where the counts come from; it is omitted when the provider reported
/// them (so a Pi message from another implementation, which has no such field, reads
/// as reported), and `unknown` when the provider reported nothing: then every count is
/// zero and means nothing, rather than a false zero a budget would trust.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens not read from cache.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens read from cache.
    pub cache_read: u64,
    /// Prompt tokens written to cache.
    pub cache_write: u64,
    /// Sum of the above as the provider reports it.
    pub total_tokens: u64,
    /// Cost in dollars.
    pub cost: Cost,
    /// Where the counts come from; absent on the wire when the provider reported them.
    #[serde(default, skip_serializing_if = "UsageSource::is_reported")]
    pub source: UsageSource,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Usage {
    /// The usage of a message whose provider reported none: all zeros, marked `unknown`.
    pub fn unknown() -> Self {
        Self {
            source: UsageSource::Unknown,
            ..Self::default()
        }
    }

    /// Whether the counts mean something (reported by the provider, or estimated).
    pub fn is_known(&self) -> bool {
        self.source != UsageSource::Unknown
    }
}

/// Where the token counts of a [`Usage`] come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UsageSource {
    /// The provider counted them (the default, and what an absent field means).
    #[default]
    Reported,
    /// Shiitake estimated them (the scripted model: four characters a token).
    Estimated,
    /// The provider reported nothing; the counts are zero and mean nothing.
    Unknown,
}

impl UsageSource {
    /// True for [`UsageSource::Reported`], which the wire leaves out.
    pub fn is_reported(&self) -> bool {
        *self == UsageSource::Reported
    }
}

/// Cost in dollars, split like the token counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Dollars for input tokens.
    pub input: JsNumber,
    /// Dollars for output tokens.
    pub output: JsNumber,
    /// Dollars for cache reads.
    pub cache_read: JsNumber,
    /// Dollars for cache writes.
    pub cache_write: JsNumber,
    /// The total.
    pub total: JsNumber,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Extra,
}
