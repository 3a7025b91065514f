//! `create` refuses what would only fail later: a Session that does not exist
//! (`not_found`, nothing committed) and a one-shot `at` in the past (`invalid`). An
//! `at` less than a minute ago is taken as now and fires at once.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use shiitake_conformance::support::*;
use shiitake_core::clock::ManualClock;
use shiitake_ext_almanac::contract::*;
use shiitake_protocol::extension::bind_agent_extension;
use shiitake_protocol::{AgentApi, ErrorCode, SessionApi};

#[tokio::test]
async fn create_refuses_a_missing_session_and_a_past_at() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let clock = ManualClock::new(MONDAY);
    let (agent, _) = open(&path, clock.clone()).await;
    let almanac = bind_agent_extension::<_, AlmanacContract>(&agent);
    let session = new_session(&agent).await;
    let sid = session.session_id().as_str().to_owned();

    // A well-formed id of no Session, one-shot or recurring: not_found, nothing kept.
    let nobody = "ses_01J0000000000000000000NONE";
    let mut recurring = once(nobody, "Check the mail", 0);
    recurring.at = None;
    recurring.cadence = Some("*/10 * * * *".into());
    for create in [once(nobody, "Water the plants", MONDAY + MINUTE), recurring] {
        let refused = almanac.call(&create).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotFound, "{refused}");
        assert!(refused.message.contains(nobody), "{refused}");
    }
    // A deleted Session is refused the same way.
    let doomed = new_session(&agent).await;
    agent.delete_session(doomed.session_id()).await.unwrap();
    let refused = almanac
        .call(&once(doomed.session_id().as_str(), "Gone", MONDAY + MINUTE))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotFound, "{refused}");
    assert!(
        list(&agent).await.is_empty(),
        "a refused create keeps nothing"
    );
    assert_eq!(almanac_timers(&path).await, 0);

    // One past the grace is refused; at the grace it is taken as now.
    let past = almanac
        .call(&once(&sid, "Too late", MONDAY - AT_GRACE_MS - 1))
        .await
        .unwrap_err();
    assert_eq!(past.code, ErrorCode::Invalid, "{past}");
    assert!(past.message.contains("in the past"), "{past}");
    let late = almanac
        .call(&once(&sid, "Just now", MONDAY - AT_GRACE_MS))
        .await
        .unwrap();
    let done = until(&agent, &late.id, |s| s.status == ScheduleStatus::Done).await;
    assert_eq!(done.admitted, 1, "fired without the clock moving");
    let outline = outline(&transcript(&session).await);
    assert_eq!(outline[0], "user: Just now");
    agent.close().await.unwrap();
}
