//! The group-commit writer of a process: a request that fails (refused, fenced) fails
//! alone in its group and lands nothing, and a broken connection is replaced.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use shiitake_core::store::{
    CommandKind, CommandState, FencingToken, Op, Ownership, SessionHeader, Store, StoreError,
    StoredCommand, StoredEntry, StoredTerminal,
};
use shiitake_protocol::message::{Message, UserMessage};
use shiitake_protocol::{CommandId, EntryId, RequestId, SessionId, TerminalOutcome};
use shiitake_store_postgres::PostgresStore;
use sqlx::Connection;
use support::{claimed, create, entry, fresh_key, held, sql, store, two_processes};

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

/// `None` when PostgreSQL is not there (and the test says so).
async fn taken_over() -> Option<TakenOver> {
    if !support::ready() {
        return None;
    }
    let (first, second, lost) = two_processes().await;
    let stale = held(first.claim(&lost).await.unwrap());
    let (kept, token) = claimed(&first).await;
    sql(
        "UPDATE session_leases SET expires_at = clock_timestamp() - interval '1 millisecond' \
         WHERE session_id = $1",
        &lost,
    )
    .await;
    held(second.claim(&lost).await.unwrap());
    Some(TakenOver {
        first,
        second,
        lost,
        stale,
        kept,
        token,
    })
}

/// A commit that rewrites its Session's header carries its fence in that update
/// (no fence statement of its own): a stale owner's rewrite of a Session taken over
/// is refused as fenced and lands nothing, neither its entry nor its header, while a
/// held lease's rewrite in the same group commits.
#[tokio::test]
async fn a_fenced_header_rewrite_fails_alone_and_lands_nothing() {
    let Some(TakenOver {
        first,
        second,
        lost,
        stale,
        kept,
        token,
    }) = taken_over().await
    else {
        return;
    };
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
    let Some(TakenOver {
        first,
        second,
        lost,
        stale,
        kept,
        token,
    }) = taken_over().await
    else {
        return;
    };
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

/// Requests of distinct Sessions run folded, each statement once over arrays for all
/// of them (`writer/fold.rs`). 23 acceptances in flight at once each land their own
/// command, entry and header, none mixed up; then, of 24 more, one reuses its Session's request
/// id and one is a stale owner's: those two fail alone and land nothing, and every
/// other lands as before.
#[tokio::test]
async fn a_folded_group_lands_each_row_in_its_place_and_refuses_bad_requests_alone() {
    let Some(TakenOver {
        first,
        second,
        lost,
        stale,
        kept,
        token,
    }) = taken_over().await
    else {
        return;
    };
    let mut sessions = vec![(kept, token)];
    for _ in 1..23 {
        sessions.push(claimed(&first).await);
    }
    // Round 1, all good; round 2 with the seventh Session's request id taken (by
    // round 1) and the stale owner's acceptance.
    for round in 1..=2u64 {
        let mut commits = Vec::new();
        for (index, (session, token)) in sessions.iter().enumerate() {
            let n = acceptance_number(round, index);
            let request = if round == 2 && index == 6 {
                request_name(1, index)
            } else {
                request_name(round, index)
            };
            let ops = acceptance(session, *token, n, &request);
            let store = first.clone();
            commits.push(tokio::spawn(
                async move { (index, store.commit(ops).await) },
            ));
        }
        if round == 2 {
            let ops = acceptance(&lost, stale, 999, "r999");
            let store = first.clone();
            commits.push(tokio::spawn(async move { (99, store.commit(ops).await) }));
        }
        for commit in commits {
            match commit.await.unwrap() {
                (6, result) if round == 2 => assert!(result.unwrap_err().is_unique_violation()),
                (99, result) => assert!(matches!(result, Err(StoreError::Fenced(_))), "{result:?}"),
                (index, result) => {
                    result.unwrap_or_else(|error| panic!("round {round}, {index}: {error}"));
                }
            }
        }
        for (index, (session, _)) in sessions.iter().enumerate() {
            // The refused acceptance left round 1's header and commands as they were.
            let landed = if index == 6 { 1 } else { round };
            let n = acceptance_number(landed, index);
            let header = first.load_session(session).await.unwrap().unwrap().header;
            assert_eq!(
                (header.title, header.head_sequence),
                (format!("accepted {n}"), n)
            );
            let request = RequestId::new(request_name(landed, index)).unwrap();
            let command = first
                .command_by_request(session, &request)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                (command.accepted_sequence, command.payload),
                (n, format!("{{\"n\":{n}}}"))
            );
            // Each acceptance's prompt entry, in its own Session under its own sequence.
            let entries: Vec<u64> = first
                .entries_after(session, 0, 10)
                .await
                .unwrap()
                .iter()
                .map(|entry| entry.sequence)
                .collect();
            let landed: Vec<u64> = (1..=landed)
                .map(|round| acceptance_number(round, index))
                .collect();
            assert_eq!(entries, landed);
        }
    }
    let lost_header = second.load_session(&lost).await.unwrap().unwrap().header;
    assert_ne!(lost_header.title, "accepted 999");
    let missing = RequestId::new("r999").unwrap();
    assert!(
        second
            .command_by_request(&lost, &missing)
            .await
            .unwrap()
            .is_none()
    );
}

