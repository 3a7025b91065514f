//! A call waiting for a person when a commit of its Session fails for a reason that
//! passes (a full disk, a lost connection): the owner pauses and resumes its work, and
//! the call it never started is asked about again. It is the same approval, not a
//! second one; allowed, it runs once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use shiitake_conformance::flaky_store::{FlakyStore, pause_owner};
use shiitake_conformance::support::*;
use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, Decision};
use shiitake_ext_testkit::TestAgent;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

#[tokio::test]
async fn a_waiting_approval_outlives_a_pause_for_the_store_as_one_approval() {
    let dir = tempfile::tempdir().unwrap();
    let flaky = Arc::new(std::sync::Mutex::new(None::<Arc<FlakyStore>>));
    let kept = flaky.clone();
    let kit = TestAgent::builder()
        .turns(write_then("paused", "Written."))
        .tools(catalog(dir.path(), false).await)
        .kit_extension(shiitake_ext_approval::extension(ask_policy()).unwrap())
        .wrap_store(move |store| {
            let flaky = FlakyStore::new(store);
            *kept.lock().unwrap() = Some(flaky.clone());
            flaky
        })
        .open()
        .await;
    let store = flaky.lock().unwrap().clone().unwrap();
    let session = kit.session().await;
    let command = send(&session, "Write it").await;
    let first = until_waiting(&session, 1).await;

    // Another commit of the Session fails: the owner pauses, then the store is back.
    pause_owner(&session, &store).await;
    // The resumed run asks about the call again: still the one approval.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let snapshot = session.read(ReadOptions::default()).await.unwrap();
        if snapshot.activity.storage_wait.is_none() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pause never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = waiting(&session).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].approval_id, first[0].approval_id);

    bind_session_extension::<_, ApprovalContract>(&session)
        .call(&AnswerApproval {
            approval_id: first[0].approval_id.clone(),
            request_id: "allow-paused".into(),
            decision: Decision::AllowOnce,
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(notes(dir.path()), ["paused"], "run once");
    assert!(waiting(&session).await.is_empty());
}
