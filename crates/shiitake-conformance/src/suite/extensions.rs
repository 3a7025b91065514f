//! Extensions through the API: the catalog of human command flows, a flow walked to
//! its command with a request id, and the command's idempotency.

use serde_json::{Value, json};
use shiitake_model::Script;
use shiitake_protocol::catalog::{FlowStep, SessionCatalogs};
use shiitake_protocol::{
    AgentApi, ErrorCode, ExtensionId, ExtensionRunState, ExtensionSlotV0, ReadOptions, SessionApi,
};

use crate::Fixture;
use crate::extension::TALLY_ID;
use crate::support::new_session;

fn tally() -> ExtensionId {
    ExtensionId::new(TALLY_ID).expect("a valid id")
}

/// The catalogs name the flow, its command and the extension's state.
pub async fn catalogs_list_the_human_command_flows<F: Fixture>() {
    let fixture = F::start(Script::new(vec![])).await;
    let catalogs: SessionCatalogs = fixture.agent().catalogs().await.expect("catalogs");
    let entry = catalogs
        .catalogs
        .iter()
        .find(|entry| entry.catalog.extension_id == tally())
        .expect("the tally's catalog");
    assert_eq!(entry.state, ExtensionRunState::Running);
    let command = &entry.catalog.commands[0];
    assert_eq!(
        (
            command.name.as_str(),
            command.call.as_str(),
            command.flow.as_deref()
        ),
        ("tally", "add", Some("add_flow"))
    );
    let statuses = fixture.agent().list_extensions().await.expect("extensions");
    assert!(statuses.iter().any(|status| status.extension_id == tally()));
}

/// A client walks the server-owned flow, then runs its command with a request id:
/// an exact retry answers the first result, a changed one is a conflict.
pub async fn a_flow_runs_its_command_with_a_request_id<F: Fixture>() {
    let fixture = F::start(Script::new(vec![])).await;
    let session = new_session(fixture.agent()).await;
    let step = |input: Value| {
        let session = &session;
        async move {
            let step = session
                .call_extension(&tally(), "add_flow", input)
                .await
                .expect("the flow answers");
            serde_json::from_value::<FlowStep>(step).expect("a flow step")
        }
    };
    let FlowStep::Ask { argument, .. } = step(json!({})).await else {
        panic!("the flow asks first");
    };
    assert_eq!(argument, "by");
    assert!(matches!(
        step(json!({"by": "many"})).await,
        FlowStep::Unavailable { .. }
    ));
    let FlowStep::Confirm { input, .. } = step(json!({"by": "3"})).await else {
        panic!("then it confirms");
    };
    let mut call = input;
    call["requestId"] = json!("tally-1");
    let added = session
        .call_extension(&tally(), "add", call.clone())
        .await
        .expect("added");
    assert_eq!(added, json!(3));
    let retried = session
        .call_extension(&tally(), "add", call.clone())
        .await
        .expect("retried");
    assert_eq!(retried, json!(3), "an exact retry answers the first result");
    call["by"] = json!(4);
    let changed = session.call_extension(&tally(), "add", call).await;
    assert_eq!(changed.expect_err("a conflict").code, ErrorCode::Conflict);
    let snapshot = session.read(ReadOptions::default()).await.expect("read");
    assert_eq!(
        snapshot.extensions.get(&tally()),
        Some(&ExtensionSlotV0::Running {
            value: json!({"count": 3})
        })
    );
}

/// The tools a run would see: each with its source and replay safety; for a small
/// model the compact set, the rest left out as not offered.
pub async fn the_tools_list_says_what_a_run_sees<F: Fixture>() {
    use shiitake_protocol::{LeftOutReason, ReplaySafety, ToolProfile, ToolSource};
    let fixture = F::start(Script::new(vec![])).await;
    let full = fixture
        .agent()
        .tools(ToolProfile::Full)
        .await
        .expect("tools");
    assert_eq!(full.profile, ToolProfile::Full);
    let tool = |name: &str| {
        full.tools
            .iter()
            .find(|tool| tool.name == name)
            .unwrap_or_else(|| panic!("no {name} in {full:?}"))
    };
    let (echo, slow) = (tool("test__echo"), tool("test__slow"));
    assert_eq!(
        (
            echo.path.as_str(),
            echo.source,
            echo.replay,
            &echo.extension
        ),
        ("test.echo", ToolSource::Host, ReplaySafety::Safe, &None)
    );
    assert_eq!(slow.replay, ReplaySafety::Unsafe);
    assert!(echo.schema.is_object(), "{:?}", echo.schema);
    let small = fixture
        .agent()
        .tools(ToolProfile::Small)
        .await
        .expect("tools");
    assert!(!small.tools.iter().any(|tool| tool.name == "test__echo"));
    let left = small
        .left_out
        .iter()
        .find(|left| left.name == "test")
        .unwrap_or_else(|| panic!("test left out in {small:?}"));
    assert_eq!(left.reason, LeftOutReason::NotOffered);
    assert_eq!(left.tools, vec!["test__echo", "test__slow"]);
}
