//! Leases, fencing, timer claims, group isolation and forwarded requests, at the
//! store level: two `PostgresStore`s on one database and one Agent key stand for
//! two processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::json;
use shiitake_core::store::ownership::{Claim, ForwardId, Lease, Orphans, OwnershipEvent, Release};
use shiitake_core::store::{
    CommandKind, CommandState, FencingToken, Op, Ownership, SessionHeader, Store, StoreError,
    StoredCommand, TimerKind, TimerRow,
};
use shiitake_protocol::{CommandId, ExtensionId, SessionId};
use shiitake_store_postgres::PostgresStore;
use sqlx::Connection;
use support::{create, entry, fresh_key, held, session_id, sql, store, two_processes};

fn header(id: &SessionId) -> SessionHeader {
    SessionHeader::new(id.clone(), 1)
}

fn elsewhere(claim: Claim) -> Duration {
    match claim {
        Claim::Elsewhere { lapses_in } => lapses_in,
        other => panic!("expected the lease elsewhere, found {other:?}"),
    }
}

#[tokio::test]
async fn a_stale_owner_is_fenced_and_nothing_of_its_commit_lands() {
    if !support::ready() {
        return;
    }
    let (first, second, session) = two_processes().await;
    let stale = held(first.claim(&session).await.unwrap());
    elsewhere(second.claim(&session).await.unwrap());

    // The first process stops renewing (paused): its lease lapses, the second takes it.
    sql(
        "UPDATE session_leases SET expires_at = clock_timestamp() - interval '1 millisecond' \
         WHERE session_id = $1",
        &session,
    )
    .await;
    let fresh = held(second.claim(&session).await.unwrap());
    assert!(fresh > stale, "{fresh:?} after {stale:?}");

    // The stale owner's commit fails whole: its entry is not there afterwards.
    let refused = first
        .commit(vec![
            Op::Fence {
                session_id: session.clone(),
                token: stale,
            },
            entry(&session, 1),
        ])
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused:?}");
    assert!(
        second
            .entries_after(&session, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // The new owner commits under its token.
    second
        .commit(vec![
            Op::Fence {
                session_id: session.clone(),
                token: fresh,
            },
            entry(&session, 1),
        ])
        .await
        .unwrap();
    assert_eq!(
        second.entries_after(&session, 0, 10).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn a_lease_is_held_until_its_expiry_and_free_one_past_it() {
    if !support::ready() {
        return;
    }
    let (first, second, session) = two_processes().await;
    held(first.claim(&session).await.unwrap());
    sql(
        "UPDATE session_leases SET expires_at = clock_timestamp() + interval '1 second' \
         WHERE session_id = $1",
        &session,
    )
    .await;
    elsewhere(second.claim(&session).await.unwrap());
    sql(
        "UPDATE session_leases SET expires_at = clock_timestamp() - interval '1 millisecond' \
         WHERE session_id = $1",
        &session,
    )
    .await;
    held(second.claim(&session).await.unwrap());
    elsewhere(first.claim(&session).await.unwrap());
}

#[tokio::test]
async fn the_token_grows_every_time_the_lease_changes_hands() {
    if !support::ready() {
        return;
    }
    let (first, second, session) = two_processes().await;
    let one = held(first.claim(&session).await.unwrap());
    let again = held(first.claim(&session).await.unwrap());
    assert!(again > one, "taking one's own lease again is a new tenure");
    first.release(&session, again, Release::Idle).await.unwrap();
    let two = held(second.claim(&session).await.unwrap());
    assert!(two > again);
    // Releasing with an old token leaves the new holder's lease alone.
    first.release(&session, again, Release::Idle).await.unwrap();
    elsewhere(first.claim(&session).await.unwrap());
    // A Session that does not exist (in this tenant) has no lease to take.
    assert_eq!(first.claim(&session_id()).await.unwrap(), Claim::Missing);
    let other_tenant = store(&fresh_key(), Duration::from_secs(60)).await;
    assert_eq!(other_tenant.claim(&session).await.unwrap(), Claim::Missing);
}

#[tokio::test]
async fn a_lease_taken_over_is_announced_as_lost_to_its_old_holder() {
    if !support::ready() {
        return;
    }
    let key = fresh_key();
    // Renewals every 200 ms.
    let first = store(&key, Duration::from_millis(600)).await;
    let session = create(&first).await;
    let mut events = first.events();
    held(first.claim(&session).await.unwrap());
    sql(
        "UPDATE session_leases SET holder = 'another-process', token = token + 1 \
         WHERE session_id = $1",
        &session,
    )
    .await;
    let lost = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(OwnershipEvent::Lost { session_id, .. }) = events.recv().await {
                return session_id;
            }
        }
    })
    .await
    .expect("the renewal notices the lease is gone");
    assert_eq!(lost, session);
}

