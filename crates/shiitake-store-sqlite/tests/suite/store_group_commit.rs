//! The single writer commits concurrent requests in groups; one bad request
//! fails alone, wholly undone, and the others commit.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use shiitake_core::store::{Op, SessionHeader, Store, StoredEntry};
use shiitake_protocol::message::{Message, UserMessage};
use shiitake_protocol::{EntryId, SessionId};
use shiitake_store_sqlite::{Durability, SqliteStore};

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
                // An entry of a Session that does not exist: the insert finds no Session.
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
                        header: SessionHeader::new(id.clone(), 1),
                        request_id: None,
                    },
                    Op::InsertEntry {
                        session_id: SessionId::new("ses_missing").unwrap(),
                        entry,
                    },
                ]
            } else {
                vec![Op::CreateSession {
                    header: SessionHeader::new(id.clone(), 1),
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

/// One request of the property below.
#[derive(Clone, Debug)]
enum Request {
    /// Creates `ses_{n}`: several requests may race for the same id.
    Create(u8),
    /// Creates `ses_bad_{n}`, then writes an entry of a Session that does not exist.
    CreateThenFail(u8),
}

fn ops(request: &Request) -> Vec<Op> {
    let create = |name: String| Op::CreateSession {
        header: SessionHeader::new(SessionId::new(name).unwrap(), 1),
        request_id: None,
    };
    match request {
        Request::Create(n) => vec![create(format!("ses_{n}"))],
        Request::CreateThenFail(n) => vec![
            create(format!("ses_bad_{n}")),
            Op::InsertEntry {
                session_id: SessionId::new("ses_missing").unwrap(),
                entry: StoredEntry {
                    id: EntryId::new(format!("ent_{n}")).unwrap(),
                    parent: None,
                    sequence: 1,
                    command_id: None,
                    message: Message::User(UserMessage::text("orphan", 1)),
                },
            },
        ],
    }
}

fn request() -> impl proptest::strategy::Strategy<Value = Request> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..12).prop_map(Request::Create),
        1 => (0u8..12).prop_map(Request::CreateThenFail),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Whatever the writer groups together, each request commits whole or not at all:
    /// of the requests racing to create one id exactly one wins, a request that
    /// fails leaves nothing behind, and the store holds exactly what the winners wrote.
    #[test]
    fn concurrent_requests_commit_whole_or_not_at_all(
        requests in proptest::collection::vec(request(), 1..40),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let dir = tempfile::tempdir().unwrap();
            let store = Arc::new(
                SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
                    .await
                    .unwrap(),
            );
            let tasks: Vec<_> = requests
                .iter()
                .map(|request| {
                    let (store, ops) = (store.clone(), ops(request));
                    tokio::spawn(async move { store.commit(ops).await })
                })
                .collect();
            let mut wins = std::collections::BTreeMap::<u8, usize>::new();
            for (request, task) in requests.iter().zip(tasks) {
                let result = task.await.unwrap();
                match request {
                    Request::Create(n) => match result {
                        Ok(()) => *wins.entry(*n).or_default() += 1,
                        Err(error) => assert!(error.is_unique_violation(), "{error}"),
                    },
                    Request::CreateThenFail(_) => assert!(result.is_err()),
                }
            }
            for n in 0..12u8 {
                let raced = requests.iter().any(|r| matches!(r, Request::Create(m) if *m == n));
                assert_eq!(wins.get(&n).copied().unwrap_or(0), usize::from(raced), "ses_{n}");
                let id = SessionId::new(format!("ses_{n}")).unwrap();
                assert_eq!(store.load_session(&id).await.unwrap().is_some(), raced);
                let bad = SessionId::new(format!("ses_bad_{n}")).unwrap();
                assert!(store.load_session(&bad).await.unwrap().is_none(), "ses_bad_{n} undone");
            }
            store.close().await;
        });
    }
}
