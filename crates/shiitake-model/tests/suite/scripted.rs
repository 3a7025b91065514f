//! The scripted model's own features: echo, cycling, exhaustion, recording,
//! loading from a file, chunking and mid-stream delays.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::time::Duration;

use serde_json::json;
use shiitake_model::scripted::ScriptFailure;
use shiitake_model::{
    AssistantEvent, Model, ModelEnv, ModelErrorKind, ModelOptions, Recording, Script,
    ScriptedModel, Step, Turn, select,
};
use tokio_util::sync::CancellationToken;

use crate::support::check::{ask, call};

#[tokio::test]
async fn echo_repeats_the_last_user_message() {
    let model = ScriptedModel::new(Script::new(vec![Turn::echo()]));
    let (_, message) = call(&model, ask("ping 42"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.text(), "ping 42");
}

#[tokio::test]
async fn turns_run_in_call_order_and_exhaustion_is_a_clear_permanent_error() {
    let model = ScriptedModel::new(Script::new(vec![Turn::text("one"), Turn::text("two")]));
    for expected in ["one", "two"] {
        let (_, message) = call(&model, ask("x"), ModelOptions::default())
            .await
            .unwrap();
        assert_eq!(message.text(), expected);
    }
    let error = model
        .stream(ask("x"), ModelOptions::default(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind(), ModelErrorKind::ScriptExhausted);
    assert!(!error.retryable());
    assert!(
        error.message().contains("2 turn(s)") && error.message().contains("call 3"),
        "{error}"
    );
}

#[tokio::test]
async fn a_cycling_script_never_runs_out() {
    let model = ScriptedModel::new(Script::new(vec![Turn::text("a"), Turn::echo()]).cycle(true));
    let mut texts = Vec::new();
    for n in 0..5 {
        let (_, message) = call(&model, ask(&format!("m{n}")), ModelOptions::default())
            .await
            .unwrap();
        texts.push(message.text());
    }
    assert_eq!(texts, ["a", "m1", "a", "m3", "a"]);
    assert_eq!(model.calls(), 5);
}

#[tokio::test]
async fn every_request_is_recorded_even_failed_ones() {
    let failure = Step::Fail(ScriptFailure {
        status: 503,
        message: Some("busy".into()),
        retry_after_ms: Some(10),
    });
    let model = ScriptedModel::new(Script::new(vec![
        Turn::new(vec![failure]),
        Turn::text("ok"),
    ]));
    let error = model
        .stream(
            ask("first"),
            ModelOptions::default(),
            CancellationToken::new(),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(
        (error.message(), error.retry_after()),
        ("busy", Some(Duration::from_millis(10)))
    );
    call(&model, ask("second"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(model.requests(), vec![ask("first"), ask("second")]);
}

/// Makes `count` calls named `m0`, `m1`, ... and returns what was recorded.
async fn recorded_after(recording: Recording, count: usize) -> Vec<shiitake_model::ModelContext> {
    let model = ScriptedModel::new(Script::new(vec![Turn::text("ok")]).cycle(true))
        .with_recording(recording);
    for n in 0..count {
        call(&model, ask(&format!("m{n}")), ModelOptions::default())
            .await
            .unwrap();
    }
    assert_eq!(model.calls(), count);
    model.requests()
}

#[tokio::test]
async fn recording_keeps_the_most_recent_contexts_up_to_its_bound() {
    // At the bound every call is kept; one past it the oldest goes.
    assert_eq!(
        recorded_after(Recording::Last(2), 2).await,
        vec![ask("m0"), ask("m1")]
    );
    assert_eq!(
        recorded_after(Recording::Last(2), 3).await,
        vec![ask("m1"), ask("m2")]
    );
    assert_eq!(recorded_after(Recording::Last(0), 3).await, vec![]);
    assert_eq!(recorded_after(Recording::Off, 3).await, vec![]);
    assert_eq!(
        Recording::default(),
        Recording::Last(shiitake_model::scripted::DEFAULT_RECORDED)
    );
}

#[tokio::test]
async fn text_and_arguments_arrive_in_chunks() {
    let turn = Turn::new(vec![
        Step::Text("abcdefghijklmnopqrstuvwxyz".into()),
        Step::tool_call("read", json!({"path": "a/long/path/name.txt"})),
    ]);
    let model = ScriptedModel::new(Script::new(vec![turn]));
    let (events, message) = call(&model, ask("x"), ModelOptions::default())
        .await
        .unwrap();
    let text_deltas = events
        .iter()
        .filter(|e| matches!(e, AssistantEvent::TextDelta { .. }))
        .count();
    let arg_deltas = events
        .iter()
        .filter(|e| matches!(e, AssistantEvent::ToolcallDelta { .. }))
        .count();
    assert_eq!(text_deltas, 4, "26 characters in chunks of 8");
    assert!(arg_deltas > 1);
    let ids: Vec<_> = message.tool_calls().map(|c| c.id.clone()).collect();
    assert_eq!(ids, ["call_1_1"], "deterministic ids");
}

#[tokio::test]
async fn a_script_file_is_selected_by_spec() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    write!(
        file,
        r#"{{"model": "bench", "chunk_chars": 2, "turns": [
            {{"steps": [{{"thinking": "plan"}}, {{"delay_ms": 5}}, {{"text": "hi there"}}]}}
        ]}}"#
    )
    .unwrap();
    let spec = format!("scripted:{}", file.path().display());
    let model = select(&spec, &ModelEnv::default()).unwrap();
    assert_eq!(model.describe().model, "bench");
    let (events, message) = call(&*model, ask("x"), ModelOptions::default())
        .await
        .unwrap();
    assert_eq!(message.text(), "hi there");
    let deltas = events
        .iter()
        .filter(|e| matches!(e, AssistantEvent::TextDelta { .. }))
        .count();
    assert_eq!(deltas, 4);
}

#[tokio::test]
async fn a_bad_script_file_names_the_problem() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    write!(
        file,
        r#"{{"turns": [{{"steps": [{{"text": "a"}}, {{"fail": {{"status": 503}}}}]}}]}}"#
    )
    .unwrap();
    let spec = format!("scripted:{}", file.path().display());
    let error = select(&spec, &ModelEnv::default())
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("turn 1, step 2"), "{error}");
}