#[tokio::test]
async fn a_timer_occurrence_is_claimed_by_exactly_one_process() {
    if !support::ready() {
        return;
    }
    let key = fresh_key();
    let stores = [
        store(&key, Duration::from_secs(60)).await,
        store(&key, Duration::from_secs(60)).await,
        store(&key, Duration::from_secs(60)).await,
    ];
    let extension = ExtensionId::new("example-timers").unwrap();
    let ids: Vec<String> = (0..20)
        .map(|n| format!("tmr_{n:02}_{}", ulid::Ulid::generate()))
        .collect();
    let puts = ids
        .iter()
        .map(|id| {
            Op::PutTimer(TimerRow {
                id: id.clone(),
                extension_id: extension.clone(),
                session_id: None,
                due_at: 1_000,
                cadence: Some("* * * * *".to_owned()),
                payload: json!({}),
                kind: TimerKind::Hook,
            })
        })
        .collect();
    stores[0].commit(puts).await.unwrap();
    // Every process races to claim every occurrence at once.
    let mut claims = Vec::new();
    for id in &ids {
        for store in &stores {
            let store = store.clone();
            let id = id.clone();
            claims.push(tokio::spawn(async move {
                let claim = Op::ClaimTimer {
                    id: id.clone(),
                    due_at: 1_000,
                    next: Some(61_000),
                };
                (id, store.commit(vec![claim]).await)
            }));
        }
    }
    let mut won = std::collections::HashMap::<String, usize>::new();
    for claim in claims {
        let (id, result) = claim.await.unwrap();
        match result {
            Ok(()) => *won.entry(id).or_default() += 1,
            Err(StoreError::Conflict(_)) => {}
            Err(other) => panic!("a claim failed otherwise: {other:?}"),
        }
    }
    for id in &ids {
        assert_eq!(won.get(id), Some(&1), "timer {id} claimed {won:?}");
    }
    let next = stores[1].next_timer().await.unwrap().unwrap();
    assert_eq!(next.due_at, 61_000);
}

#[tokio::test]
async fn a_forwarded_request_reaches_the_owner_and_its_answer_comes_back() {
    if !support::ready() {
        return;
    }
    let (owner, other, session) = two_processes().await;
    let mut owner_events = owner.events();
    let mut other_events = other.events();
    let id = other
        .forward(&session, &json!({"type": "preference"}))
        .await
        .unwrap();
    let woken = next_event(
        &mut owner_events,
        |event| matches!(event, OwnershipEvent::Forwarded { session_id } if session_id == &session),
    )
    .await;
    assert!(woken);
    let waiting = owner.forwarded(&session, ForwardId(0)).await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].id, id);
    assert_eq!(owner.forwarded(&session, id).await.unwrap(), vec![]);
    assert_eq!(other.take_answer(id).await.unwrap(), None);
    owner.answer(id, &json!({"ok": null})).await.unwrap();
    let answered = next_event(
        &mut other_events,
        |event| matches!(event, OwnershipEvent::Answered { id: answered } if *answered == id),
    )
    .await;
    assert!(answered);
    assert!(!other.withdraw(id).await.unwrap(), "answered first");
    assert_eq!(
        other.take_answer(id).await.unwrap(),
        Some(json!({"ok": null}))
    );
    assert_eq!(other.take_answer(id).await.unwrap(), None);
    // A withdrawn request is not served.
    let gone = other
        .forward(&session, &json!({"type": "preference"}))
        .await
        .unwrap();
    assert!(other.withdraw(gone).await.unwrap());
    assert_eq!(
        owner.forwarded(&session, ForwardId(0)).await.unwrap(),
        vec![]
    );
}

