//! Lineage entries are keyed by a Session's integer key and their sequence, name their
//! parent by its sequence, and keep their message packed (migration 0007): the lineage
//! reads back the same, a parent outside the Session is refused, deleting a Session
//! deletes its entries, and a database written before reads and grows on.

#![allow(clippy::unwrap_used)]

use crate::support::harness;
use crate::support::schema::{connect, migrated_to};

use std::path::{Path, PathBuf};

use shiitake_conformance::support::*;
use shiitake_core::store::{Op, SessionHeader, Store, StoreError, StoredEntry};
use shiitake_model::Turn;
use shiitake_protocol::message::{Message, UserMessage};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

fn entry(id: &str, parent: Option<&str>, sequence: u64) -> StoredEntry {
    StoredEntry {
        id: EntryId::new(id).unwrap(),
        parent: parent.map(|p| EntryId::new(p).unwrap()),
        sequence,
        command_id: None,
        message: Message::User(UserMessage::text(format!("message {id}"), sequence)),
    }
}

fn insert(session: &SessionId, entry: StoredEntry) -> Op {
    Op::InsertEntry {
        session_id: session.clone(),
        entry,
    }
}

/// Creates `sessions`, each holding `entries`, one commit each.
async fn create(store: &SqliteStore, sessions: &[&SessionId], entries: &[StoredEntry]) {
    for session in sessions {
        let mut ops = vec![Op::CreateSession {
            header: SessionHeader::new((*session).clone(), 1),
            request_id: None,
        }];
        ops.extend(entries.iter().map(|entry| insert(session, entry.clone())));
        store.commit(ops).await.unwrap();
    }
}

/// A store on a new file; the directory lives as long as the returned guard.
async fn fresh_store() -> (tempfile::TempDir, PathBuf, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let store = SqliteStore::open(&path, Durability::Normal).await.unwrap();
    (dir, path, store)
}

fn session(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

fn ids(entries: &[StoredEntry]) -> Vec<&str> {
    entries.iter().map(|entry| entry.id.as_str()).collect()
}

async fn count(path: &Path, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(&mut connect(path).await)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_branched_lineage_reads_back_through_parent_sequences() {
    let (_dir, path, store) = fresh_store().await;
    let (a, b) = (session("ses_a"), session("ses_b"));
    // Two Sessions with the same entry ids: an entry is found within its own Session.
    let tree = [
        entry("ent_1", None, 1),
        entry("ent_2", Some("ent_1"), 2),
        entry("ent_3", Some("ent_2"), 3),
        // A branch from ent_1.
        entry("ent_4", Some("ent_1"), 4),
        entry("ent_5", Some("ent_4"), 5),
    ];
    create(&store, &[&a, &b], &tree).await;
    let leaf = EntryId::new("ent_5").unwrap();
    let path_back = store.lineage(&b, &leaf, 100).await.unwrap();
    assert_eq!(ids(&path_back), ["ent_5", "ent_4", "ent_1"]);
    assert_eq!(path_back[0], entry("ent_5", Some("ent_4"), 5));
    assert_eq!(path_back[2].parent, None);
    assert_eq!(
        ids(&store.lineage(&a, &leaf, 2).await.unwrap()),
        ["ent_5", "ent_4"]
    );
    let other = EntryId::new("ent_3").unwrap();
    assert_eq!(
        store.entry(&a, &other).await.unwrap(),
        Some(entry("ent_3", Some("ent_2"), 3))
    );
    assert_eq!(
        ids(&store.entries_after(&a, 3, 10).await.unwrap()),
        ["ent_4", "ent_5"]
    );
    assert_eq!(
        store.entry_at(&a, 2).await.unwrap(),
        Some(entry("ent_2", Some("ent_1"), 2))
    );
    store.close().await;
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM entries WHERE typeof(message) = 'blob'"
        )
        .await,
        10,
        "new messages are stored packed"
    );
}

