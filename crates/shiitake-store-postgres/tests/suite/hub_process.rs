//! One process, many tenants: a `PostgresHub` shares its pool, writer, listener and
//! upkeep connection among every tenant store it opens. The connections it holds do
//! not grow with its tenants, each tenant's rows stay its own, one group commits many
//! tenants' requests, closing one tenant leaves the others running, and when a process
//! holding several tenants' Sessions is killed, another process's hub frees them and
//! reports each tenant.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{self, cluster, create, fresh_key, held, hub, session_id};

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiitake_conformance::{TestTools, tools};
use shiitake_core::Agent;
use shiitake_core::store::ownership::{Claim, OwnershipEvent, Release};
use shiitake_core::store::{Op, Ownership, SessionHeader, Store, StoreError};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{
    AgentApi, PromptText, ReadOptions, RequestId, SendOptions, SessionApi, SessionId,
};
use shiitake_store_postgres::{AgentKey, HubOptions, OpenError, PostgresHub};
use sqlx::Connection;

async fn connect() -> sqlx::PgConnection {
    sqlx::PgConnection::connect(&support::url().unwrap())
        .await
        .unwrap()
}

/// The backends of `hub`'s process (its connections name it in `application_name`).
async fn connections(hub: &PostgresHub) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
        .bind(format!("shiitake {}", hub.holder()))
        .fetch_one(&mut connect().await)
        .await
        .unwrap()
}

/// Makes the pool open every connection it may: more concurrent queries than it has.
async fn fill_pool(hub: &PostgresHub) {
    let queries = (0..12).map(|_| {
        sqlx::query("SELECT pg_sleep(0.05)")
            .execute(hub.pool())
            .map(|done| done.map(drop))
    });
    for done in futures::future::join_all(queries).await {
        done.unwrap();
    }
}

use futures::FutureExt;

