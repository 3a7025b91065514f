//! The streaming events of one assistant message, named as pi-ai names them.

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use shiitake_protocol::message::{AssistantMessage, StopReason, ToolCall};

use crate::model::AssistantStream;

/// One step of a streaming assistant message.
///
/// The order is `start`, then for each content block `*_start`, `*_delta`…,
/// `*_end` (blocks do not interleave; `contentIndex` is the block's index in
/// the final message), then exactly one `done` or `error` carrying the
/// complete message. Unlike pi-ai, events do not repeat the partial message:
/// the deltas are enough to rebuild it, and the terminal event carries it whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantEvent {
    /// The provider accepted the request and the message begins.
    Start,
    /// A text block opens.
    #[serde(rename_all = "camelCase")]
    TextStart {
        /// Index of the block in the final message.
        content_index: usize,
    },
    /// More text for the open text block.
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// Index of the block.
        content_index: usize,
        /// The new text.
        delta: String,
    },
    /// The text block is complete.
    #[serde(rename_all = "camelCase")]
    TextEnd {
        /// Index of the block.
        content_index: usize,
        /// The block's whole text.
        content: String,
    },
    /// A thinking block opens.
    #[serde(rename_all = "camelCase")]
    ThinkingStart {
        /// Index of the block.
        content_index: usize,
    },
    /// More reasoning for the open thinking block.
    #[serde(rename_all = "camelCase")]
    ThinkingDelta {
        /// Index of the block.
        content_index: usize,
        /// The new reasoning text.
        delta: String,
    },
    /// The thinking block is complete (redacted blocks have empty content).
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        /// Index of the block.
        content_index: usize,
        /// The block's whole reasoning text.
        content: String,
    },
    /// A tool call opens; its name and id are known.
    #[serde(rename_all = "camelCase")]
    ToolcallStart {
        /// Index of the block.
        content_index: usize,
        /// Provider-assigned call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// Another piece of the tool call's JSON arguments.
    #[serde(rename_all = "camelCase")]
    ToolcallDelta {
        /// Index of the block.
        content_index: usize,
        /// Raw JSON text, not necessarily valid on its own.
        delta: String,
    },
    /// The tool call is complete and its arguments decoded.
    #[serde(rename_all = "camelCase")]
    ToolcallEnd {
        /// Index of the block.
        content_index: usize,
        /// The complete call.
        tool_call: ToolCall,
    },
    /// The message completed; `reason` is `stop`, `length` or `toolUse`.
    Done {
        /// Why it ended.
        reason: StopReason,
        /// The complete message.
        message: AssistantMessage,
    },
    /// The message failed or was aborted; `error` holds the partial content and `errorMessage`.
    Error {
        /// `error` or `aborted`.
        reason: StopReason,
        /// The partial message, with `stopReason` and `errorMessage` set.
        error: AssistantMessage,
    },
}

impl AssistantEvent {
    /// The final message when this is the terminal `done` or `error` event.
    pub fn final_message(&self) -> Option<&AssistantMessage> {
        match self {
            AssistantEvent::Done { message, .. } => Some(message),
            AssistantEvent::Error { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The wire name of the event, such as `text_delta`, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            AssistantEvent::Start => "start",
            AssistantEvent::TextStart { .. } => "text_start",
            AssistantEvent::TextDelta { .. } => "text_delta",
            AssistantEvent::TextEnd { .. } => "text_end",
            AssistantEvent::ThinkingStart { .. } => "thinking_start",
            AssistantEvent::ThinkingDelta { .. } => "thinking_delta",
            AssistantEvent::ThinkingEnd { .. } => "thinking_end",
            AssistantEvent::ToolcallStart { .. } => "toolcall_start",
            AssistantEvent::ToolcallDelta { .. } => "toolcall_delta",
            AssistantEvent::ToolcallEnd { .. } => "toolcall_end",
            AssistantEvent::Done { .. } => "done",
            AssistantEvent::Error { .. } => "error",
        }
    }
}

/// Drains a stream and returns its final message (for callers that need no progress).
///
/// A stream that ends without a terminal event breaks the [`crate::Model`]
/// contract; this returns `None` then.
pub async fn final_message(mut stream: AssistantStream) -> Option<AssistantMessage> {
    while let Some(event) = stream.next().await {
        match event {
            AssistantEvent::Done { message, .. } => return Some(message),
            AssistantEvent::Error { error, .. } => return Some(error),
            _ => {}
        }
    }
    None
}
