//! The inbox order on PostgreSQL, whose index holds the activity's second rather than
//! its millisecond (migration 0005): needs-you, running, then settled, each newest
//! activity first and the id breaking ties, page after page, across second boundaries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::cmp::Reverse;
use std::time::Duration;

use shiitake_core::store::{ListPosition, Op, SessionHeader, Store, inbox_rank};
use shiitake_protocol::{SessionId, SessionInboxState};
use support::{fresh_key, store};

#[tokio::test]
async fn the_inbox_lists_newest_first_within_a_second_and_across_seconds_page_by_page() {
    if !support::ready() {
        return;
    }
    let key = fresh_key();
    let store = store(&key, Duration::from_secs(60)).await;
    // Activities within one second and on both sides of second boundaries, ties among
    // them, in every inbox rank, created in an order unrelated to the inbox's.
    let activities = [
        5_999, 6_000, 6_999, 6_500, 6_500, 7_000, 5_001, 6_001, 12_345, 6_500,
    ];
    let states = [
        SessionInboxState::Done,
        SessionInboxState::Running,
        SessionInboxState::NeedsYou,
        SessionInboxState::Errored,
    ];
    let mut expected = Vec::new();
    let mut creates = Vec::new();
    for (n, at) in activities.iter().enumerate() {
        for (m, state) in states.iter().enumerate() {
            // Ids not in the order of creation: the tie-break is the id's own.
            let id = SessionId::new(format!("ses_{:02}_{n:02}", (n * 7 + m * 3) % 40)).unwrap();
            let mut header = SessionHeader::new(id.clone(), *at);
            header.inbox_state = *state;
            expected.push((inbox_rank(*state), Reverse(*at), id.clone()));
            creates.push(Op::CreateSession {
                header,
                request_id: None,
            });
        }
    }
    store.commit(creates).await.unwrap();
    expected.sort();
    let expected: Vec<SessionId> = expected.into_iter().map(|(_, _, id)| id).collect();

    let mut listed = Vec::new();
    let mut after: Option<ListPosition> = None;
    loop {
        let page = store.list_sessions(after.as_ref(), 3).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.position.clone());
        listed.extend(page.into_iter().map(|row| row.header.unwrap().id));
    }
    assert_eq!(listed, expected);
}