/// The holders of `agent`'s rows in `hub_nodes`.
async fn node_rows(agent: &AgentKey) -> Vec<(String, bool)> {
    sqlx::query_as("SELECT holder, draining FROM hub_nodes WHERE agent_id = $1 ORDER BY holder")
        .bind(agent.as_str())
        .fetch_all(&mut connect().await)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_hundred_tenants_hold_the_connections_of_one() {
    if !support::ready() {
        return;
    }
    let hub = hub(3).await;
    let first = hub.store(fresh_key()).await.unwrap();
    let session = create(&first).await;
    held(first.claim(&session).await.unwrap());
    fill_pool(&hub).await;
    let one = connections(&hub).await;
    // The pool (the listener's among them), the writer and the upkeep.
    assert_eq!(one, 3 + 2, "one tenant");

    let mut stores = vec![first];
    for _ in 1..100 {
        stores.push(hub.store(fresh_key()).await.unwrap());
    }
    // Every tenant commits, claims and reads at once.
    let work = stores.iter().map(|store| async move {
        let session = create(store).await;
        held(store.claim(&session).await.unwrap());
        assert!(store.load_session(&session).await.unwrap().is_some());
    });
    futures::future::join_all(work).await;
    fill_pool(&hub).await;
    assert_eq!(connections(&hub).await, one, "a hundred tenants");
    assert_eq!(hub.open_tenants().len(), 100);
    // Each tenant has its row, all naming the one upkeep backend.
    let backends: Vec<(i64, i32)> = sqlx::query_as(
        "SELECT count(*), backend_pid FROM hub_nodes WHERE holder = $1 GROUP BY backend_pid",
    )
    .bind(hub.holder())
    .fetch_all(&mut connect().await)
    .await
    .unwrap();
    assert_eq!(backends.len(), 1, "{backends:?}");
    assert_eq!(backends[0].0, 100);
    hub.close().await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM hub_nodes WHERE holder = $1")
        .bind(hub.holder())
        .fetch_one(&mut connect().await)
        .await
        .unwrap();
    assert_eq!(rows, 0, "the hub left every tenant");
}

#[tokio::test]
async fn tenants_of_one_hub_commit_in_one_group_and_see_only_their_own() {
    if !support::ready() {
        return;
    }
    let hub = hub(4).await;
    let mut stores = Vec::new();
    for _ in 0..20 {
        stores.push(hub.store(fresh_key()).await.unwrap());
    }
    let mut events = stores[0].events();
    // 20 tenants × 5 Sessions, all at once.
    let commits = stores.iter().flat_map(|store| {
        (0..5).map(move |_| async move { (store.agent().clone(), create(store).await) })
    });
    let created: Vec<(AgentKey, SessionId)> = futures::future::join_all(commits).await;
    let agents: Vec<String> = stores.iter().map(|s| s.agent().to_string()).collect();
    let mut conn = connect().await;
    let per_tenant: Vec<i64> = sqlx::query_scalar(
        "SELECT count(*) FROM sessions WHERE agent_id = ANY($1) GROUP BY agent_id",
    )
    .bind(&agents)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(per_tenant, vec![5; 20], "every commit landed");
    // Rows a transaction wrote share its xmin: one group held several tenants.
    let mixed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT xmin::text FROM sessions WHERE agent_id = ANY($1) \
         GROUP BY xmin::text HAVING count(DISTINCT agent_id) > 1) AS groups",
    )
    .bind(&agents)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(mixed > 0, "no transaction held two tenants' commits");

    // Each tenant sees its own Sessions and none of another's.
    for store in &stores {
        for (agent, session) in &created {
            let found = store.load_session(session).await.unwrap().is_some();
            assert_eq!(found, agent == store.agent(), "{agent} {session}");
            if agent != store.agent() {
                assert_eq!(store.claim(session).await.unwrap(), Claim::Missing);
            }
        }
    }
    // The one listener hands each tenant only its own announcements: every tenant
    // gives a lease back, and the first hears its own release alone.
    let releases = stores.iter().map(|store| async move {
        let session = create(store).await;
        let token = held(store.claim(&session).await.unwrap());
        store.release(&session, token, Release::Idle).await.unwrap();
        session
    });
    let released = futures::future::join_all(releases).await;
    let mut heard = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await.unwrap() {
                OwnershipEvent::Released { session_id } => {
                    let mine = session_id == released[0];
                    heard.push(session_id);
                    if mine {
                        return;
                    }
                }
                OwnershipEvent::Resync => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .expect("the tenant hears its release");
    assert_eq!(heard, vec![released[0].clone()], "only its own");
    drop(events);

    // A stale owner of one tenant fails alone in a group of others' commits.
    let (fenced, others) = stores.split_first().unwrap();
    let lost = create(fenced).await;
    let stale = held(fenced.claim(&lost).await.unwrap());
    let fresh = held(fenced.claim(&lost).await.unwrap());
    assert!(fresh > stale);
    let mut commits = vec![fenced.commit(vec![Op::Fence {
        session_id: lost.clone(),
        token: stale,
    }])];
    let mut sessions = Vec::new();
    for store in others {
        let session = session_id();
        sessions.push((store, session.clone()));
        commits.push(store.commit(vec![Op::CreateSession {
            header: SessionHeader::new(session, 1),
            request_id: None,
        }]));
    }
    let results = futures::future::join_all(commits).await;
    assert!(
        matches!(results[0], Err(StoreError::Fenced(_))),
        "{:?}",
        results[0]
    );
    for result in &results[1..] {
        assert!(result.is_ok(), "{result:?}");
    }
    for (store, session) in sessions {
        assert!(store.load_session(&session).await.unwrap().is_some());
    }
    hub.close().await;
}

