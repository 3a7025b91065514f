//! What the model reads: the selected lineage, possibly behind a compaction summary.
//!
//! A turn's cost must not grow with the history, so the transcript is kept ready
//! rather than rebuilt: the model's context is one shared vector that each commit
//! appends to (a model call takes it without copying), each message's token
//! estimate is made once, when it enters, and between runs the owner keeps the
//! transcript so the next run only reads the entries committed since.

use std::sync::Arc;

use shiitake_protocol::EntryId;
use shiitake_protocol::message::{Message, UserMessage};

use crate::clock::now_ms;

/// The lineage of a run as the model reads it, with the entry id of every message.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    /// Entry ids of the messages after the summary, root first.
    ids: Vec<EntryId>,
    /// The model's context: the summary as a user message (when there is one),
    /// then the messages of `ids`. Shared with model calls in flight.
    context: Arc<Vec<Message>>,
    /// Estimated tokens of each message of `context`, and their sum.
    tokens: Vec<usize>,
    total_tokens: usize,
    /// The summary the model reads instead of the entries before `ids`.
    summary: Option<String>,
}

impl Transcript {
    /// A transcript of these entries, root first.
    pub(crate) fn new(entries: Vec<(EntryId, Message)>) -> Self {
        let mut transcript = Self::default();
        transcript.ids.reserve(entries.len());
        transcript.tokens.reserve(entries.len());
        Arc::make_mut(&mut transcript.context).reserve(entries.len());
        for (id, message) in entries {
            transcript.push(id, message);
        }
        transcript
    }

    /// Applies a compaction whose first kept entry is on this transcript: the
    /// summary replaces every entry before `first_kept`. `false` when it is not here.
    pub(crate) fn summarised_before(&mut self, first_kept: &EntryId, summary: String) -> bool {
        let Some(index) = self.ids.iter().position(|id| id == first_kept) else {
            return false;
        };
        let skipped = usize::from(self.summary.is_some()) + index;
        let summary_message = summary_message(&summary);
        let summary_tokens = estimate_tokens(&summary_message);
        let kept = self.context.len().saturating_sub(skipped);
        let mut context = Vec::with_capacity(kept + 1);
        context.push(summary_message);
        context.extend(self.context.iter().skip(skipped).cloned());
        self.context = Arc::new(context);
        self.ids.drain(..index);
        self.tokens.drain(..skipped);
        self.tokens.insert(0, summary_tokens);
        self.total_tokens = self.tokens.iter().sum();
        self.summary = Some(summary);
        true
    }

    /// Appends a committed message.
    pub(crate) fn push(&mut self, id: EntryId, message: Message) {
        let tokens = estimate_tokens(&message);
        self.ids.push(id);
        self.tokens.push(tokens);
        self.total_tokens += tokens;
        Arc::make_mut(&mut self.context).push(message);
    }

    /// The entry id of the last message, the leaf this transcript ends at.
    pub(crate) fn last_id(&self) -> Option<&EntryId> {
        self.ids.last()
    }

    /// The messages after the summary, root first, each with its entry id.
    pub(crate) fn read_entries(&self) -> impl Iterator<Item = (&EntryId, &Message)> {
        self.ids.iter().zip(self.read_messages())
    }

    /// The messages after the summary, root first (what recovery reads: a
    /// compaction always keeps the latest prompt and everything after it).
    pub(crate) fn read_messages(&self) -> &[Message] {
        &self.context[usize::from(self.summary.is_some())..]
    }

    /// The current summary, if any.
    pub(crate) fn summary(&self) -> Option<&str> {
        self.summary.as_deref()
    }

    /// The model's context: the summary as a user message, then the entries after it.
    pub(crate) fn context(&self) -> Arc<Vec<Message>> {
        self.context.clone()
    }

    /// Estimated tokens of the model's context.
    pub(crate) fn tokens(&self) -> usize {
        self.total_tokens
    }
}

/// Estimated tokens of a message: a quarter of its JSON, counted as it is written
/// rather than kept (the store serialises the message again to pack it).
pub(crate) fn estimate_tokens(message: &Message) -> usize {
    let mut counted = Counted(0);
    match serde_json::to_writer(&mut counted, message) {
        Ok(()) => counted.0.div_ceil(4),
        Err(_) => 0,
    }
}

/// Counts the bytes written to it and keeps none.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How a summary enters the model's context.
pub(crate) fn summary_message(summary: &str) -> Message {
    Message::User(UserMessage::text(
        format!("Summary of the earlier conversation:\n\n{summary}"),
        now_ms(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: usize) -> (EntryId, Message) {
        (
            EntryId::new(format!("ent_{n:04}")).unwrap(),
            Message::User(UserMessage::text(format!("message {n}"), n as u64)),
        )
    }

    fn texts(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|message| match message {
                Message::User(user) => match &user.content {
                    shiitake_protocol::message::UserContent::Text(text) => text.clone(),
                    shiitake_protocol::message::UserContent::Blocks(_) => "blocks".into(),
                },
                _ => "other".into(),
            })
            .collect()
    }

    #[test]
    fn tokens_follow_the_context_through_pushes_and_summaries() {
        let mut transcript = Transcript::new((0..5).map(entry).collect());
        let sum = |messages: &[Message]| messages.iter().map(estimate_tokens).sum::<usize>();
        assert_eq!(transcript.tokens(), sum(&transcript.context()));
        assert!(transcript.summarised_before(&entry(3).0, "first".into()));
        assert_eq!(
            texts(&transcript.context())[1..],
            ["message 3", "message 4"]
        );
        assert_eq!(transcript.tokens(), sum(&transcript.context()));
        let (id, message) = entry(5);
        transcript.push(id, message);
        // A second summary replaces the first and the entries before its cut.
        assert!(transcript.summarised_before(&entry(4).0, "second".into()));
        let context = transcript.context();
        assert_eq!(context.len(), 3);
        assert!(texts(&context)[0].ends_with("second"));
        assert_eq!(texts(&context)[1..], ["message 4", "message 5"]);
        assert_eq!(
            texts(transcript.read_messages()),
            ["message 4", "message 5"]
        );
        assert_eq!(transcript.tokens(), sum(&context));
        assert_eq!(transcript.last_id(), Some(&entry(5).0));
        assert!(!transcript.summarised_before(&entry(1).0, "gone".into()));
    }

    #[test]
    fn a_context_held_by_a_model_call_is_not_changed_by_later_pushes() {
        let mut transcript = Transcript::new((0..2).map(entry).collect());
        let held = transcript.context();
        let (id, message) = entry(2);
        transcript.push(id, message);
        assert_eq!(held.len(), 2);
        assert_eq!(transcript.context().len(), 3);
    }

    #[test]
    fn tokens_are_a_quarter_of_the_json() {
        let message = Message::User(UserMessage::text("abcd", 0));
        let json = serde_json::to_string(&message).unwrap();
        assert_eq!(estimate_tokens(&message), json.len().div_ceil(4));
    }
}