#[tokio::test]
async fn a_parent_outside_the_session_fails_the_whole_commit() {
    let (_dir, _path, store) = fresh_store().await;
    let (a, b) = (session("ses_a"), session("ses_b"));
    create(&store, &[&a, &b], &[]).await;
    store
        .commit(vec![insert(&a, entry("ent_1", None, 1))])
        .await
        .unwrap();
    for parent in ["ent_1", "ent_missing"] {
        let result = store
            .commit(vec![
                insert(&b, entry("ent_root", None, 1)),
                insert(&b, entry("ent_2", Some(parent), 2)),
            ])
            .await;
        assert!(
            matches!(result, Err(StoreError::Conflict(ref message)) if message.contains("parent")),
            "{parent}: {result:?}"
        );
        assert_eq!(store.entries_after(&b, 0, 10).await.unwrap(), vec![]);
    }
    store.close().await;
}

#[tokio::test]
async fn deleting_a_session_deletes_its_entries_and_keys_are_not_shared() {
    let (_dir, path, store) = fresh_store().await;
    let (a, b, c) = (session("ses_a"), session("ses_b"), session("ses_c"));
    create(&store, &[&a, &b], &[entry("ent_1", None, 1)]).await;
    // Deleting the Session with the highest key lets a later Session take that key again:
    // nothing of the deleted one may show through.
    store
        .commit(vec![Op::DeleteSession {
            session_id: b.clone(),
        }])
        .await
        .unwrap();
    create(&store, &[&c], &[]).await;
    assert_eq!(store.entries_after(&c, 0, 10).await.unwrap(), vec![]);
    assert_eq!(store.entries_after(&b, 0, 10).await.unwrap(), vec![]);
    assert_eq!(
        ids(&store.entries_after(&a, 0, 10).await.unwrap()),
        ["ent_1"]
    );
    store.close().await;
    assert_eq!(count(&path, "SELECT count(*) FROM entries").await, 1);
}

#[tokio::test]
async fn a_database_from_before_keyed_entries_reads_and_grows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    // The schema as migrations 1 to 6 left it: one Session with a settled prompt and its
    // answer, the messages stored as JSON text.
    let mut conn = migrated_to(&path, 6).await;
    for (session, leaf) in [("ses_other", "ent_x"), ("ses_old", "ent_2")] {
        sqlx::query(
            "INSERT INTO sessions (id, created_at, last_activity_at, title, head_sequence, \
             leaf_entry_id, inbox_state, inbox_rank) VALUES (?, 1, 1, 'old', 3, ?, 'done', 2)",
        )
        .bind(session)
        .bind(leaf)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let user = r#"{"role":"user","content":"p1","timestamp":1}"#;
    let answer = r#"{"role":"assistant","content":[{"type":"text","text":"one"}],"api":"scripted","provider":"scripted","model":"scripted","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}"#;
    for (session, id, parent, sequence, message) in [
        ("ses_other", "ent_x", None, 2, user),
        ("ses_old", "ent_1", None, 2, user),
        ("ses_old", "ent_2", Some("ent_1"), 3, answer),
    ] {
        sqlx::query(
            "INSERT INTO entries (session_id, id, parent_id, sequence, message) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(session)
        .bind(id)
        .bind(parent)
        .bind(sequence)
        .bind(message)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    drop(conn);

    let (agent, model) = harness::open_scripted(&path, vec![Turn::text("two")]).await;
    let session = agent.session(session("ses_old"));
    let prompt = send(&session, "p2").await;
    assert_eq!(
        terminal_of(&session, &prompt).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: p1", "assistant: one", "user: p2", "assistant: two"]
    );
    let context = &model.requests()[0].messages;
    assert_eq!(
        context.len(),
        3,
        "the run read the migrated lineage: {context:?}"
    );
    agent.close().await.unwrap();
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM entries WHERE typeof(message) = 'text'"
        )
        .await,
        3,
        "migrated rows stay as they were"
    );
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM entry_rows WHERE session_id = 'ses_old' AND parent_id IS NOT NULL"
        )
        .await,
        3,
        "every entry after the first names its parent"
    );
}