#[tokio::test]
async fn orphans_are_sessions_with_something_to_do_whose_owner_is_gone() {
    if !support::ready() {
        return;
    }
    let (first, second, busy) = two_processes().await;
    let idle = create(&first).await;
    let asked = create(&first).await;
    let timed = create(&first).await;
    let mut open = header(&busy);
    open.open_from = Some(CommandId::new("cmd_0001").unwrap());
    first.commit(vec![Op::PutHeader(open)]).await.unwrap();
    // A request forwarded to the Session's owner, still unanswered.
    second
        .forward(&asked, &json!({"type": "preference"}))
        .await
        .unwrap();
    // A timer of the Session, due long ago.
    first
        .commit(vec![Op::PutTimer(TimerRow {
            id: format!("tmr_{}", ulid::Ulid::generate()),
            extension_id: ExtensionId::new("example-timers").unwrap(),
            session_id: Some(timed.clone()),
            due_at: 1_000,
            cadence: None,
            payload: json!({}),
            kind: TimerKind::Hook,
        })])
        .await
        .unwrap();
    for session in [&busy, &idle, &asked, &timed] {
        held(first.claim(session).await.unwrap());
    }
    let orphans = second.orphans().await.unwrap();
    assert!(orphans.sessions.is_empty(), "{orphans:?}");
    let lapse = orphans.next_lapse.expect("a lease to wait for");
    assert!(
        lapse <= Duration::from_secs(60) && lapse > Duration::from_secs(50),
        "{lapse:?}"
    );
    for session in [&busy, &idle, &asked, &timed] {
        sql(
            "UPDATE session_leases SET expires_at = clock_timestamp() - interval '1 millisecond' \
             WHERE session_id = $1",
            session,
        )
        .await;
    }
    let mut expected = vec![busy, asked, timed];
    expected.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let orphans = second.orphans().await.unwrap();
    assert_eq!(
        orphans,
        Orphans {
            sessions: expected,
            next_lapse: None
        },
        "the idle Session is nobody's orphan"
    );
}

