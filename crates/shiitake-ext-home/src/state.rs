//! The rules of Home as plain functions over values: the attachment table, where Home
//! stands, and how a person, a run and the host's seed change the one recorded choice.

use crate::contract::{
    AttachmentId, AttachmentName, AttachmentProblem, AttachmentRule, ChoiceSource, HomeChoice,
    HomeState, SeedOutcome,
};

/// One attachment of the table, with whatever the caller carries along (a port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<T> {
    /// Its name.
    pub name: AttachmentName,
    /// Its id.
    pub attachment_id: AttachmentId,
    /// The caller's payload.
    pub value: T,
}

/// The host's attachments as a table: the host's order, with any attachment whose name or
/// id an earlier one already has left out and reported.
pub fn table<T>(attachments: Vec<Entry<T>>) -> (Vec<Entry<T>>, Vec<AttachmentProblem>) {
    let mut kept: Vec<Entry<T>> = Vec::with_capacity(attachments.len());
    let mut problems = Vec::new();
    for entry in attachments {
        let rule = if kept.iter().any(|k| k.name == entry.name) {
            Some(AttachmentRule::DuplicateName)
        } else if kept.iter().any(|k| k.attachment_id == entry.attachment_id) {
            Some(AttachmentRule::DuplicateId)
        } else {
            None
        };
        match rule {
            Some(problem) => problems.push(AttachmentProblem {
                name: entry.name,
                attachment_id: entry.attachment_id,
                problem,
            }),
            None => kept.push(entry),
        }
    }
    (kept, problems)
}

/// Where Home stands: the choice decides whenever there is one (attached or not); without
/// one, a sole attachment is adoptable and zero or several need a person. The order of the
/// table never matters.
pub fn resolve<T>(choice: Option<&HomeChoice>, table: &[Entry<T>]) -> HomeState {
    match choice {
        Some(choice) => match table
            .iter()
            .find(|entry| entry.attachment_id == choice.attachment_id)
        {
            Some(entry) => HomeState::Chosen {
                attachment_id: entry.attachment_id.clone(),
                name: entry.name.clone(),
            },
            None => HomeState::Detached {
                attachment_id: choice.attachment_id.clone(),
            },
        },
        None => match table {
            [sole] => HomeState::Adoptable {
                attachment_id: sole.attachment_id.clone(),
                name: sole.name.clone(),
            },
            _ => HomeState::Unchosen {
                attached: table.len(),
            },
        },
    }
}

/// A person's choice: always recorded, replacing any other.
pub fn choose(attachment_id: AttachmentId, now: u64) -> HomeChoice {
    HomeChoice {
        attachment_id,
        by: ChoiceSource::Person,
        at: now,
    }
}

/// A run's adoption of the sole attachment it captured: recorded only when there is still
/// no choice (a person may have chosen while the run went on).
pub fn adopt(
    current: Option<&HomeChoice>,
    attachment_id: AttachmentId,
    now: u64,
) -> Option<HomeChoice> {
    match current {
        Some(_) => None,
        None => Some(HomeChoice {
            attachment_id,
            by: ChoiceSource::Adopted,
            at: now,
        }),
    }
}

