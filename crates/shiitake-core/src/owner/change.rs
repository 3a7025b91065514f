//! One change of a Session, put together and then committed by its owner in one go.
//!
//! Every change follows the same sequence: a copy of the header with its activity
//! stamped, rows that each take the next sequence of the Session, one commit with
//! the header, and only then the refreshed activity and one published update. The
//! builder holds the rows; [`Owner::commit_change`] and [`Owner::publish_committed`]
//! are the sequence written once.

use shiitake_protocol::message::Message;
use shiitake_protocol::{CommandId, EntryId, ShiitakeError, TerminalOutcome};

use super::Owner;
use super::record::take;
use crate::store::{
    CommandState, Op, SessionHeader, StoreError, StoredCommand, StoredEntry, StoredTerminal,
};

/// Rows of one change of one Session, not yet committed.
pub(super) struct Change {
    /// The header the change commits; rows take their sequences from it.
    pub(super) header: SessionHeader,
    /// Every row the commit writes, in order (the header is added at commit).
    pub(super) ops: Vec<Op>,
    /// Where the entries are in `ops`. They are copied out for the frame only at commit,
    /// into a vector of their own count: a `StoredEntry` is about 500 bytes, and a
    /// vector grown one push at a time holds four, past what glibc's per-thread cache
    /// keeps (docs/benchmarks.md, "CPU per committed message").
    entries: Vec<usize>,
    terminals: Vec<StoredTerminal>,
}

/// What a committed change publishes.
pub(super) struct Committed {
    pub(super) entries: Vec<StoredEntry>,
    pub(super) terminals: Vec<StoredTerminal>,
}

impl Change {
    /// Appends a lineage entry under `id` after the current leaf, and moves the leaf to
    /// it; returns the sequence it takes.
    pub(super) fn entry_with_id(
        &mut self,
        id: EntryId,
        command_id: Option<CommandId>,
        message: Message,
    ) -> u64 {
        let sequence = take(&mut self.header);
        let entry = StoredEntry {
            id,
            parent: self.header.leaf.clone(),
            sequence,
            command_id,
            message,
        };
        self.header.leaf = Some(entry.id.clone());
        self.entries.push(self.ops.len());
        self.ops.push(Op::InsertEntry {
            session_id: self.header.id.clone(),
            entry,
        });
        sequence
    }

    /// Appends a lineage entry under a new id.
    pub(super) fn entry(&mut self, command_id: Option<CommandId>, message: Message) -> u64 {
        self.entry_with_id(crate::ids::entry_id(), command_id, message)
    }

    /// Copies of the entries this change appends, in order.
    fn entries(&self) -> Vec<StoredEntry> {
        let mut entries = Vec::with_capacity(self.entries.len());
        for &index in &self.entries {
            if let Some(Op::InsertEntry { entry, .. }) = self.ops.get(index) {
                entries.push(entry.clone());
            }
        }
        entries
    }

    /// Takes the next sequence of the Session for a row the caller builds.
    pub(super) fn sequence(&mut self) -> u64 {
        take(&mut self.header)
    }

    /// Records an accepted command.
    pub(super) fn command(&mut self, command: StoredCommand) {
        self.ops.push(Op::InsertCommand {
            session_id: self.header.id.clone(),
            command,
        });
    }

    /// Moves a command to `state` (joined to the run `run_id`, for a steer).
    pub(super) fn command_state(
        &mut self,
        command_id: &CommandId,
        state: CommandState,
        run_id: Option<CommandId>,
    ) {
        self.ops.push(Op::SetCommandState {
            session_id: self.header.id.clone(),
            command_id: command_id.clone(),
            state,
            run_id,
        });
    }

    /// Settles a command with a terminal anchored at the current leaf.
    pub(super) fn terminal(
        &mut self,
        command_id: &CommandId,
        outcome: TerminalOutcome,
        diagnostic: Option<String>,
    ) {
        self.command_state(command_id, CommandState::Settled, None);
        let terminal = StoredTerminal {
            command_id: command_id.clone(),
            outcome,
            sequence: take(&mut self.header),
            diagnostic,
            anchor: self.header.leaf.clone(),
        };
        self.ops.push(Op::InsertTerminal {
            session_id: self.header.id.clone(),
            terminal: terminal.clone(),
        });
        self.terminals.push(terminal);
    }
}

impl Owner {
    /// Starts a change of this Session: a copy of its header with the activity stamped.
    pub(super) fn change(&self) -> Change {
        Change {
            header: self.next_header(),
            ops: Vec::new(),
            entries: Vec::new(),
            terminals: Vec::new(),
        }
    }

    /// Commits the change with its header; nothing is published yet.
    pub(super) async fn commit_change(
        &mut self,
        change: Change,
    ) -> Result<Committed, ShiitakeError> {
        Ok(self.commit_change_raw(change).await?)
    }

    /// [`commit_change`](Self::commit_change), keeping the store's error for callers
    /// that inspect it (a reused request id).
    pub(super) async fn commit_change_raw(
        &mut self,
        change: Change,
    ) -> Result<Committed, StoreError> {
        let entries = change.entries();
        self.commit_raw(change.ops, change.header).await?;
        self.work.extend_transcript(&entries);
        Ok(Committed {
            entries,
            terminals: change.terminals,
        })
    }

    /// Refreshes the activity and publishes one update with what was committed.
    pub(super) fn publish_committed(&mut self, committed: Committed) {
        self.refresh_activity();
        self.publish_changes(committed.entries, committed.terminals);
    }
}
