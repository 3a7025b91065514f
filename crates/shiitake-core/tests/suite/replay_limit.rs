//! Replay after a cursor is bounded: 1,000 entries are replayed, one more is a reset.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use futures::StreamExt;
use shiitake_conformance::Fixture;
use shiitake_conformance::support::*;
use shiitake_model::Script;
use shiitake_protocol::*;

const REPLAY_LIMIT: usize = 1000; // docs/core.md

async fn first_frame(session: &impl SessionApi, after: &Cursor) -> SessionFrame {
    let options = SubscribeOptions {
        include_sandbox_failures: None,
        after: Some(after.clone()),
    };
    session
        .subscribe(options)
        .await
        .unwrap()
        .next()
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn replay_is_bounded_at_its_edge() {
    let fixture = harness::Local::start(Script::new(vec![])).await;
    let session = new_session(fixture.agent()).await;
    session
        .operator(
            request("line-start"),
            OperatorAuthor::Operator,
            text("start"),
        )
        .await
        .unwrap();
    let cursor = session
        .read(ReadOptions::default())
        .await
        .unwrap()
        .cursor
        .unwrap();
    for n in 0..REPLAY_LIMIT {
        session
            .operator(
                request(&format!("line-{n}")),
                OperatorAuthor::Party,
                text("more"),
            )
            .await
            .unwrap();
    }
    let SessionFrame::Update(replay) = first_frame(&session, &cursor).await else {
        panic!("exactly the limit is replayed");
    };
    assert_eq!(replay.delivery, FrameDelivery::Replay);
    assert_eq!(replay.messages.len(), REPLAY_LIMIT);

    session
        .operator(
            request("line-over"),
            OperatorAuthor::Party,
            text("one more"),
        )
        .await
        .unwrap();
    let SessionFrame::Reset(reset) = first_frame(&session, &cursor).await else {
        panic!("one past the limit is a reset");
    };
    assert_eq!(reset.reason, ResetReason::HistoryUnavailable);
    assert_eq!(
        reset.baseline.messages.len(),
        PageLimit::DEFAULT.get() as usize
    );
}