/// A fake process of `key` on a backend that no longer exists (pid 0 is never a
/// backend's), holding the leases of `sessions` with token 7. Its row comes last, so
/// a heartbeat in between finds either nothing or all of it.
async fn dead_holder(key: &str, holder: &str, sessions: &[&SessionId]) {
    let mut conn = sqlx::PgConnection::connect(&support::url().unwrap())
        .await
        .unwrap();
    for session in sessions {
        sqlx::query(
            "INSERT INTO session_leases (agent_id, session_id, holder, token, expires_at) \
             VALUES ($1, $2, $3, 7, clock_timestamp() + interval '1 hour') \
             ON CONFLICT (agent_id, session_id) DO UPDATE SET holder = excluded.holder, \
               token = excluded.token, expires_at = excluded.expires_at",
        )
        .bind(key)
        .bind(session.as_str())
        .bind(holder)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    sqlx::query(
        "INSERT INTO hub_nodes (agent_id, holder, backend_pid, backend_start, started_at, \
           heartbeat_at) VALUES ($1, $2, 0, clock_timestamp(), clock_timestamp(), clock_timestamp())",
    )
    .bind(key)
    .bind(holder)
    .execute(&mut conn)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_lease_whose_holder_died_is_taken_at_once_and_one_held_by_the_living_is_not() {
    if !support::ready() {
        return;
    }
    let key = fresh_key();
    // Heartbeats every 10 s: no beat frees anything while the test looks.
    let mut options =
        shiitake_store_postgres::PostgresOptions::new(support::url().unwrap(), key.clone());
    options.lease_ttl = Duration::from_secs(60);
    options.heartbeat = Duration::from_secs(10);
    options.read_connections = 2;
    let store = PostgresStore::open(options.clone()).await.unwrap();
    let living = PostgresStore::open(options).await.unwrap();
    let (dead, alive, unknown) = (
        create(&store).await,
        create(&store).await,
        create(&store).await,
    );
    dead_holder(key.as_str(), "dead-process", &[&dead]).await;
    held(living.claim(&alive).await.unwrap());
    // A holder with no row at all is left to its lease's expiry.
    sql(
        "INSERT INTO session_leases (agent_id, session_id, holder, token, expires_at) \
         SELECT agent_id, id, 'unregistered', 3, clock_timestamp() + interval '1 hour' \
         FROM sessions WHERE id = $1",
        &unknown,
    )
    .await;

    let taken = store.claim(&dead).await.unwrap();
    assert_eq!(
        taken,
        Claim::Held(Lease {
            token: FencingToken(8),
            handed_over: false
        }),
        "the next token, at once, not as a handover"
    );
    let lapses_in = elsewhere(store.claim(&alive).await.unwrap());
    assert!(lapses_in > Duration::from_secs(50), "{lapses_in:?}");
    let lapses_in = elsewhere(store.claim(&unknown).await.unwrap());
    assert!(lapses_in > Duration::from_secs(3000), "{lapses_in:?}");
}

/// One process alone on a database of its own (another test's process would find the
/// fake holders these tests plant dead and free their leases, as it should): its tenant,
/// its store (a 60 s lease, no heartbeat while the test looks), a Session of it and a
/// connection to plant rows with.
struct Alone {
    key: shiitake_store_postgres::AgentKey,
    store: PostgresStore,
    session: SessionId,
    conn: sqlx::PgConnection,
}

impl Alone {
    /// Runs `statement` with the tenant's key as `$1`.
    async fn sql(&mut self, statement: &str) {
        sqlx::query(statement)
            .bind(self.key.as_str())
            .execute(&mut self.conn)
            .await
            .unwrap();
    }

    /// Plants `cut-process`, a holder whose backend is gone (pid 0 is never a
    /// backend's), holding the Session's lease with token 7 until `expires` (SQL).
    async fn plant_gone_holder(&mut self, expires: &str) {
        self.sql(
            "INSERT INTO hub_nodes (agent_id, holder, backend_pid, backend_start, started_at, \
               heartbeat_at) VALUES ($1, 'cut-process', 0, clock_timestamp(), \
               clock_timestamp(), clock_timestamp())",
        )
        .await;
        self.sql(&format!(
            "INSERT INTO session_leases (agent_id, session_id, holder, token, expires_at) \
               SELECT agent_id, id, 'cut-process', 7, {expires} FROM sessions \
               WHERE agent_id = $1"
        ))
        .await;
    }
}

async fn alone() -> Option<Alone> {
    let url = support::own_database().await?;
    let key = fresh_key();
    let mut options = shiitake_store_postgres::PostgresOptions::new(url.clone(), key.clone());
    options.lease_ttl = Duration::from_secs(60);
    options.heartbeat = Duration::from_secs(10);
    options.read_connections = 2;
    let store = PostgresStore::open(options).await.unwrap();
    let session = create(&store).await;
    let conn = sqlx::PgConnection::connect(&url).await.unwrap();
    Some(Alone {
        key,
        store,
        session,
        conn,
    })
}

/// A process whose own connection is cut takes a holder whose backend is gone for one
/// cut with it (the server ended both, or had no slot for either): it does not take
/// even that holder's lapsed lease (it lapsed because the holder could not renew it)
/// until a beat has marked the holder away and the holder's grace has passed.
#[tokio::test]
async fn a_cut_process_leaves_the_lapsed_lease_of_a_holder_cut_with_it() {
    let Some(mut alone) = alone().await else {
        return;
    };
    // The holder's backend is gone and its lease lapsed; this process's backend is gone too.
    alone
        .plant_gone_holder("clock_timestamp() - interval '1 millisecond'")
        .await;
    alone
        .sql("UPDATE hub_nodes SET backend_pid = 0 WHERE agent_id = $1 AND holder <> 'cut-process'")
        .await;
    let (store, session) = (&alone.store, alone.session.clone());
    elsewhere(store.claim(&session).await.unwrap());

    // A beat marked the holder away, its grace is still running: still not taken.
    alone
        .sql(
            "UPDATE hub_nodes SET gone_at = clock_timestamp(), rejoin_ms = 60000 \
           WHERE agent_id = $1 AND holder = 'cut-process'",
        )
        .await;
    let lapses_in = elsewhere(alone.store.claim(&session).await.unwrap());
    assert!(lapses_in > Duration::from_secs(50), "{lapses_in:?}");

    // Its grace passed without it coming back: the lease is taken.
    alone
        .sql(
            "UPDATE hub_nodes SET gone_at = clock_timestamp() - interval '2 minutes' \
           WHERE agent_id = $1 AND holder = 'cut-process'",
        )
        .await;
    assert_eq!(
        held(alone.store.claim(&session).await.unwrap()),
        FencingToken(8)
    );
}

/// The server ends every connection at once, and backends end one by one: a claim can
/// run in the instant the holder's backend is gone and the claimer's own not yet. It
/// looks again before it takes the lease, and by then finds its own gone too: the
/// holder was cut with it, not dead, and keeps its lease. A holder that really died is
/// taken at the second look (the test above).
#[tokio::test]
async fn a_claim_looks_twice_before_it_takes_a_lease_whose_holder_is_gone() {
    let Some(mut alone) = alone().await else {
        return;
    };
    alone
        .plant_gone_holder("clock_timestamp() + interval '1 hour'")
        .await;
    let (store, session) = (alone.store.clone(), alone.session.clone());
    let claim = tokio::spawn(async move { store.claim(&session).await.unwrap() });
    // This process's own backend ends a moment after the holder's.
    tokio::time::sleep(Duration::from_millis(50)).await;
    alone
        .sql("UPDATE hub_nodes SET backend_pid = 0 WHERE agent_id = $1 AND holder <> 'cut-process'")
        .await;
    elsewhere(claim.await.unwrap());
}

#[tokio::test]
async fn the_heartbeat_frees_and_announces_the_sessions_of_a_process_that_died() {
    if !support::ready() {
        return;
    }
    let key = fresh_key();
    let mut options =
        shiitake_store_postgres::PostgresOptions::new(support::url().unwrap(), key.clone());
    options.lease_ttl = Duration::from_secs(60);
    options.heartbeat = Duration::from_millis(100);
    options.read_connections = 2;
    let store = PostgresStore::open(options).await.unwrap();
    let mut events = store.events();
    let (one, two, kept) = (
        create(&store).await,
        create(&store).await,
        create(&store).await,
    );
    held(store.claim(&kept).await.unwrap());
    dead_holder(key.as_str(), "dead-process", &[&one, &two]).await;

    let mut freed = std::collections::BTreeSet::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while freed.len() < 2 {
            if let Ok(OwnershipEvent::Released { session_id }) = events.recv().await {
                freed.insert(session_id);
            }
        }
    })
    .await
    .expect("a heartbeat announces the freed Sessions");
    assert_eq!(freed, [one.clone(), two.clone()].into_iter().collect());
    let mut conn = sqlx::PgConnection::connect(&support::url().unwrap())
        .await
        .unwrap();
    let leases: Vec<(String, Option<String>, i64)> = sqlx::query_as(
        "SELECT session_id, holder, token FROM session_leases WHERE agent_id = $1 ORDER BY token, session_id",
    )
    .bind(key.as_str())
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut expected = vec![
        (one.as_str().to_owned(), None, 7),
        (two.as_str().to_owned(), None, 7),
    ];
    expected.sort();
    expected.insert(
        0,
        (kept.as_str().to_owned(), Some(store.holder().to_owned()), 1),
    );
    assert_eq!(
        leases, expected,
        "freed with their tokens kept; the living holder's untouched"
    );
    let nodes: Vec<String> = sqlx::query_scalar("SELECT holder FROM hub_nodes WHERE agent_id = $1")
        .bind(key.as_str())
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        nodes,
        vec![store.holder().to_owned()],
        "the dead process's row is gone"
    );
}

