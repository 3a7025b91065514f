//! The example extension of `docs/extensions.md`, tested with the kit: its command
//! (idempotent by request id), its tool within the derived schema, its timer on the
//! paused clock.

#![allow(clippy::unwrap_used)]

#[path = "../examples/counter_extension.rs"]
#[allow(dead_code)]
mod counter_extension;

use std::time::Duration;

use counter_extension::{CounterContract, CounterView, extension};
use serde_json::json;
use shiitake_ext_testkit::*;
use shiitake_protocol::extension::ExtensionContract;
use shiitake_protocol::{ExtensionId, SessionApi};

fn id() -> ExtensionId {
    ExtensionId::new(CounterContract::EXTENSION_ID).unwrap()
}

#[tokio::test]
async fn a_command_retried_with_its_request_id_adds_once() {
    let kit = TestAgent::builder()
        .kit_extension(extension().unwrap())
        .open()
        .await;
    let session = kit.session().await;
    let input = json!({"by": 2, "requestId": "r-1"});
    for _ in 0..2 {
        session
            .call_extension(&id(), "add", input.clone())
            .await
            .unwrap();
    }
    let shown = projection::read::<CounterContract>(&session).await;
    assert_eq!(shown, Some(CounterView { count: 2 }));
    assert_eq!(
        session.read(Default::default()).await.unwrap().footer[0].text,
        "counted 2"
    );
}

#[tokio::test]
async fn the_model_calls_the_tool_within_its_schema() {
    let kit = TestAgent::builder()
        .turns(call_tool("counter__increment", json!({"by": 3})))
        .kit_extension(extension().unwrap())
        .open()
        .await;
    let session = kit.session().await;
    assert_eq!(
        run(&session, "count").await.tool_results,
        [ToolOutput::Ok(json!(3))]
    );
    assert!(system_prompts(&kit.model)[0].contains("The counter is at 0."));
}

#[tokio::test]
async fn the_timer_adds_when_the_paused_clock_reaches_it() {
    let clock = paused_clock();
    let kit = TestAgent::builder()
        .clock(clock.clone())
        .kit_extension(extension().unwrap())
        .open()
        .await;
    let session = kit.session().await;
    let later = json!({"by": 5, "inMs": 60_000});
    let now = session.call_extension(&id(), "add", later).await.unwrap();
    assert_eq!(now, json!(0), "nothing added before the timer fires");
    clock.advance(Duration::from_secs(60));
    projection::until::<CounterContract>(&session, |view| view.count == 5).await;
}
