//! Every fixture decodes into its type and re-encodes byte for byte.
//!
//! A renamed field, a changed discriminator or an optional field that stops
//! being omitted changes the bytes, so this test fails on any wire change.

#![allow(clippy::unwrap_used)] // test support code outside #[test] functions

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use shiitake_protocol::catalog::{Catalog, FlowStep};
use shiitake_protocol::message::{AssistantMessage, Usage, UsageSource};
use shiitake_protocol::*;

fn fixture_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Decodes and re-encodes every file of one fixture directory, which must hold at least one.
fn round_trip_dir<T: DeserializeOwned + Serialize>(dir: &str) {
    let path = fixture_root().join(dir);
    let mut files: Vec<_> = fs::read_dir(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|file| file.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{dir} holds no fixture");
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let decoded: T = serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("{} does not decode: {error}", file.display()));
        let encoded = serde_json::to_string_pretty(&decoded).unwrap() + "\n";
        assert_eq!(
            encoded,
            text,
            "{} does not re-encode byte for byte",
            file.display()
        );
    }
}

macro_rules! fixtures {
    ($($dir:literal => $ty:ty),+ $(,)?) => {
        const COVERED: &[&str] = &[$($dir),+];

        #[test]
        fn every_fixture_round_trips_byte_for_byte() {
            $( round_trip_dir::<$ty>($dir); )+
        }
    };
}

fixtures! {
    "message" => Message,
    "accepted" => Accepted,
    "too_late" => TooLate,
    "cancel_result" => CancelResult,
    "forked_session" => ForkedSession,
    "session_command" => SessionCommand,
    "send_options" => SendOptions,
    "cancel_input" => CancelInput,
    "prompt_delivery" => PromptDelivery,
    "session_message" => SessionMessage,
    "session_terminal" => SessionTerminal,
    "session_activity" => SessionActivity,
    "session_progress" => SessionProgress,
    "session_pending_prompt" => SessionPendingPrompt,
    "session_pending_prompts" => SessionPendingPrompts,
    "session_compaction_marker" => SessionCompactionMarker,
    "sandbox_failure_event" => SandboxFailureEvent,
    "session_snapshot" => SessionSnapshot,
    "session_frame" => SessionFrame,
    "subscribe_options" => SubscribeOptions,
    "read_options" => ReadOptions,
    "session_inbox_state" => SessionInboxState,
    "session_summary" => SessionSummary,
    "session_summary_row" => SessionSummaryRow,
    "session_summary_page" => SessionSummaryPage,
    "model_preference" => ModelPreference,
    "extension_slot" => ExtensionSlotV0,
    "extension_view" => ExtensionViewV0<Value>,
    "extension_status" => ExtensionStatusV0,
    "shiitake_error" => ShiitakeError,
    "catalog" => Catalog,
    "flow_step" => FlowStep,
}

#[test]
fn every_fixture_directory_names_a_type() {
    let on_disk: BTreeSet<String> = fs::read_dir(fixture_root())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let covered: BTreeSet<String> = COVERED.iter().map(|dir| (*dir).to_owned()).collect();
    assert_eq!(on_disk, covered);
}

#[test]
fn unknown_message_fields_survive_a_round_trip() {
    let text =
        fs::read_to_string(fixture_root().join("message/assistant_unknown_fields.json")).unwrap();
    let Message::Assistant(message) = serde_json::from_str(&text).unwrap() else {
        panic!("fixture is an assistant message");
    };
    assert_eq!(
        message.extra.get("responseId"),
        Some(&Value::from("resp_123"))
    );
    assert_eq!(
        message.usage.extra.get("futureUsage"),
        Some(&Value::from(3))
    );
}

#[test]
fn usage_without_a_source_is_reported_and_unknown_usage_says_so() {
    let read = |file: &str| -> AssistantMessage {
        let text = fs::read_to_string(fixture_root().join("message").join(file)).unwrap();
        match serde_json::from_str(&text).unwrap() {
            Message::Assistant(message) => message,
            other => panic!("{file} is not an assistant message: {other:?}"),
        }
    };
    // A Pi message of another implementation has no `source`: its counts are reported.
    let reported = read("assistant_error.json");
    assert_eq!(reported.usage.source, UsageSource::Reported);
    assert!(reported.usage.is_known());
    let unknown = read("assistant_usage_unknown.json");
    assert_eq!(unknown.usage, Usage::unknown());
    assert!(!unknown.usage.is_known());
    // Reported usage writes no `source` field.
    let written = serde_json::to_value(&reported.usage).unwrap();
    assert!(written.get("source").is_none(), "{written}");
}