#[tokio::test]
async fn models_built_from_one_script_with_a_place_directory_play_on_where_the_last_left_off() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns": [{"steps": [{"text": "one"}]}, {"steps": [{"text": "two"}]},
                      {"steps": [{"tool_call": {"name": "t", "arguments": {}}}]}]}"#,
    )
    .unwrap();
    let spec = format!("scripted:{}", script.display());
    let places = ModelEnv {
        scripted_places: Some(dir.path().join("places")),
        ..ModelEnv::default()
    };
    // A host resolves the spec per run: each model plays the next turn of the script.
    let mut texts = Vec::new();
    for _ in 0..2 {
        let run = select(&spec, &places).unwrap();
        let (_, message) = call(&*run, ask("x"), ModelOptions::default())
            .await
            .unwrap();
        texts.push(message.text());
    }
    assert_eq!(texts, ["one", "two"]);
    let third = select(&spec, &places).unwrap();
    let (_, message) = call(&*third, ask("x"), ModelOptions::default())
        .await
        .unwrap();
    let ids: Vec<_> = message.tool_calls().map(|c| c.id.clone()).collect();
    assert_eq!(ids, ["call_3_1"], "call numbers go on with the place");
    let error = select(&spec, &places)
        .unwrap()
        .stream(ask("x"), ModelOptions::default(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind(), ModelErrorKind::ScriptExhausted);
    assert!(error.message().contains("call 4"), "{error}");

    // Without a place directory each model starts at the first turn.
    for _ in 0..2 {
        let fresh = select(&spec, &ModelEnv::default()).unwrap();
        let (_, message) = call(&*fresh, ask("x"), ModelOptions::default())
            .await
            .unwrap();
        assert_eq!(message.text(), "one");
    }
}

#[tokio::test]
async fn a_place_that_cannot_be_kept_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-directory");
    std::fs::write(&blocker, "").unwrap();
    let model = ScriptedModel::new(Script::new(vec![Turn::text("one")]))
        .keeping_place_in(blocker.join("script.place"));
    let error = model
        .stream(ask("x"), ModelOptions::default(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind(), ModelErrorKind::Config);
    assert!(error.message().contains("cannot keep its place"), "{error}");
}