#[tokio::test]
async fn a_draining_process_takes_nothing_and_its_handover_is_not_a_crash() {
    if !support::ready() {
        return;
    }
    let (first, second, session) = two_processes().await;
    let other = create(&first).await;
    let token = held(first.claim(&session).await.unwrap());
    first.drain().await.unwrap();
    let lapses_in = elsewhere(first.claim(&other).await.unwrap());
    assert_eq!(
        lapses_in,
        Duration::from_secs(60),
        "a draining process looks a lease later"
    );
    assert_eq!(first.claim(&session_id()).await.unwrap(), Claim::Missing);
    let listed = second.nodes().await.unwrap();
    let draining: Vec<(&str, bool)> = listed
        .iter()
        .map(|node| (node.holder.as_str(), node.draining))
        .collect();
    assert_eq!(
        draining,
        vec![(first.holder(), true), (second.holder(), false)]
    );

    let mut events = second.events();
    first
        .release(&session, token, Release::Handover)
        .await
        .unwrap();
    assert!(
        next_event(
            &mut events,
            |event| matches!(event, OwnershipEvent::Released { session_id } if session_id == &session)
        )
        .await
    );
    let handed = second.claim(&session).await.unwrap();
    assert_eq!(
        handed,
        Claim::Held(Lease {
            token: FencingToken(token.0 + 1),
            handed_over: true
        })
    );
    // The mark names that one handover: the tenures after it are not handed over.
    second
        .release(&session, FencingToken(token.0 + 1), Release::Idle)
        .await
        .unwrap();
    let next = second.claim(&session).await.unwrap();
    assert_eq!(
        next,
        Claim::Held(Lease {
            token: FencingToken(token.0 + 2),
            handed_over: false
        })
    );
}