#[test]
fn a_changed_discriminator_is_refused() {
    let cases = [
        (
            r#"{"type":"prompt","requestId":"r","text":"hi","delivery":"follow_up"}"#,
            "delivery",
        ),
        (
            r#"{"type":"Prompt","requestId":"r","text":"hi","delivery":"steer"}"#,
            "type",
        ),
        (r#"{"type":"cancel","command_id":"c"}"#, "field name"),
    ];
    for (json, what) in cases {
        assert!(
            serde_json::from_str::<SessionCommand>(json).is_err(),
            "{what}: {json}"
        );
    }
    assert!(serde_json::from_str::<SessionFrame>(r#"{"kind":"heartbeat"}"#).is_err());
    assert!(serde_json::from_str::<CancelResult>(r#"{"status":"late","commandId":"c"}"#).is_err());
}

#[test]
fn accepted_and_too_late_refuse_each_other() {
    assert!(parse_accepted(r#"{"status":"too_late","commandId":"c"}"#).is_err());
    assert!(serde_json::from_str::<TooLate>(r#"{"status":"accepted","commandId":"c"}"#).is_err());
}

#[test]
fn an_unavailable_row_carries_nothing_else() {
    let json = r#"{"sessionId":"s","state":"unavailable","title":"x"}"#;
    assert!(serde_json::from_str::<SessionSummaryRow>(json).is_err());
    let json = r#"{"sessionId":"s","state":"done","title":"x","createdAt":1}"#;
    assert!(
        serde_json::from_str::<SessionSummaryRow>(json).is_err(),
        "lastActivityAt missing"
    );
}

/// What each fixture under a `refused/` folder is refused for: the grammar of seed 001
/// refuses it, so the decoder (and every `parse_*` and client on it) must too.
const REFUSED: &[(&str, &str)] = &[
    (
        "session_terminal/refused/diagnostic_missing.json",
        "missing field `diagnostic`",
    ),
    (
        "session_snapshot/refused/terminal_without_diagnostic.json",
        "missing field `diagnostic`",
    ),
    (
        "session_summary_page/refused/next_null.json",
        "`next` is null",
    ),
];

/// The refusal of the fixture `file` by the public codec of its type, as text.
fn refusal(file: &str) -> String {
    let text = fs::read_to_string(fixture_root().join(file)).unwrap();
    let refused = match file.split('/').next().unwrap() {
        "session_terminal" => serde_json::from_str::<SessionTerminal>(&text)
            .err()
            .map(|error| error.to_string()),
        "session_snapshot" => parse_session_snapshot(&text)
            .err()
            .map(|error| error.to_string()),
        "session_summary_page" => parse_session_summary_page(&text)
            .err()
            .map(|error| error.to_string()),
        other => panic!("no codec for refused fixtures of {other}"),
    };
    refused.unwrap_or_else(|| panic!("{file} decodes, but its grammar refuses it"))
}

#[test]
fn what_the_grammar_refuses_does_not_decode() {
    for (file, why) in REFUSED {
        let refused = refusal(file);
        assert!(refused.contains(why), "{file}: {refused}");
    }
    // Every refused fixture on disk is in the table.
    let mut on_disk = BTreeSet::new();
    for dir in COVERED {
        let refused = fixture_root().join(dir).join("refused");
        if let Ok(entries) = fs::read_dir(&refused) {
            for entry in entries {
                let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                on_disk.insert(format!("{dir}/refused/{name}"));
            }
        }
    }
    let listed: BTreeSet<String> = REFUSED.iter().map(|(file, _)| (*file).to_owned()).collect();
    assert_eq!(on_disk, listed);
}

#[test]
fn the_strict_keys_still_take_what_the_grammar_allows() {
    // `diagnostic` may be null or a string; `next` may be absent or a cursor.
    let terminal = r#"{"commandId":"c","outcome":"failed","sequence":1,"diagnostic":"x"}"#;
    let decoded: SessionTerminal = serde_json::from_str(terminal).unwrap();
    assert_eq!(decoded.diagnostic.as_deref(), Some("x"));
    let page = parse_session_summary_page(r#"{"sessions":[],"next":"p1"}"#).unwrap();
    assert_eq!(
        page.next.map(|next| next.as_str().to_owned()),
        Some("p1".into())
    );
    assert_eq!(
        parse_session_summary_page(r#"{"sessions":[]}"#)
            .unwrap()
            .next,
        None
    );
    // What the server writes for a terminal without a diagnostic keeps the key.
    let written = serde_json::to_string(&SessionTerminal {
        diagnostic: None,
        ..decoded
    })
    .unwrap();
    assert!(written.ends_with(r#""diagnostic":null}"#), "{written}");
}
