//! The record of accepted creates and sends, kept in the sending Session's state of
//! the `agents.*` extension. Plain functions over rows, plus the two transaction bodies.
//!
//! The record only feeds the Subagents footer and picks the Session a later send
//! continues; it grants nothing. There is nothing to prepare: the collection exists
//! once its first row is written.

use shiitake_core::extension::{HookError, StateScope, Tx};

use crate::contract::{AgentName, ChildRecord, MAX_RECORDS, RECORD_COLLECTION, Via};

/// What recording one create or send changes: rows to write and keys to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The row to write.
    pub put: ChildRecord,
    /// Rows to let go (the least recently used past [`MAX_RECORDS`]).
    pub delete: Vec<String>,
}

/// Records `new` among `rows`: a known child keeps how it was first recorded and takes
/// the new time and command; past [`MAX_RECORDS`] the least recently used go.
pub fn record(rows: &[ChildRecord], new: ChildRecord) -> Change {
    let key = new.key();
    let put = match rows.iter().find(|row| row.key() == key) {
        Some(known) => ChildRecord {
            via: known.via,
            last_command_id: new
                .last_command_id
                .or_else(|| known.last_command_id.clone()),
            ..new
        },
        None => new,
    };
    let mut others: Vec<&ChildRecord> = rows.iter().filter(|row| row.key() != key).collect();
    others.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| b.key().cmp(&a.key())));
    let delete = others
        .iter()
        .skip(MAX_RECORDS.saturating_sub(1))
        .map(|row| row.key())
        .collect();
    Change { put, delete }
}

/// The children, most recent first, at most `limit`, and how many more there are.
pub fn newest(rows: &[ChildRecord], limit: usize) -> (Vec<ChildRecord>, usize) {
    let mut sorted = rows.to_vec();
    sorted.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| b.key().cmp(&a.key())));
    let rest = sorted.len().saturating_sub(limit);
    sorted.truncate(limit);
    (sorted, rest)
}

/// The Session this Session last reached `agent` in, if any.
pub fn last_session_with(rows: &[ChildRecord], agent: &AgentName) -> Option<String> {
    newest(rows, rows.len())
        .0
        .into_iter()
        .find(|row| &row.agent == agent)
        .map(|row| row.session_id)
}

/// Every record row of the transaction's Session.
pub fn load(tx: &Tx<'_>) -> Result<Vec<ChildRecord>, HookError> {
    Ok(tx
        .scan::<ChildRecord>(StateScope::Session, RECORD_COLLECTION)?
        .into_iter()
        .map(|(_, row)| row)
        .collect())
}

/// Records one accepted create or send in the transaction's Session.
pub fn put(tx: &mut Tx<'_>, new: ChildRecord) -> Result<ChildRecord, HookError> {
    let change = record(&load(tx)?, new);
    for key in &change.delete {
        tx.delete(StateScope::Session, RECORD_COLLECTION, key)?;
    }
    tx.put(
        StateScope::Session,
        RECORD_COLLECTION,
        &change.put.key(),
        &change.put,
    )?;
    Ok(change.put)
}

/// A new record of `agent`'s Session reached `via` at `at`.
pub fn child(agent: &AgentName, session_id: &str, via: Via, at: u64) -> ChildRecord {
    ChildRecord {
        agent: agent.clone(),
        session_id: session_id.to_owned(),
        via,
        at,
        last_command_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn name(value: &str) -> AgentName {
        AgentName::new(value).unwrap_or_else(|error| panic!("{error}"))
    }

    #[test]
    fn a_known_child_keeps_how_it_was_first_recorded() {
        let created = child(&name("B"), "s1", Via::Created, 10);
        let mut sent = child(&name("B"), "s1", Via::Sent, 20);
        sent.last_command_id = Some("cmd-1".into());
        let change = record(std::slice::from_ref(&created), sent);
        assert_eq!(
            change.put,
            ChildRecord {
                via: Via::Created,
                at: 20,
                last_command_id: Some("cmd-1".into()),
                ..created
            }
        );
        assert!(change.delete.is_empty());
    }

    #[test]
    fn the_least_recently_used_go_past_the_bound() {
        let rows: Vec<ChildRecord> = (0..MAX_RECORDS as u64)
            .map(|i| child(&name("B"), &format!("s{i}"), Via::Sent, i))
            .collect();
        let at_bound = record(
            &rows[..MAX_RECORDS - 1],
            child(&name("C"), "x", Via::Sent, 100),
        );
        assert!(at_bound.delete.is_empty(), "the 64th fits");
        let over = record(&rows, child(&name("C"), "x", Via::Sent, 100));
        assert_eq!(
            over.delete,
            vec!["B/s0".to_owned()],
            "the 65th pushes out the oldest"
        );
        let again = record(&rows, child(&name("B"), "s0", Via::Sent, 100));
        assert!(again.delete.is_empty(), "using a known child adds nothing");
    }

    #[test]
    fn newest_first_with_the_rest_counted_and_the_last_session_found() {
        let rows = vec![
            child(&name("B"), "old", Via::Sent, 1),
            child(&name("C"), "c", Via::Created, 2),
            child(&name("B"), "new", Via::Sent, 3),
        ];
        let (page, rest) = newest(&rows, 2);
        assert_eq!(
            page.iter()
                .map(|r| r.session_id.as_str())
                .collect::<Vec<_>>(),
            ["new", "c"]
        );
        assert_eq!(rest, 1);
        assert_eq!(last_session_with(&rows, &name("B")), Some("new".into()));
        assert_eq!(last_session_with(&rows, &name("D")), None);
    }

    proptest! {
        /// However records arrive, a Session never keeps more than the bound, the row
        /// just recorded stays, and each child appears once.
        #[test]
        fn records_stay_bounded(events in proptest::collection::vec((0u8..80, 0u64..1000), 1..200)) {
            let mut rows: Vec<ChildRecord> = Vec::new();
            for (who, at) in events {
                let new = child(&name("B"), &format!("s{who}"), Via::Sent, at);
                let change = record(&rows, new.clone());
                rows.retain(|row| row.key() != change.put.key() && !change.delete.contains(&row.key()));
                rows.push(change.put.clone());
                prop_assert!(rows.len() <= MAX_RECORDS);
                prop_assert!(rows.iter().any(|row| row.key() == new.key()));
                let mut keys: Vec<String> = rows.iter().map(ChildRecord::key).collect();
                keys.sort();
                keys.dedup();
                prop_assert_eq!(keys.len(), rows.len());
            }
        }
    }
}
