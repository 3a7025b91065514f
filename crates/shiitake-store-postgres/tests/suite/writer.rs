//! The group-commit writer of a process: a request that fails (refused, fenced) fails
//! alone in its group and lands nothing, and a broken connection is replaced.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use shiitake_core::store::{
    CommandKind, CommandState, FencingToken, Op, Ownership, SessionHeader, Store, StoreError,
    StoredCommand,
};
use shiitake_protocol::{CommandId, RequestId, SessionId};
use shiitake_store_postgres::PostgresStore;
use sqlx::Connection;
use support::{create, entry, fresh_key, held, sql, store, two_processes};

#[tokio::test]
async fn a_refused_request_fails_alone_in_its_group() {
    if !support::ready() {
        return;
    }
    let key = fresh_key();
    let store = store(&key, Duration::from_secs(60)).await;
    let session = create(&store).await;
    let command = |n: u64, request: &str| Op::InsertCommand {
        session_id: session.clone(),
        command: StoredCommand {
            id: CommandId::new(format!("cmd_{n:04}")).unwrap(),
            request_id: Some(RequestId::new(request).unwrap()),
            origin: None,
            kind: CommandKind::Prompt,
            payload: "{}".to_owned(),
            accepted_sequence: n,
            state: CommandState::Pending,
            run_id: None,
            recoveries: 0,
        },
    };
    store.commit(vec![command(0, "taken")]).await.unwrap();
    // 64 requests in flight at once: one reuses the request id.
    let mut commits = Vec::new();
    for n in 1..=64 {
        let request = if n == 33 {
            "taken".to_owned()
        } else {
            format!("r{n}")
        };
        let store = store.clone();
        let op = command(n, &request);
        commits.push(tokio::spawn(
            async move { (n, store.commit(vec![op]).await) },
        ));
    }
    for commit in commits {
        let (n, result) = commit.await.unwrap();
        if n == 33 {
            assert!(result.unwrap_err().is_unique_violation());
        } else {
            result.unwrap();
        }
    }
    for n in 1..=64u64 {
        let request = RequestId::new(if n == 33 {
            "taken".to_owned()
        } else {
            format!("r{n}")
        })
        .unwrap();
        let found = store
            .command_by_request(&session, &request)
            .await
            .unwrap()
            .unwrap();
        let expected = if n == 33 { 0 } else { n };
        assert_eq!(found.accepted_sequence, expected);
    }
}

/// Two processes on one tenant; the first held `lost` (with `stale`) until the second
/// took it over, and still holds `kept` (with `token`).
struct TakenOver {
    first: PostgresStore,
    second: PostgresStore,
    lost: SessionId,
    stale: FencingToken,
    kept: SessionId,
    token: FencingToken,
}

async fn taken_over() -> TakenOver {
    let (first, second, lost) = two_processes().await;
    let kept = create(&first).await;
    let stale = held(first.claim(&lost).await.unwrap());
    let token = held(first.claim(&kept).await.unwrap());
    sql(
        "UPDATE session_leases SET expires_at = clock_timestamp() - interval '1 millisecond' \
         WHERE session_id = $1",
        &lost,
    )
    .await;
    held(second.claim(&lost).await.unwrap());
    TakenOver {
        first,
        second,
        lost,
        stale,
        kept,
        token,
    }
}

