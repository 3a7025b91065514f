//! The owner's side of observation: snapshots, replay after a cursor, publication.
//!
//! All three run inside the owner's turn, between commits, so a snapshot or a
//! replay and the live receiver handed out with it meet at exactly one point of
//! the Session's order: no gap, no duplicate.

use std::collections::HashSet;
use std::sync::Arc;

use shiitake_protocol::{
    FrameDelivery, PageLimit, ReadOptions, ResetFrame, ResetReason, SandboxFailureEvent,
    SessionCompactionMarker, SessionFrame, SessionMessage, SessionPendingPrompts, SessionSnapshot,
    SessionTerminal, ShiitakeError, SubscribeOptions, UpdateFrame,
};
use tokio::sync::broadcast;

use super::{Owner, Published};
use crate::cursor::Position;
use crate::store::{StoredCompaction, StoredEntry, StoredSandboxFailure, StoredTerminal};

/// Most entries replayed after a cursor; an older cursor gets a reset instead.
pub(crate) const REPLAY_LIMIT: usize = 1000;

pub(crate) fn to_message(entry: StoredEntry) -> SessionMessage {
    SessionMessage {
        id: entry.id,
        sequence: entry.sequence,
        command_id: entry.command_id,
        value: entry.message,
    }
}

pub(crate) fn to_terminal(terminal: StoredTerminal) -> SessionTerminal {
    SessionTerminal {
        command_id: terminal.command_id,
        outcome: terminal.outcome,
        sequence: terminal.sequence,
        diagnostic: terminal.diagnostic,
    }
}

/// Rows committed by one change, for its update frame.
#[derive(Default)]
pub(crate) struct Changes {
    pub(crate) entries: Vec<StoredEntry>,
    pub(crate) terminals: Vec<StoredTerminal>,
    pub(crate) compactions: Vec<StoredCompaction>,
    pub(crate) sandbox_failures: Vec<StoredSandboxFailure>,
}

fn to_marker(compaction: StoredCompaction) -> SessionCompactionMarker {
    SessionCompactionMarker {
        id: compaction.id,
        sequence: compaction.precedes_sequence,
        at: compaction.at,
    }
}

/// Markers as the wire carries them: absent when there are none.
fn markers(compactions: Vec<StoredCompaction>) -> Option<Vec<SessionCompactionMarker>> {
    (!compactions.is_empty()).then(|| compactions.into_iter().map(to_marker).collect())
}

fn to_failure(failure: StoredSandboxFailure) -> SandboxFailureEvent {
    SandboxFailureEvent {
        id: failure.id,
        sequence: failure.sequence,
        at: failure.at,
        capability: failure.capability,
        message: failure.message,
    }
}

impl Owner {
    fn pending_view(&self) -> SessionPendingPrompts {
        self.queue.view(self.deps.config.pending_view_limit)
    }

    /// Publishes one live update carrying these newly committed rows and the state now.
    pub(super) fn publish_changes(
        &self,
        entries: Vec<StoredEntry>,
        terminals: Vec<StoredTerminal>,
    ) {
        self.publish_update(Changes {
            entries,
            terminals,
            ..Changes::default()
        });
    }

    /// Publishes one live update; sandbox failures are dropped for subscribers that did not ask.
    pub(super) fn publish_update(&self, changes: Changes) {
        if !self.publication.watched() {
            return;
        }
        let (extensions, footer) = self.extension_views();
        let frame = UpdateFrame {
            delivery: FrameDelivery::Live,
            cursor: self.cursor(),
            pending: self.pending_view(),
            messages: changes.entries.into_iter().map(to_message).collect(),
            terminals: changes.terminals.into_iter().map(to_terminal).collect(),
            compactions: markers(changes.compactions),
            sandbox_failures: Some(
                changes
                    .sandbox_failures
                    .into_iter()
                    .map(to_failure)
                    .collect(),
            ),
            activity: self.publication.activity().clone(),
            extensions,
            footer,
        };
        self.publication.publish(Published::Update(Arc::new(frame)));
    }

    /// A bounded snapshot of the selected lineage.
    pub(super) async fn snapshot(
        &self,
        options: &ReadOptions,
    ) -> Result<SessionSnapshot, ShiitakeError> {
        let limit = options.limit.unwrap_or(PageLimit::DEFAULT).get() as usize;
        let store = &self.deps.store;
        let header = self.record.header();
        let session_id = &header.id;
        let start = match &options.before {
            None => header.leaf.clone(),
            Some(cursor) => {
                let position = Position::decode(cursor)
                    .filter(|position| position.epoch == header.epoch)
                    .ok_or_else(|| {
                        ShiitakeError::invalid("`before` is not a cursor of this Session's lineage")
                    })?;
                let entry = store.entry_at(session_id, position.sequence).await?;
                entry.and_then(|entry| entry.parent)
            }
        };
        let mut page = match &start {
            Some(start) => store.lineage(session_id, start, limit + 1).await?,
            None => Vec::new(),
        };
        let has_more = page.len() > limit;
        page.truncate(limit);
        page.reverse();
        let on_page: HashSet<_> = page.iter().map(|entry| entry.id.clone()).collect();
        let lower = match page.first().and_then(|oldest| oldest.parent.clone()) {
            Some(parent) => store
                .entry(session_id, &parent)
                .await?
                .map_or(0, |p| p.sequence),
            None => 0,
        };
        let upper = match &options.before {
            Some(cursor) => Position::decode(cursor).map_or(0, |p| p.sequence),
            None => header.head_sequence,
        };
        let terminals = store
            .terminals_between(session_id, lower, upper, limit * 2 + 16)
            .await?
            .into_iter()
            .filter(|terminal| match &terminal.anchor {
                Some(anchor) => on_page.contains(anchor),
                None => !has_more,
            })
            .map(to_terminal)
            .collect();
        let oldest_cursor = page.first().map(|oldest| {
            Some(
                Position {
                    epoch: header.epoch,
                    sequence: oldest.sequence,
                }
                .encode(),
            )
        });
        let compactions: Vec<StoredCompaction> = store
            .compactions(session_id)
            .await?
            .into_iter()
            .filter(|compaction| on_page.contains(&compaction.first_kept))
            .collect();
        let include_failures = options.include_sandbox_failures.unwrap_or(false);
        let sandbox_failures = if include_failures {
            let failures = store
                .sandbox_failures_between(session_id, lower, upper, limit * 2 + 16)
                .await?;
            Some(failures.into_iter().map(to_failure).collect())
        } else {
            None
        };
        let (extensions, footer) = self.extension_views();
        Ok(SessionSnapshot {
            session_id: session_id.clone(),
            cursor: self.cursor(),
            has_more,
            oldest_cursor: Some(oldest_cursor.flatten()),
            messages: page.into_iter().map(to_message).collect(),
            terminals,
            compactions: markers(compactions),
            sandbox_failures,
            pending: self.pending_view(),
            activity: self.publication.activity().clone(),
            progress: self.publication.progress().cloned(),
            extensions,
            footer,
        })
    }