#[tokio::test]
async fn closing_one_tenant_leaves_the_hub_and_the_others_running() {
    if !support::ready() {
        return;
    }
    let hub = hub(3).await;
    let (one, two) = (fresh_key(), fresh_key());
    let leaving = hub.store(one.clone()).await.unwrap();
    let staying = hub.store(two.clone()).await.unwrap();
    assert!(matches!(
        hub.store(two.clone()).await,
        Err(OpenError::TenantOpen(_))
    ));
    let given_back = create(&leaving).await;
    held(leaving.claim(&given_back).await.unwrap());
    let kept = create(&staying).await;
    let token = held(staying.claim(&kept).await.unwrap());
    // Another process of the leaving tenant, to hear its lease given back.
    let other = support::store(&one, Duration::from_secs(60)).await;
    let mut heard = other.events();

    leaving.close().await;
    assert!(matches!(
        leaving.commit(Vec::new()).await,
        Err(StoreError::Closed)
    ));
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(OwnershipEvent::Released { session_id }) = heard.recv().await
                && session_id == given_back
            {
                return;
            }
        }
    })
    .await
    .expect("the lease given back is announced");
    assert_eq!(
        node_rows(&one).await,
        vec![(other.holder().to_owned(), false)]
    );
    held(other.claim(&given_back).await.unwrap());
    assert_eq!(hub.open_tenants(), vec![two.clone()]);

    // The other tenant commits, claims and beats on.
    let beat_before: f64 = heartbeat_of(&two, hub.holder()).await;
    staying
        .commit(vec![Op::Fence {
            session_id: kept.clone(),
            token,
        }])
        .await
        .unwrap();
    let more = create(&staying).await;
    held(staying.claim(&more).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(heartbeat_of(&two, hub.holder()).await > beat_before);
    // And the tenant that left can open again.
    let back = hub.store(one.clone()).await.unwrap();
    assert!(back.load_session(&given_back).await.unwrap().is_some());
    // The old store closed again leaves the new one's row alone.
    leaving.close().await;
    let mut rows = vec![
        (other.holder().to_owned(), false),
        (hub.holder().to_owned(), false),
    ];
    rows.sort();
    assert_eq!(node_rows(&one).await, rows);
    other.close().await;
    hub.close().await;
    assert!(matches!(
        hub.store(fresh_key()).await,
        Err(OpenError::HubClosed)
    ));
    assert!(node_rows(&two).await.is_empty());
}

/// When `holder`'s row of `agent` last beat, in seconds since the epoch.
async fn heartbeat_of(agent: &AgentKey, holder: &str) -> f64 {
    sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM heartbeat_at)::float8 FROM hub_nodes \
         WHERE agent_id = $1 AND holder = $2",
    )
    .bind(agent.as_str())
    .bind(holder)
    .fetch_one(&mut connect().await)
    .await
    .unwrap()
}

#[tokio::test]
async fn draining_the_hub_drains_every_tenant() {
    if !support::ready() {
        return;
    }
    let hub = hub(2).await;
    let (one, two) = (fresh_key(), fresh_key());
    let first = hub.store(one.clone()).await.unwrap();
    let second = hub.store(two.clone()).await.unwrap();
    let (a, b) = (create(&first).await, create(&second).await);
    hub.drain().await.unwrap();
    let late = hub.store(fresh_key()).await.unwrap();
    let c = create(&late).await;
    for (store, session) in [(&first, &a), (&second, &b), (&late, &c)] {
        assert!(
            matches!(store.claim(session).await.unwrap(), Claim::Elsewhere { .. }),
            "{session}"
        );
    }
    assert_eq!(node_rows(&one).await, vec![(hub.holder().to_owned(), true)]);
    assert_eq!(node_rows(&two).await, vec![(hub.holder().to_owned(), true)]);
    assert_eq!(
        node_rows(late.agent()).await,
        vec![(hub.holder().to_owned(), true)]
    );
    hub.close().await;
}

