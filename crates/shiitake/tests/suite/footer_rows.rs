//! `shiitake chat` prints a footer row of an extension it has never heard of: the test
//! kit's sample extension (`example-weather`) describes its row, and the terminal shows
//! its mark, text and note, with no line of the CLI knowing the extension.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use serde_json::json;
use shiitake_ext_testkit::sample::weather;
use shiitake_model::Turn;
use shiitake_protocol::{AgentApi, ExtensionId, SessionApi};

use crate::support::chat;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_extensions_row_prints_in_chat_with_no_client_change() {
    let (url, agent, dir) = chat::served(vec![Turn::text("Hello.")], |agent| {
        agent.kit_extension(weather().unwrap())
    })
    .await;
    let (mut chat, mut stdin, mut wait_for) = chat::piped_chat(&url, chat::TOKEN, dir.path());
    writeln!(stdin, "Hi").unwrap();
    wait_for("assistant: Hello.");

    let sessions = agent.list_sessions(None).await.unwrap();
    let session = agent.session(sessions.sessions[0].session_id().clone());
    let weather_id = ExtensionId::new("example-weather").unwrap();
    session
        .call_extension(&weather_id, "forecast", json!({"sky": "storm ahead"}))
        .await
        .unwrap();
    let storm = wait_for("weather: storm ahead");
    assert_eq!(storm.trim_start(), "! weather: storm ahead — /forecast");
    session
        .call_extension(&weather_id, "forecast", json!({"sky": "clear skies"}))
        .await
        .unwrap();
    let clear = wait_for("weather: clear skies");
    assert_eq!(
        clear.trim_start(),
        "weather: clear skies — /forecast",
        "calm: no mark"
    );
    drop(stdin);
    assert!(chat.wait().unwrap().success());
}