#[tokio::test]
async fn a_request_forwarded_to_a_session_nobody_holds_announces_it_free() {
    if !support::ready() {
        return;
    }
    let (first, second, session) = two_processes().await;
    let held_elsewhere = create(&first).await;
    held(first.claim(&held_elsewhere).await.unwrap());
    let mut events = first.events();
    second
        .forward(&held_elsewhere, &json!({"type": "preference"}))
        .await
        .unwrap();
    second
        .forward(&session, &json!({"type": "preference"}))
        .await
        .unwrap();
    // Announcements arrive in commit order: the first forward says nothing is free.
    let released = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(OwnershipEvent::Released { session_id }) = events.recv().await {
                return session_id;
            }
        }
    })
    .await
    .expect("the free Session is announced");
    assert_eq!(released, session);
}

#[tokio::test]
async fn the_operator_sees_each_process_with_its_sessions_and_runs() {
    if !support::ready() {
        return;
    }
    let (first, second, busy) = two_processes().await;
    let idle = create(&first).await;
    let command = CommandId::new("cmd_0001").unwrap();
    let mut open = header(&busy);
    open.open_from = Some(command.clone());
    first
        .commit(vec![
            Op::InsertCommand {
                session_id: busy.clone(),
                command: StoredCommand {
                    id: command,
                    request_id: None,
                    origin: None,
                    kind: CommandKind::Prompt,
                    payload: "{}".to_owned(),
                    accepted_sequence: 1,
                    state: CommandState::Running,
                    run_id: None,
                    recoveries: 0,
                },
            },
            Op::PutHeader(open),
        ])
        .await
        .unwrap();
    held(first.claim(&busy).await.unwrap());
    held(first.claim(&idle).await.unwrap());
    let nodes = second.nodes().await.unwrap();
    let seen: Vec<(&str, &str, bool, bool, u64, u64)> = nodes
        .iter()
        .map(|node| {
            (
                node.holder.as_str(),
                node.agent.as_str(),
                node.draining,
                node.connected,
                node.sessions,
                node.open_runs,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (first.holder(), first.agent().as_str(), false, true, 2, 1),
            (second.holder(), second.agent().as_str(), false, true, 0, 0),
        ]
    );
    assert!(nodes.iter().all(|node| node.heartbeat_age_ms < 30_000));
    assert!(nodes[0].started_at <= nodes[1].started_at);

    // A process that closes gives back what it still holds and leaves the list.
    let mut events = second.events();
    first.close().await;
    let mut freed = std::collections::BTreeSet::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        while freed.len() < 2 {
            if let Ok(OwnershipEvent::Released { session_id }) = events.recv().await {
                freed.insert(session_id);
            }
        }
    })
    .await
    .expect("the leases left behind are announced free");
    let holders: Vec<String> = second
        .nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|node| node.holder)
        .collect();
    assert_eq!(holders, vec![second.holder().to_owned()]);
    held(second.claim(&busy).await.unwrap());
}

async fn next_event(
    events: &mut tokio::sync::broadcast::Receiver<OwnershipEvent>,
    wanted: impl Fn(&OwnershipEvent) -> bool,
) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match events.recv().await {
                Ok(event) if wanted(&event) => return true,
                Ok(_) => {}
                Err(error) => panic!("events ended: {error}"),
            }
        }
    })
    .await
    .unwrap_or(false)
}