#[tokio::test]
async fn a_killed_process_s_tenants_are_freed_and_reported_by_another_hub() {
    if !support::ready() {
        return;
    }
    let database = support::url().unwrap();
    let (dir, _scratch) = cluster::scratch();
    let keys = [fresh_key(), fresh_key(), fresh_key()];
    let list = keys
        .iter()
        .map(AgentKey::as_str)
        .collect::<Vec<_>>()
        .join(",");
    let mut node = cluster::spawn_node(
        &database,
        &list,
        &dir,
        "tenants",
        cluster::NodeSpec::new(60_000, 1),
    );
    let mut urls = Vec::new();
    for _ in &keys {
        let line = node.lines.recv_timeout(Duration::from_secs(30)).unwrap();
        let mut parts = line.split(' ');
        assert_eq!(parts.next(), Some("TENANT"), "{line}");
        let key = AgentKey::new(parts.next().unwrap()).unwrap();
        urls.push((key, parts.next().unwrap().to_owned()));
    }
    assert_eq!(
        urls.iter().map(|(key, _)| key.clone()).collect::<Vec<_>>(),
        keys.to_vec()
    );
    // A Session of each tenant with a run the process holds (its model never answers).
    let mut held_sessions = Vec::new();
    for (key, url) in &urls {
        let client = cluster::client(url);
        let session = client
            .create_session(RequestId::new("create").unwrap())
            .await
            .unwrap();
        let accepted = client
            .session(session.clone())
            .send(
                PromptText::new("hold until the process dies").unwrap(),
                SendOptions::default(),
            )
            .await
            .unwrap();
        held_sessions.push((key.clone(), session, accepted.command_id));
    }
    let holders = || async {
        let mut conn = connect().await;
        let mut holders = Vec::new();
        for (key, session, _) in &held_sessions {
            let holder: Option<String> = sqlx::query_scalar(
                "SELECT holder FROM session_leases WHERE agent_id = $1 AND session_id = $2",
            )
            .bind(key.as_str())
            .bind(session.as_str())
            .fetch_optional(&mut conn)
            .await
            .unwrap()
            .flatten();
            holders.push(holder);
        }
        holders
    };
    assert_eq!(holders().await, vec![Some(node.holder.clone()); 3]);

    // This process has none of the tenants open: it learns of them from the death.
    let hub = hub(2).await;
    let mut freed = hub.freed();
    node.kill();
    let killed = Instant::now();
    let expected: BTreeSet<AgentKey> = keys.iter().cloned().collect();
    let mut reported = BTreeSet::new();
    tokio::time::timeout(Duration::from_secs(15), async {
        while !expected.is_subset(&reported) {
            reported.insert(freed.recv().await.unwrap());
        }
    })
    .await
    .unwrap_or_else(|_| panic!("reported only {reported:?}"));
    eprintln!(
        "the tenants were reported {:?} after the kill",
        killed.elapsed()
    );
    assert_eq!(holders().await, vec![None; 3], "the leases were freed");

    // The host opens one such tenant; its abandoned run is adopted and settles.
    let (key, session, command) = held_sessions[0].clone();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::new(vec![
        Step::Text("done".to_owned()),
    ])])));
    let store = hub.store(key).await.unwrap();
    let agent = Agent::builder(
        Arc::new(store),
        tools::catalog(Arc::new(TestTools::default())).await,
        support::config(model),
    )
    .open()
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let snapshot = agent
            .session(session.clone())
            .read(ReadOptions::default())
            .await
            .unwrap();
        if snapshot.terminals.iter().any(|t| t.command_id == command) {
            break;
        }
        assert!(Instant::now() < deadline, "the adopted run never settled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    agent.close().await.unwrap();
    hub.close().await;
}

