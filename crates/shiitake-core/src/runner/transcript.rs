//! What the model reads: the selected lineage, possibly behind a compaction summary.

use shiitake_protocol::EntryId;
use shiitake_protocol::message::{Message, UserMessage};

use crate::clock::now_ms;

/// The lineage of a run with the entry id of every message.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    entries: Vec<(EntryId, Message)>,
    /// The summary the model reads instead of `entries[..first_kept]`.
    summary: Option<(String, usize)>,
}

impl Transcript {
    /// A transcript of these entries, root first.
    pub(crate) fn new(entries: Vec<(EntryId, Message)>) -> Self {
        Self {
            entries,
            summary: None,
        }
    }

    /// Applies a stored compaction whose first kept entry is on this lineage.
    pub(crate) fn summarised_before(&mut self, first_kept: &EntryId, summary: String) -> bool {
        match self.entries.iter().position(|(id, _)| id == first_kept) {
            Some(index) => {
                self.summary = Some((summary, index));
                true
            }
            None => false,
        }
    }

    /// Appends a committed message.
    pub(crate) fn push(&mut self, id: EntryId, message: Message) {
        self.entries.push((id, message));
    }

    /// Every message of the lineage, root first (recovery reads the whole tail).
    pub(crate) fn messages(&self) -> Vec<Message> {
        self.entries
            .iter()
            .map(|(_, message)| message.clone())
            .collect()
    }

    /// Index of the first entry the model reads.
    pub(crate) fn first_read(&self) -> usize {
        self.summary.as_ref().map_or(0, |(_, index)| *index)
    }

    /// The entries the model reads, after any summary.
    pub(crate) fn read_entries(&self) -> &[(EntryId, Message)] {
        &self.entries[self.first_read()..]
    }

    /// The current summary, if any.
    pub(crate) fn summary(&self) -> Option<&str> {
        self.summary.as_ref().map(|(summary, _)| summary.as_str())
    }

    /// The model's context: the summary as a user message, then the entries after it.
    pub(crate) fn context(&self) -> Vec<Message> {
        let mut messages = Vec::with_capacity(self.entries.len() + 1);
        if let Some((summary, _)) = &self.summary {
            messages.push(summary_message(summary));
        }
        messages.extend(
            self.read_entries()
                .iter()
                .map(|(_, message)| message.clone()),
        );
        messages
    }
}

/// How a summary enters the model's context.
pub(crate) fn summary_message(summary: &str) -> Message {
    Message::User(UserMessage::text(
        format!("Summary of the earlier conversation:\n\n{summary}"),
        now_ms(),
    ))
}
