//! Agent state locks on a hub of many tenants: each is held on a connection of the
//! hub's lock pool, so holders still read through the main pool however many lock
//! at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use shiitake_core::store::Store;

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
