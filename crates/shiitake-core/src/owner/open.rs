//! Which commands a commit leaves open, for the header's `open_from` watermark.

use std::collections::BTreeSet;

use shiitake_protocol::CommandId;

use crate::store::{CommandState, Op};

/// Commands a commit opens (`true`) or settles (`false`), in op order: the last word wins.
pub(super) struct OpenChange(Vec<(CommandId, bool)>);

impl OpenChange {
    pub(super) fn of(ops: &[Op]) -> Self {
        let changes = ops.iter().filter_map(|op| match op {
            Op::InsertCommand { command, .. } => {
                (command.state != CommandState::Settled).then(|| (command.id.clone(), true))
            }
            Op::SetCommandState {
                command_id, state, ..
            } => Some((command_id.clone(), *state != CommandState::Settled)),
            _ => None,
        });
        Self(changes.collect())
    }

    /// The lowest open command id once this change is applied to `open`, without copying it.
    pub(super) fn first_open(&self, open: &BTreeSet<CommandId>) -> Option<CommandId> {
        let kept = open.iter().find(|id| self.last(id) != Some(false));
        let opened = self
            .0
            .iter()
            .filter(|(id, _)| self.last(id) == Some(true))
            .map(|(id, _)| id)
            .min();
        kept.into_iter().chain(opened).min().cloned()
    }

    pub(super) fn apply(self, open: &mut BTreeSet<CommandId>) {
        for (id, opened) in self.0 {
            if opened {
                open.insert(id);
            } else {
                open.remove(&id);
            }
        }
    }

    /// Whether `id` is open after this commit, if the commit says.
    fn last(&self, id: &CommandId) -> Option<bool> {
        self.0
            .iter()
            .rev()
            .find(|(changed, _)| changed == id)
            .map(|(_, open)| *open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: u8) -> CommandId {
        CommandId::new(format!("cmd_{n:03}")).unwrap()
    }

    proptest! {
        /// The watermark written with a commit is the first open id after it, whatever
        /// the commit opens and settles and in whatever order.
        #[test]
        fn first_open_is_the_lowest_open_id_after_the_commit(
            before in proptest::collection::btree_set(0u8..40, 0..12),
            changes in proptest::collection::vec((0u8..40, any::<bool>()), 0..12),
        ) {
            let mut open: BTreeSet<CommandId> = before.iter().copied().map(id).collect();
            let change = OpenChange(changes.iter().map(|&(n, o)| (id(n), o)).collect());
            let first = change.first_open(&open);
            change.apply(&mut open);
            prop_assert_eq!(first, open.first().cloned());
        }
    }
}
