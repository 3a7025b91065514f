//! Seed 001 keeps Session-scope and Agent-scope extension controls apart, over HTTP:
//! Almanac's Agent-scope `create` sent to a Session route
//! (`POST /v1/sessions/{sid}/extensions/botanical-agent-almanac/create`) is refused and
//! creates nothing; one `requestId` sent on both routes has one effect; a Session-scope
//! command (Plan's `plan`, Loop's `loop`) on the Agent route is refused too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::*;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::clock::SystemClock;
use shiitake_protocol::*;

fn schedules(list: &Value) -> usize {
    list.as_array().expect("list answers an array").len()
}

#[tokio::test]
async fn an_agent_scope_command_on_a_session_route_is_refused_and_one_request_id_has_one_effect() {
    let served = Served::start(vec![("A", Gated::new(vec![], 0))], Arc::new(SystemClock)).await;
    let agent = served.client();
    let session = new_session(&agent).await;
    let almanac = ExtensionId::new("botanical-agent-almanac").unwrap();
    let create = json!({
        "sessionId": session.session_id().as_str(),
        "prompt": "Water the plants.",
        "cadence": "0 9 * * MON",
        "requestId": "water-1",
    });

    let refused = session
        .call_extension(&almanac, "create", create.clone())
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid, "{refused}");
    assert!(refused.message.contains("agent-scope"), "{refused}");
    let list = agent
        .call_extension(&almanac, "list", json!({}))
        .await
        .unwrap();
    assert_eq!(schedules(&list), 0, "the refused command created nothing");

    let created = agent
        .call_extension(&almanac, "create", create.clone())
        .await
        .unwrap();
    let on_session = session
        .call_extension(&almanac, "create", create.clone())
        .await
        .unwrap_err();
    assert_eq!(on_session.code, ErrorCode::Invalid, "{on_session}");
    let again = agent
        .call_extension(&almanac, "create", create)
        .await
        .unwrap();
    assert_eq!(again, created, "the retry answers the first result");
    let list = agent
        .call_extension(&almanac, "list", json!({}))
        .await
        .unwrap();
    assert_eq!(schedules(&list), 1, "one request id, one schedule: {list}");

    let plan = ExtensionId::new("botanical-session-plan").unwrap();
    let refused = agent
        .call_extension(&plan, "plan", json!({"action": "open"}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid, "{refused}");
    assert!(refused.message.contains("session-scope"), "{refused}");
    let looping = ExtensionId::new("botanical-session-loop").unwrap();
    let refused = agent
        .call_extension(
            &looping,
            "loop",
            json!({"action": "start", "prompt": "Water the plants."}),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid, "{refused}");
    assert!(refused.message.contains("session-scope"), "{refused}");
    served.stop().await;
}
