//! Agent state locks on a hub of many tenants: each is held on a connection of the
//! hub's lock pool, so holders still read through the main pool however many lock
//! at once; and a settle takes the lock only for a settled hook that uses Agent state.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shiitake_conformance::{TestTools, tools};
use shiitake_core::Agent;
use shiitake_core::extension::{
    Extension, ExtensionDefinition, Grant, Grants, HookError, Settled, StateScope, Tx,
};
use shiitake_core::store::Store;
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{
    AgentApi, ExtensionId, ExtensionRunState, PromptText, ReadOptions, RequestId, SendOptions,
    SessionApi,
};

use crate::support::{self, create, fresh_key, hub};

#[tokio::test]
async fn many_tenants_holding_their_agent_locks_still_read() {
    if !support::ready() {
        return;
    }
    // More tenants than the pool has connections take their Agent state lock at once
    // and, holding it, read (as a settle's hooks reload the Agent's rows). A lock held
    // on a pool connection left no connection to read with: every holder waited for the
    // pool's acquire timeout (30 s) and core then went on without the lock.
    let hub = hub(2).await;
    let mut stores = Vec::new();
    for _ in 0..12 {
        let store = hub.store(fresh_key()).await.unwrap();
        let session = create(&store).await;
        stores.push((store, session));
    }
    let started = Instant::now();
    let work = stores.iter().map(|(store, session)| async move {
        let ownership = store.ownership().unwrap();
        let lock = ownership.lock_agent_state().await.unwrap();
        // Each holds its lock a while before it reads: on the old code the holders at
        // once took both connections of the read pool and waited for a third.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let read = store.load_session(session).await.unwrap();
        drop(lock);
        read.is_some()
    });
    let read = tokio::time::timeout(Duration::from_secs(20), futures::future::join_all(work))
        .await
        .expect("holders of Agent locks could not read within 20 s");
    assert!(read.into_iter().all(|found| found));
    eprintln!("12 tenants locked and read in {:?}", started.elapsed());
    for (store, _) in stores {
        store.close().await;
    }
    hub.close().await;
}

/// An extension that keeps Agent state (for commands and timers) and says whether its
/// settled hook uses it; `reads` makes the hook read it anyway.
struct Keeper {
    definition: ExtensionDefinition,
    uses: bool,
    reads: bool,
}

impl Extension for Keeper {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn on_settled(&self, tx: &mut Tx<'_>, _settled: &Settled) -> Result<(), HookError> {
        if self.reads {
            tx.scan::<Value>(StateScope::Agent, "notes")?;
        }
        Ok(())
    }

    fn settled_uses_agent_state(&self) -> bool {
        self.uses
    }
}

/// A Session's run on one process while another process of the same Agent holds the
/// Agent state lock: whether it settled within 2 s (and then, once the lock is let
/// go, that it settles), and the extension's stop reason if it was stopped.
async fn settles_under_anothers_lock(uses: bool, reads: bool) -> (bool, Option<String>) {
    let key = fresh_key();
    let (here, there) = (hub(2).await, hub(2).await);
    let other = there.store(key.clone()).await.unwrap();
    let keeper = Keeper {
        definition: ExtensionDefinition {
            id: ExtensionId::new("example-keeper").unwrap(),
            namespace: "keeper".into(),
            scopes: vec![StateScope::Agent],
            schema_version: 1,
            migrations: Vec::new(),
            configuration: json!({}),
        },
        uses,
        reads,
    };
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::new(vec![
        Step::Text("done".to_owned()),
    ])])));
    let agent = Agent::builder(
        Arc::new(here.store(key).await.unwrap()),
        tools::catalog(Arc::new(TestTools::default())).await,
        support::config(model),
    )
    .extension(keeper, [Grant::State].into_iter().collect::<Grants>())
    .open()
    .await
    .unwrap();
    let lock = other.ownership().unwrap().lock_agent_state().await.unwrap();
    let session = agent
        .create_session(RequestId::new("create").unwrap())
        .await
        .unwrap();
    let handle = agent.session(session);
    let accepted = handle
        .send(PromptText::new("hello").unwrap(), SendOptions::default())
        .await
        .unwrap();
    let settled = || async {
        let snapshot = handle.read(ReadOptions::default()).await.unwrap();
        snapshot
            .terminals
            .iter()
            .any(|terminal| terminal.command_id == accepted.command_id)
    };
    // A read waits for the owner, which waits for the lock while it settles: each
    // read gets what is left of the 2 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let mut under_lock = false;
    while let Ok(done) = tokio::time::timeout_at(deadline, settled()).await {
        if done {
            under_lock = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(lock);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !settled().await {
        assert!(Instant::now() < deadline, "the run never settled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopped =
        agent
            .list_extensions()
            .await
            .unwrap()
            .into_iter()
            .find_map(|status| match status.state {
                ExtensionRunState::Stopped { reason } => Some(reason),
                _ => None,
            });
    agent.close().await.unwrap();
    other.close().await;
    here.close().await;
    there.close().await;
    (under_lock, stopped)
}

#[tokio::test]
async fn a_settle_takes_the_agent_lock_only_for_a_settled_hook_that_uses_agent_state() {
    if !support::ready() {
        return;
    }
    // Said so (the default): the settle waits for the other process's lock.
    let (settled, stopped) = settles_under_anothers_lock(true, true).await;
    assert!(!settled, "the settle did not wait for the Agent lock");
    assert_eq!(stopped, None);
    // Said not: the settle goes through while the lock is held elsewhere.
    let (settled, stopped) = settles_under_anothers_lock(false, false).await;
    assert!(settled, "the settle waited for a lock it does not need");
    assert_eq!(stopped, None);
    // Said not, and read it anyway: held to its word, the extension stops.
    let (settled, stopped) = settles_under_anothers_lock(false, true).await;
    assert!(settled);
    let reason = stopped.expect("the extension was not stopped");
    assert!(
        reason.contains("settled_uses_agent_state"),
        "stopped for {reason}"
    );
}
