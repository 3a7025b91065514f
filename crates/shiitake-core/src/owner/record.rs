//! The Session as committed: its header and the commands still open.
//!
//! Both change only through [`Record::seal`] and [`Record::adopt`], around a commit,
//! so the header's `open_from` is always the lowest id of the open commands and the
//! header in memory is always the one last committed.

use std::collections::BTreeSet;

use shiitake_protocol::{CommandId, Cursor, SessionId};

use super::open::OpenChange;
use crate::clock::now_ms;
use crate::cursor::Position;
use crate::store::{Op, SessionHeader};

/// The committed header and open commands of one Session.
pub(super) struct Record {
    header: SessionHeader,
    /// Every command not yet settled, as committed: `header.open_from` is its first.
    open: BTreeSet<CommandId>,
}

/// A header ready to commit with its ops, and how the commit changes the open commands.
pub(super) struct Sealed {
    header: SessionHeader,
    change: OpenChange,
}

impl Record {
    /// The record of a loaded Session; `open` holds every command it loaded open
    /// (even one that does not decode: the watermark must not pass it).
    pub(super) fn new(header: SessionHeader, open: impl IntoIterator<Item = CommandId>) -> Self {
        Self {
            header,
            open: open.into_iter().collect(),
        }
    }

    /// The header as last committed.
    pub(super) fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The Session.
    pub(super) fn id(&self) -> &SessionId {
        &self.header.id
    }

    /// A copy of the header with its activity stamped, for the next change; rows take
    /// their sequences from it with [`take`].
    pub(super) fn next_header(&self) -> SessionHeader {
        let mut header = self.header.clone();
        header.last_activity_at = now_ms();
        header
    }

    /// Completes `ops` with `header`, its watermark set to what the commit leaves
    /// open; nothing changes here until [`adopt`](Self::adopt).
    pub(super) fn seal(&self, ops: &mut Vec<Op>, mut header: SessionHeader) -> Sealed {
        let change = OpenChange::of(ops);
        header.open_from = change.first_open(&self.open);
        ops.push(Op::PutHeader(header.clone()));
        Sealed { header, change }
    }

    /// Takes what a sealed commit wrote, once it is committed.
    pub(super) fn adopt(&mut self, sealed: Sealed) {
        self.header = sealed.header;
        sealed.change.apply(&mut self.open);
    }

    /// The position of the Session's head in its order.
    pub(super) fn position(&self) -> Position {
        Position {
            epoch: self.header.epoch,
            sequence: self.header.head_sequence,
        }
    }

    /// The cursor of the head; `None` before the first commit.
    pub(super) fn cursor(&self) -> Option<Cursor> {
        (self.header.head_sequence > 0).then(|| self.position().encode())
    }
}

/// Takes the next sequence of the Session for one committed change.
pub(super) fn take(header: &mut SessionHeader) -> u64 {
    header.head_sequence += 1;
    header.head_sequence
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use shiitake_protocol::SessionId;

    use super::*;
    use crate::store::CommandState;

    fn id(n: u8) -> CommandId {
        CommandId::new(format!("cmd_{n:03}")).unwrap()
    }

    fn state_op(n: u8, open: bool) -> Op {
        Op::SetCommandState {
            session_id: SessionId::new("ses_1").unwrap(),
            command_id: id(n),
            state: if open {
                CommandState::Running
            } else {
                CommandState::Settled
            },
            run_id: None,
        }
    }

    proptest! {
        /// Over any run of commits, the header in memory carries the watermark of the
        /// commands left open, and the commit wrote exactly that header last.
        #[test]
        fn the_watermark_follows_every_commit(
            commits in proptest::collection::vec(
                proptest::collection::vec((0u8..20, any::<bool>()), 0..6),
                1..8,
            ),
        ) {
            let header = SessionHeader::new(SessionId::new("ses_1").unwrap(), 0);
            let mut record = Record::new(header, []);
            let mut open = BTreeSet::new();
            for commit in commits {
                let mut ops: Vec<Op> = commit.iter().map(|&(n, o)| state_op(n, o)).collect();
                for &(n, o) in &commit {
                    if o { open.insert(id(n)); } else { open.remove(&id(n)); }
                }
                let next = record.next_header();
                let sealed = record.seal(&mut ops, next);
                let written = match ops.last() {
                    Some(Op::PutHeader(header)) => header.clone(),
                    other => panic!("the header is not last: {other:?}"),
                };
                record.adopt(sealed);
                prop_assert_eq!(&written, record.header());
                prop_assert_eq!(record.header().open_from.clone(), open.first().cloned());
            }
        }
    }
}