/// The host's seed: recorded only when there is no choice, whether or not the attachment
/// is attached; any existing choice is kept.
pub fn seed(current: Option<HomeChoice>, attachment_id: AttachmentId, now: u64) -> SeedOutcome {
    match current {
        Some(choice) => SeedOutcome::Kept { choice },
        None => SeedOutcome::Recorded {
            choice: HomeChoice {
                attachment_id,
                by: ChoiceSource::Seed,
                at: now,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(name: &str, id: &str) -> Entry<()> {
        Entry {
            name: AttachmentName::new(name).unwrap(),
            attachment_id: AttachmentId::new(id).unwrap(),
            value: (),
        }
    }

    fn id(text: &str) -> AttachmentId {
        AttachmentId::new(text).unwrap()
    }

    #[test]
    fn duplicates_are_left_out_and_the_first_stays() {
        let (kept, problems) = table(vec![
            entry("a", "1"),
            entry("a", "2"),
            entry("b", "1"),
            entry("c", "3"),
        ]);
        assert_eq!(kept, vec![entry("a", "1"), entry("c", "3")]);
        let rules: Vec<_> = problems.iter().map(|p| p.problem).collect();
        assert_eq!(
            rules,
            [AttachmentRule::DuplicateName, AttachmentRule::DuplicateId]
        );
    }

    #[test]
    fn selection_sole_none_several_chosen_detached() {
        let one = [entry("a", "1")];
        let two = [entry("a", "1"), entry("b", "2")];
        assert_eq!(
            resolve(None, &one),
            HomeState::Adoptable {
                attachment_id: id("1"),
                name: AttachmentName::new("a").unwrap()
            }
        );
        assert_eq!(
            resolve::<()>(None, &[]),
            HomeState::Unchosen { attached: 0 }
        );
        assert_eq!(resolve(None, &two), HomeState::Unchosen { attached: 2 });
        let chosen = choose(id("2"), 7);
        assert_eq!(
            resolve(Some(&chosen), &two),
            HomeState::Chosen {
                attachment_id: id("2"),
                name: AttachmentName::new("b").unwrap()
            }
        );
        assert_eq!(
            resolve(Some(&chosen), &one),
            HomeState::Detached {
                attachment_id: id("2")
            },
            "a choice stays when its attachment leaves, even beside a sole other one"
        );
    }

    #[test]
    fn seed_records_only_without_a_choice() {
        let recorded = seed(None, id("old"), 1);
        assert_eq!(
            recorded,
            SeedOutcome::Recorded {
                choice: HomeChoice {
                    attachment_id: id("old"),
                    by: ChoiceSource::Seed,
                    at: 1
                }
            }
        );
        let person = choose(id("new"), 2);
        assert_eq!(
            seed(Some(person.clone()), id("old"), 3),
            SeedOutcome::Kept { choice: person }
        );
        assert_eq!(adopt(Some(&choose(id("x"), 0)), id("y"), 1), None);
    }

    /// One change to Home's world.
    #[derive(Clone, Debug)]
    enum Op {
        Choose(u8),
        Seed(u8),
        Adopt,
        Attach(u8),
        Detach(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..4).prop_map(Op::Choose),
            (0u8..4).prop_map(Op::Seed),
            Just(Op::Adopt),
            (0u8..4).prop_map(Op::Attach),
            (0u8..4).prop_map(Op::Detach),
        ]
    }

    proptest! {
        /// Reordering the attachments never changes where Home stands.
        #[test]
        fn reordering_never_changes_home(
            ids in proptest::collection::btree_set(0u8..16, 0..6),
            chosen in proptest::option::of(0u8..16),
            seed_value in any::<u64>(),
        ) {
            let entries: Vec<_> = ids.iter().map(|i| entry(&format!("n{i}"), &format!("{i}"))).collect();
            let choice = chosen.map(|c| choose(id(&c.to_string()), 0));
            let mut shuffled = entries.clone();
            // A deterministic shuffle from the seed.
            let len = shuffled.len();
            if len > 1 {
                let mut state = seed_value;
                for i in (1..len).rev() {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let j = usize::try_from(state >> 33).unwrap() % (i + 1);
                    shuffled.swap(i, j);
                }
            }
            prop_assert_eq!(resolve(choice.as_ref(), &entries), resolve(choice.as_ref(), &shuffled));
        }

        /// Over any sequence of changes: a person's choice is never overwritten by a seed or a
        /// run; a seed or adoption is recorded only when there was no choice; a choice never
        /// disappears; and Home is usable exactly when the choice is attached (or, with none,
        /// when there is a sole attachment).
        #[test]
        fn the_choice_machine_keeps_its_promises(ops in proptest::collection::vec(op(), 0..40)) {
            let mut attached: Vec<u8> = Vec::new();
            let mut choice: Option<HomeChoice> = None;
            for (now, op) in ops.into_iter().enumerate() {
                let now = now as u64;
                let before = choice.clone();
                let table: Vec<_> = attached.iter().map(|i| entry(&format!("n{i}"), &format!("{i}"))).collect();
                match op {
                    Op::Choose(i) => choice = Some(choose(id(&i.to_string()), now)),
                    Op::Seed(i) => match seed(choice.clone(), id(&i.to_string()), now) {
                        SeedOutcome::Recorded { choice: new } => {
                            prop_assert!(before.is_none());
                            choice = Some(new);
                        }
                        SeedOutcome::Kept { choice: kept } => prop_assert_eq!(Some(kept), before.clone()),
                    },
                    Op::Adopt => {
                        if let HomeState::Adoptable { attachment_id, .. } = resolve(choice.as_ref(), &table) {
                            let adopted = adopt(choice.as_ref(), attachment_id, now);
                            prop_assert!(adopted.is_some());
                            choice = adopted;
                        }
                    }
                    Op::Attach(i) => if !attached.contains(&i) { attached.push(i) },
                    Op::Detach(i) => attached.retain(|a| *a != i),
                }
                if let Some(before) = &before {
                    prop_assert!(choice.is_some(), "a choice never disappears");
                    if before.by == ChoiceSource::Person && !matches!(choice.as_ref().map(|c| c.by), Some(ChoiceSource::Person)) {
                        prop_assert!(false, "a person's choice was overwritten");
                    }
                }
                let table: Vec<_> = attached.iter().map(|i| entry(&format!("n{i}"), &format!("{i}"))).collect();
                let usable = matches!(resolve(choice.as_ref(), &table), HomeState::Chosen { .. } | HomeState::Adoptable { .. });
                let expected = match &choice {
                    Some(c) => table.iter().any(|e| e.attachment_id == c.attachment_id),
                    None => table.len() == 1,
                };
                prop_assert_eq!(usable, expected);
            }
        }
    }
}