    /// Frames strictly after `options.after`, plus the live receiver that follows them.
    pub(super) async fn subscribe(
        &mut self,
        options: &SubscribeOptions,
    ) -> Result<(Vec<SessionFrame>, broadcast::Receiver<Published>), ShiitakeError> {
        let receiver = self.publication.receiver();
        let Some(after) = &options.after else {
            return Ok((Vec::new(), receiver));
        };
        let head = self.record.position();
        let decoded = Position::decode(after);
        let position = decoded
            .filter(|position| position.epoch == head.epoch && position.sequence <= head.sequence);
        let Some(position) = position else {
            if decoded.is_some() && self.behind_the_store().await? {
                // The caller saw commits this owner has not: it must not be sent back to
                // an older cursor. The owner stops (another process owns the Session) or
                // reads the Session back; the caller asks again.
                return Err(ShiitakeError::unavailable(
                    "this owner's view of the Session is behind the store; try again",
                ));
            }
            return Ok((vec![self.reset_frame(options).await?], receiver));
        };
        if position.sequence == head.sequence {
            return Ok((Vec::new(), receiver));
        }
        let store = &self.deps.store;
        let session_id = self.record.id();
        let mut entries = store
            .entries_after(session_id, position.sequence, REPLAY_LIMIT + 1)
            .await?;
        // Only what this owner's view holds: on a shared store another process may
        // have committed past it (this owner is stale, and learns so at its next
        // commit), and a frame must not carry entries past its cursor, or the next
        // replay from that cursor repeats them. Entries come in order, so whatever is
        // cut here lies past the limit's count.
        entries.retain(|entry| entry.sequence <= head.sequence);
        if entries.len() > REPLAY_LIMIT {
            return Ok((vec![self.reset_frame(options).await?], receiver));
        }
        let (after, head) = (position.sequence, head.sequence);
        let terminals = store
            .terminals_between(session_id, after, head, REPLAY_LIMIT)
            .await?;
        let compactions: Vec<StoredCompaction> = store
            .compactions(session_id)
            .await?
            .into_iter()
            .filter(|compaction| (after + 1..=head).contains(&compaction.commit_sequence))
            .collect();
        let sandbox_failures = if options.include_sandbox_failures.unwrap_or(false) {
            let failures = store
                .sandbox_failures_between(session_id, after, head, REPLAY_LIMIT)
                .await?;
            Some(failures.into_iter().map(to_failure).collect())
        } else {
            None
        };
        let (extensions, footer) = self.extension_views();
        let frame = UpdateFrame {
            delivery: FrameDelivery::Replay,
            cursor: self.cursor(),
            pending: self.pending_view(),
            messages: entries.into_iter().map(to_message).collect(),
            terminals: terminals.into_iter().map(to_terminal).collect(),
            compactions: markers(compactions),
            sandbox_failures,
            activity: self.publication.activity().clone(),
            extensions,
            footer,
        };
        Ok((vec![SessionFrame::Update(frame)], receiver))
    }

    /// Whether the store holds commits this owner has not seen (its header there is at
    /// another position); if so the tenure is told, so the owner stops or reads back.
    async fn behind_the_store(&mut self) -> Result<bool, ShiitakeError> {
        let stored = self.deps.store.load_session(self.record.id()).await?;
        let Some(stored) = stored else {
            return Ok(false);
        };
        let stored = Position {
            epoch: stored.header.epoch,
            sequence: stored.header.head_sequence,
        };
        if stored == self.record.position() {
            return Ok(false);
        }
        tracing::warn!(session = %self.record.id(), "a caller's cursor is past this owner's view, and the store is ahead of it");
        self.tenure.behind_the_store();
        Ok(true)
    }

    async fn reset_frame(&self, options: &SubscribeOptions) -> Result<SessionFrame, ShiitakeError> {
        let read = ReadOptions {
            include_sandbox_failures: options.include_sandbox_failures,
            ..ReadOptions::default()
        };
        let baseline = self.snapshot(&read).await?;
        Ok(SessionFrame::Reset(Box::new(ResetFrame {
            reason: ResetReason::HistoryUnavailable,
            cursor: baseline.cursor.clone(),
            baseline,
        })))
    }
}
