//! Compaction: when the context would exceed its token budget, older messages
//! are summarised by the model and the summary replaces them in later contexts.
//!
//! Tokens are estimated as a quarter of the JSON size of each message (a
//! deliberate over-estimate for English; no tokenizer is assumed). The cut is
//! made just before a user message, so a tool call is never separated from its
//! result, and keeps at least the configured number of recent messages.

use std::sync::Arc;

use futures::StreamExt;
use shiitake_model::{AssistantEvent, Model, ModelContext, ModelOptions, ToolChoice};
use shiitake_protocol::ShiitakeError;
use shiitake_protocol::message::{Message, UserMessage};

use super::RunEvent;
use super::transcript::Transcript;
use super::{OwnerLink, RunStart};
use crate::clock::now_ms;

const INSTRUCTIONS: &str = "You compress conversations. Summarise the conversation you are \
     given for your own later use: keep facts, decisions, names of files and tools, results, and \
     open tasks. Be concise. Answer with the summary only.";

/// The index (into `messages`) of the first message to keep, or `None` when no safe cut exists.
pub(crate) fn cut_index(messages: &[Message], keep_recent: usize) -> Option<usize> {
    let latest_allowed = messages.len().checked_sub(keep_recent.max(1))?;
    (1..=latest_allowed)
        .rev()
        .find(|&index| matches!(messages[index], Message::User(_)))
}

/// What a compaction attempt came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compaction {
    /// The context is within budget, or there is no safe cut: nothing to do.
    NotNeeded,
    /// Older messages were summarised and the summary recorded.
    Done,
    /// The model gave no summary; the full context is sent. The run does not try
    /// again, so a model that cannot summarise costs one extra call, not one a turn.
    Failed,
}

/// Summarises and records a compaction when the context is over budget.
pub(crate) async fn maybe_compact(
    start: &RunStart,
    link: &OwnerLink,
    model: &dyn Model,
    transcript: &mut Transcript,
    system_prompt_tokens: usize,
) -> Result<Compaction, ShiitakeError> {
    let Some(policy) = &start.agent.config.compaction else {
        return Ok(Compaction::NotNeeded);
    };
    if system_prompt_tokens + transcript.tokens() <= policy.budget_tokens {
        return Ok(Compaction::NotNeeded);
    }
    let read = transcript.read_messages();
    let Some(cut) = cut_index(read, policy.keep_recent) else {
        return Ok(Compaction::NotNeeded);
    };
    let mut to_summarise = Vec::with_capacity(cut + 2);
    if let Some(previous) = transcript.summary() {
        to_summarise.push(super::transcript::summary_message(previous));
    }
    to_summarise.extend(read[..cut].iter().cloned());
    to_summarise.push(Message::User(UserMessage::text(
        "Summarise the conversation above.",
        now_ms(),
    )));
    let Some(summary) = summarise(start, model, to_summarise).await else {
        tracing::warn!(session = %start.session_id, "compaction failed; the full context is sent");
        return Ok(Compaction::Failed);
    };
    let Some((first_kept, _)) = transcript.read_entries().nth(cut) else {
        return Ok(Compaction::NotNeeded);
    };
    let first_kept = first_kept.clone();
    link.ask(|reply| RunEvent::Compacted {
        first_kept: first_kept.clone(),
        summary: summary.clone(),
        reply,
    })
    .await?;
    transcript.summarised_before(&first_kept, summary);
    Ok(Compaction::Done)
}

async fn summarise(start: &RunStart, model: &dyn Model, messages: Vec<Message>) -> Option<String> {
    let context = ModelContext {
        system_prompt: INSTRUCTIONS.to_owned(),
        messages: Arc::new(messages),
        tools: Vec::new(),
    };
    let options = ModelOptions {
        tool_choice: ToolChoice::None,
        ..ModelOptions::default()
    };
    let mut events = model
        .stream(context, options, start.cancel.clone())
        .await
        .ok()?;
    while let Some(event) = events.next().await {
        match event {
            AssistantEvent::Done { message, .. } => {
                let text = message.text();
                return (!text.trim().is_empty()).then_some(text);
            }
            AssistantEvent::Error { .. } => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(text: &str) -> Message {
        serde_json::from_value(json!({"role": "user", "content": text, "timestamp": 0})).unwrap()
    }

    fn result() -> Message {
        serde_json::from_value(
            json!({"role": "toolResult", "toolCallId": "c", "toolName": "t",
            "content": [], "isError": false, "timestamp": 0}),
        )
        .unwrap()
    }

    #[test]
    fn the_cut_lands_on_a_user_message_and_keeps_the_recent_ones() {
        let messages = [
            user("a"),
            result(),
            user("b"),
            result(),
            result(),
            user("c"),
            result(),
        ];
        assert_eq!(cut_index(&messages, 1), Some(5));
        assert_eq!(cut_index(&messages, 2), Some(5));
        assert_eq!(cut_index(&messages, 3), Some(2));
        assert_eq!(
            cut_index(&messages, 6),
            None,
            "only the first message is a cut before it"
        );
        assert_eq!(cut_index(&messages, 7), None);
        assert_eq!(cut_index(&[], 1), None);
    }
}
