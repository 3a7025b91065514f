//! The extensions of the Local roster driven over HTTP as a client would: Almanac's
//! `create` refuses a Session that does not exist (`not_found`) and a one-shot `at` in
//! the past (`invalid`) at once, and `GET /v1/catalogs` has the shape `docs/http.md`
//! spells out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::*;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::clock::{SystemClock, now_ms};
use shiitake_protocol::*;

#[tokio::test]
async fn almanac_create_refuses_a_missing_session_and_a_past_time_over_http() {
    let served = Served::start(vec![("A", Gated::new(vec![], 0))], Arc::new(SystemClock)).await;
    let agent = served.client();
    let session = new_session(&agent).await;
    let almanac = ExtensionId::new("botanical-agent-almanac").unwrap();
    let create = |session_id: &str, at: u64| json!({"sessionId": session_id, "prompt": "Water the plants.", "at": at});
    let later = now_ms() + 3_600_000;

    let missing = agent
        .call_extension(
            &almanac,
            "create",
            create("ses_01J000000000000000000GONE", later),
        )
        .await
        .unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound, "{missing}");
    let past = agent
        .call_extension(
            &almanac,
            "create",
            create(session.session_id().as_str(), now_ms() - 3_600_000),
        )
        .await
        .unwrap_err();
    assert_eq!(past.code, ErrorCode::Invalid, "{past}");
    assert!(past.message.contains("in the past"), "{past}");
    let list = agent
        .call_extension(&almanac, "list", json!({}))
        .await
        .unwrap();
    assert_eq!(list, json!([]), "the refused creates kept nothing");
    let made = agent
        .call_extension(
            &almanac,
            "create",
            create(session.session_id().as_str(), later),
        )
        .await
        .unwrap();
    assert_eq!(made["status"], "active");
}

#[tokio::test]
async fn the_catalogs_route_answers_the_documented_shape() {
    let served = Served::start(vec![("A", Gated::new(vec![], 0))], Arc::new(SystemClock)).await;
    let agent = served.client();
    let catalogs = serde_json::to_value(agent.catalogs().await.unwrap()).unwrap();
    let object = catalogs.as_object().unwrap();
    assert_eq!(object.keys().collect::<Vec<_>>(), ["catalogs"]);
    let entries = catalogs["catalogs"].as_array().unwrap();
    assert!(!entries.is_empty());
    for entry in entries {
        let mut keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["catalog", "state"], "{entry}");
        assert_eq!(entry["state"], json!({"status": "running"}));
        let catalog = &entry["catalog"];
        assert_eq!(catalog["format"], "whistle.catalog/v1");
        assert!(catalog["extensionId"].is_string(), "{catalog}");
        for command in catalog["commands"].as_array().unwrap() {
            for field in ["name", "summary", "call"] {
                assert!(command[field].is_string(), "{field} of {command}");
            }
            assert!(matches!(
                command["scope"].as_str(),
                Some("session" | "agent")
            ));
            assert!(command["arguments"].is_array() && command["steps"].is_array());
            assert!(command.get("flow").is_none_or(Value::is_string));
        }
    }
    // The documented example: `/answer`, a server-owned flow of the question extension.
    let question = entries
        .iter()
        .find(|e| e["catalog"]["extensionId"] == "botanical-session-question")
        .unwrap();
    assert_eq!(
        question["catalog"]["commands"],
        json!([{"name": "answer", "summary": "Answer a question the agent asked",
                "scope": "session", "call": "answer", "arguments": [], "steps": [],
                "flow": "answer_flow"}])
    );
}