#[tokio::test]
async fn the_upkeep_renews_every_tenant_and_tells_only_the_one_that_lost_a_lease() {
    if !support::ready() {
        return;
    }
    // Leases of 900 ms, renewed every 300 ms for every tenant at once.
    let mut options = HubOptions::new(support::url().unwrap());
    options.lease_ttl = Duration::from_millis(900);
    options.heartbeat = Duration::from_millis(100);
    options.read_connections = 2;
    let hub = PostgresHub::open(options).await.unwrap();
    let mut tenants = Vec::new();
    for _ in 0..10 {
        let store = hub.store(fresh_key()).await.unwrap();
        let session = create(&store).await;
        held(store.claim(&session).await.unwrap());
        let events = store.events();
        tenants.push((store, session, events));
    }
    // Three lease periods: without renewals every lease would have lapsed.
    tokio::time::sleep(Duration::from_millis(2_700)).await;
    for (store, session, _) in &tenants {
        let rival = support::store(store.agent(), Duration::from_secs(60)).await;
        assert!(
            matches!(rival.claim(session).await.unwrap(), Claim::Elsewhere { .. }),
            "{} lapsed",
            store.agent()
        );
        rival.close().await;
    }
    // Another process takes the first tenant's lease over (as its claim of a lapsed
    // lease would: a new holder and the next token; a real lapse here would race the
    // renewal).
    let (agent, lost) = (tenants[0].0.agent().clone(), tenants[0].1.clone());
    sqlx::query(
        "UPDATE session_leases SET holder = 'another-process', token = token + 1 \
         WHERE agent_id = $1 AND session_id = $2",
    )
    .bind(agent.as_str())
    .bind(lost.as_str())
    .execute(&mut connect().await)
    .await
    .unwrap();
    let (_, _, events) = &mut tenants[0];
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(OwnershipEvent::Lost { session_id, .. }) = events.recv().await
                && session_id == lost
            {
                return;
            }
        }
    })
    .await
    .expect("the tenant that lost its lease is told");
    for (store, session, events) in &mut tenants[1..] {
        while let Ok(event) = events.try_recv() {
            assert!(
                !matches!(event, OwnershipEvent::Lost { .. }),
                "{} was told {event:?}",
                store.agent()
            );
        }
        assert!(store.claim(session).await.is_ok());
    }
    hub.close().await;
}

#[tokio::test]
async fn a_broken_upkeep_connection_registers_every_tenant_again_under_its_new_backend() {
    if !support::ready() {
        return;
    }
    let hub = hub(2).await;
    let mut tenants = Vec::new();
    for _ in 0..3 {
        tenants.push(hub.store(fresh_key()).await.unwrap());
    }
    let backend_of = || async {
        let pids: Vec<i32> =
            sqlx::query_scalar("SELECT DISTINCT backend_pid FROM hub_nodes WHERE holder = $1")
                .bind(hub.holder())
                .fetch_all(&mut connect().await)
                .await
                .unwrap();
        pids
    };
    let before = backend_of().await;
    assert_eq!(before.len(), 1, "{before:?}");
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(before[0])
        .fetch_one(&mut connect().await)
        .await
        .unwrap();
    assert!(terminated);
    // Opened on the broken connection: it is replaced, and every row moves with it.
    tenants.push(hub.store(fresh_key()).await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows: Vec<(String, i32, bool)> = sqlx::query_as(
            "SELECT n.agent_id, n.backend_pid, EXISTS (SELECT 1 FROM pg_stat_activity a \
               WHERE a.pid = n.backend_pid AND a.backend_start = n.backend_start) \
             FROM hub_nodes n WHERE n.holder = $1 ORDER BY n.agent_id",
        )
        .bind(hub.holder())
        .fetch_all(&mut connect().await)
        .await
        .unwrap();
        let mut agents: Vec<String> = tenants.iter().map(|t| t.agent().to_string()).collect();
        agents.sort();
        let named: Vec<String> = rows.iter().map(|(agent, _, _)| agent.clone()).collect();
        let moved = rows
            .iter()
            .all(|(_, pid, alive)| *alive && *pid != before[0]);
        if named == agents && moved {
            break;
        }
        assert!(Instant::now() < deadline, "rows {rows:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(backend_of().await.len(), 1);
    // The tenants work on.
    for store in &tenants {
        let session = create(store).await;
        held(store.claim(&session).await.unwrap());
    }
    hub.close().await;
}