/// A commit that rewrites its Session's header carries its fence in that update
/// (no fence statement of its own): a stale owner's rewrite of a Session taken over
/// is refused as fenced and lands nothing, neither its entry nor its header, while a
/// held lease's rewrite in the same group commits.
#[tokio::test]
async fn a_fenced_header_rewrite_fails_alone_and_lands_nothing() {
    if !support::ready() {
        return;
    }
    let TakenOver {
        first,
        second,
        lost,
        stale,
        kept,
        token,
    } = taken_over().await;
    let rewrite = |session: &SessionId, token: FencingToken, sequence: u64| {
        let mut header = SessionHeader::new(session.clone(), 1);
        header.head_sequence = sequence;
        header.title = format!("rewritten at {sequence}");
        vec![
            Op::Fence {
                session_id: session.clone(),
                token,
            },
            entry(session, sequence),
            Op::PutHeader(header),
        ]
    };
    let (refused, committed) = tokio::join!(
        first.commit(rewrite(&lost, stale, 1)),
        first.commit(rewrite(&kept, token, 1))
    );
    assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
    committed.unwrap();
    assert!(second.entries_after(&lost, 0, 10).await.unwrap().is_empty());
    let lost_header = second.load_session(&lost).await.unwrap().unwrap().header;
    assert_eq!(lost_header.head_sequence, 0);
    assert_ne!(lost_header.title, "rewritten at 1");
    let kept_header = first.load_session(&kept).await.unwrap().unwrap().header;
    assert_eq!(kept_header.title, "rewritten at 1");
    assert_eq!(first.entries_after(&kept, 0, 10).await.unwrap().len(), 1);
}

/// A group first runs without savepoints and, when one request fails, again with
/// them: the fenced request (a Session taken over) fails alone and lands nothing,
/// while the others of its group, under a lease still held, all commit once.
#[tokio::test]
async fn a_fenced_request_fails_alone_in_its_group_and_lands_nothing() {
    if !support::ready() {
        return;
    }
    let TakenOver {
        first,
        second,
        lost,
        stale,
        kept,
        token,
    } = taken_over().await;
    let fenced = |session: &SessionId, token: FencingToken, sequence: u64| {
        vec![
            Op::Fence {
                session_id: session.clone(),
                token,
            },
            entry(session, sequence),
        ]
    };
    // 48 requests in flight at once; the 17th is the stale owner's.
    let mut commits = Vec::new();
    for n in 1..=48u64 {
        let ops = if n == 17 {
            fenced(&lost, stale, 1)
        } else {
            fenced(&kept, token, n)
        };
        let store = first.clone();
        commits.push(tokio::spawn(async move { (n, store.commit(ops).await) }));
    }
    for commit in commits {
        let (n, result) = commit.await.unwrap();
        if n == 17 {
            let refused = result.unwrap_err();
            assert!(matches!(refused, StoreError::Fenced(_)), "{refused:?}");
        } else {
            result.unwrap();
        }
    }
    assert!(second.entries_after(&lost, 0, 10).await.unwrap().is_empty());
    let sequences: Vec<u64> = first
        .entries_after(&kept, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|entry| entry.sequence)
        .collect();
    let expected: Vec<u64> = (1..=48).filter(|n| *n != 17).collect();
    assert_eq!(sequences, expected);
}

#[tokio::test]
async fn a_broken_writer_connection_is_replaced_and_commits_go_on() {
    if !support::ready() {
        return;
    }
    let key = fresh_key();
    let store = store(&key, Duration::from_secs(60)).await;
    let session = create(&store).await;
    let token = held(store.claim(&session).await.unwrap());
    let fenced = |sequence: u64| {
        vec![
            Op::Fence {
                session_id: session.clone(),
                token,
            },
            entry(&session, sequence),
        ]
    };
    store.commit(fenced(1)).await.unwrap();
    // The writer's backend (the process's one whose last statement was a COMMIT: the
    // pool has only claimed a lease here) ends under it.
    let mut conn = sqlx::PgConnection::connect(&support::url().unwrap())
        .await
        .unwrap();
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = $1 AND query = 'COMMIT'",
    )
    .bind(format!("shiitake {}", store.holder()))
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(ended, vec![true]);
    // The first group on the dead connection fails whole; the writer connects again
    // and the next one lands.
    let mut sequence = 2;
    let mut failed = 0;
    while let Err(error) = store.commit(fenced(sequence)).await {
        assert!(matches!(error, StoreError::Database { .. }), "{error:?}");
        failed += 1;
        assert!(failed < 3, "the writer did not come back: {error:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sequence += 1;
    store.commit(fenced(sequence)).await.unwrap();
    let sequences: Vec<u64> = store
        .entries_after(&session, 0, 10)
        .await
        .unwrap()
        .iter()
        .map(|entry| entry.sequence)
        .collect();
    assert_eq!(sequences, vec![1, 2, 3]);
}