/// The sequence (and command number) of Session `index`'s acceptance in `round`.
fn acceptance_number(round: u64, index: usize) -> u64 {
    round * 100 + index as u64
}

fn request_name(round: u64, index: usize) -> String {
    format!("r{}", acceptance_number(round, index))
}

/// An acceptance as an owner commits it (here with its prompt entry, as a prompt that
/// starts a run is): the fence, the command, the entry, the header.
fn acceptance(session: &SessionId, token: FencingToken, n: u64, request: &str) -> Vec<Op> {
    let mut header = SessionHeader::new(session.clone(), 1);
    header.head_sequence = n;
    header.title = format!("accepted {n}");
    vec![
        Op::Fence {
            session_id: session.clone(),
            token,
        },
        Op::InsertCommand {
            session_id: session.clone(),
            command: StoredCommand {
                id: CommandId::new(format!("cmd_{n:04}")).unwrap(),
                request_id: Some(RequestId::new(request).unwrap()),
                origin: None,
                kind: CommandKind::Prompt,
                payload: format!("{{\"n\":{n}}}"),
                accepted_sequence: n,
                state: CommandState::Pending,
                run_id: None,
                recoveries: 0,
            },
        },
        entry(session, n),
        Op::PutHeader(header),
    ]
}

/// The statements of a run's last commit, folded for 12 Sessions settling at once:
/// each lands its answer (a child of its prompt), its command's new state and its
/// terminal (anchored at that answer) in its own Session.
#[tokio::test]
async fn folded_settles_land_each_answer_state_and_terminal_in_their_session() {
    if !support::ready() {
        return;
    }
    let key = fresh_key();
    let store = store(&key, Duration::from_secs(60)).await;
    let mut sessions = Vec::new();
    for index in 0..12usize {
        let (session, token) = claimed(&store).await;
        store
            .commit(acceptance(&session, token, 1, &format!("s{index}")))
            .await
            .unwrap();
        let prompt = store.entries_after(&session, 0, 1).await.unwrap()[0]
            .id
            .clone();
        sessions.push((session, token, prompt));
    }
    let mut settles = Vec::new();
    for (index, (session, token, prompt)) in sessions.iter().enumerate() {
        let n = index as u64;
        let answer = EntryId::new(format!("ent_answer_{n:04}")).unwrap();
        let mut header = SessionHeader::new(session.clone(), 1);
        header.head_sequence = 3;
        header.title = format!("settled {n}");
        let command_id = CommandId::new("cmd_0001").unwrap();
        let ops = vec![
            Op::Fence {
                session_id: session.clone(),
                token: *token,
            },
            Op::InsertEntry {
                session_id: session.clone(),
                entry: StoredEntry {
                    id: answer.clone(),
                    parent: Some(prompt.clone()),
                    sequence: 2,
                    command_id: Some(command_id.clone()),
                    message: Message::User(UserMessage::text(format!("answer {n}"), n)),
                },
            },
            Op::SetCommandState {
                session_id: session.clone(),
                command_id: command_id.clone(),
                state: CommandState::Settled,
                run_id: None,
            },
            Op::InsertTerminal {
                session_id: session.clone(),
                terminal: StoredTerminal {
                    command_id,
                    outcome: TerminalOutcome::Completed,
                    sequence: 3,
                    diagnostic: Some(format!("diagnostic {n}")),
                    anchor: Some(answer),
                },
            },
            Op::PutHeader(header),
        ];
        let store = store.clone();
        settles.push(tokio::spawn(async move { store.commit(ops).await }));
    }
    for settle in settles {
        settle.await.unwrap().unwrap();
    }
    for (index, (session, _, prompt)) in sessions.iter().enumerate() {
        let n = index as u64;
        let entries = store.entries_after(session, 0, 10).await.unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].parent.as_ref(), Some(prompt));
        assert_eq!(
            entries[1].message,
            Message::User(UserMessage::text(format!("answer {n}"), n))
        );
        let command = store
            .command_by_request(session, &RequestId::new(format!("s{index}")).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(command.state, CommandState::Settled);
        let terminals = store.terminals_between(session, 0, 10, 10).await.unwrap();
        assert_eq!(terminals.len(), 1);
        assert_eq!(
            (terminals[0].sequence, terminals[0].diagnostic.as_deref()),
            (3, Some(format!("diagnostic {n}").as_str()))
        );
        assert_eq!(terminals[0].anchor.as_ref(), Some(&entries[1].id));
        let header = store.load_session(session).await.unwrap().unwrap().header;
        assert_eq!(header.title, format!("settled {n}"));
    }
}
