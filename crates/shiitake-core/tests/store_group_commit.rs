//! The single writer commits concurrent requests in groups; one bad request
//! fails alone, wholly undone, and the others commit.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use shiitake_core::store::{Op, SessionHeader, Store, StoredEntry};
use shiitake_core::{Durability, SqliteStore};
use shiitake_protocol::message::{Message, UserMessage};
use shiitake_protocol::{EntryId, SessionId, SessionInboxState};

fn header(id: &SessionId) -> SessionHeader {
    SessionHeader {
        id: id.clone(),
        created_at: 1,
        last_activity_at: 1,
        settled_at: None,
        title: String::new(),
        head_sequence: 0,
        leaf: None,
        epoch: 0,
        model_preference: None,
        inbox_state: SessionInboxState::Done,
        open_from: None,
    }
}

#[tokio::test]
async fn one_bad_request_in_a_group_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
            .await
            .unwrap(),
    );
    let mut tasks = Vec::new();
    for n in 0..40 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let id = SessionId::new(format!("ses_{n}")).unwrap();
            let ops = if n == 17 {
                // An entry of a Session that does not exist: the foreign key refuses it.
                let entry = StoredEntry {
                    id: EntryId::new("ent_orphan").unwrap(),
                    parent: None,
                    sequence: 1,
                    command_id: None,
                    message: Message::User(UserMessage::text("orphan", 1)),
                };
                // Its first op would succeed: it must be undone with the rest.
                vec![
                    Op::CreateSession {
                        header: header(&id),
                        request_id: None,
                    },
                    Op::InsertEntry {
                        session_id: SessionId::new("ses_missing").unwrap(),
                        entry,
                    },
                ]
            } else {
                vec![Op::CreateSession {
                    header: header(&id),
                    request_id: None,
                }]
            };
            (n, store.commit(ops).await)
        }));
    }
    for task in tasks {
        let (n, result) = task.await.unwrap();
        assert_eq!(result.is_err(), n == 17, "request {n}: {result:?}");
    }
    for n in 0..40 {
        let id = SessionId::new(format!("ses_{n}")).unwrap();
        assert_eq!(
            store.load_session(&id).await.unwrap().is_some(),
            n != 17,
            "ses_{n} committed, unless it was in the failed request"
        );
    }
    store.close().await;
}
