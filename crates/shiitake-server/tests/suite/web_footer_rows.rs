//! A footer row the page has never heard of, in headless Chromium: the test kit's
//! sample extension (`example-weather`) describes a row of its own kind,
//! and the page shows its text, tone, note, progress and detail lines, and runs its
//! command action, without a line of the page knowing the extension.
//!
//! Without a browser (and without `SHIITAKE_CHROMIUM`) the test prints a SKIPPED line
//! (or fails with `SHIITAKE_REQUIRE_SERVICES=1`); `cargo xtask test` provides one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::page::{agent_with, run, served_page, shown};
use serde_json::json;
use shiitake_chromium::{Chromium, eval};
use shiitake_ext_testkit::sample::weather;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::{AgentApi, ExtensionId, RequestId, SessionApi};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_extensions_row_shows_and_its_action_runs_with_no_page_change() {
    let Some(chromium) = Chromium::launch_or_skip("web footer rows").await.unwrap() else {
        return;
    };
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    let (agent, _dir) = agent_with(model, |agent| agent.kit_extension(weather().unwrap())).await;
    let session = agent
        .create_session(RequestId::new("web-weather").unwrap())
        .await
        .unwrap();
    agent
        .session(session.clone())
        .call_extension(
            &ExtensionId::new("example-weather").unwrap(),
            "forecast",
            json!({"sky": "storm ahead"}),
        )
        .await
        .unwrap();
    let (server, login) = served_page(agent.clone()).await;

    let page = chromium
        .open(&login.login_url(&server.url()).unwrap(), &[])
        .await
        .unwrap();
    shown(&page, "document.getElementById('inbox')").await;
    run(
        &page,
        &format!("location.hash = '#/s/{}'", session.as_str()),
    )
    .await;
    shown(&page, "document.getElementById('footer-weather')").await;
    let row: String = eval(&page, "document.getElementById('footer-weather').innerText")
        .await
        .unwrap();
    assert!(
        row.contains("weather: storm ahead") && row.contains("— /forecast"),
        "{row}"
    );
    let amber: bool = eval(
        &page,
        "document.getElementById('footer-weather').classList.contains('tone-attention') \
         && document.querySelector('#footer-weather progress').value === 2",
    )
    .await
    .unwrap();
    assert!(amber, "an attention row with its progress");
    let detail: String = eval(
        &page,
        "[...document.querySelectorAll('#footer .steps li')].map((li) => li.textContent).join('|')",
    )
    .await
    .unwrap();
    assert_eq!(detail, "Mon: rain|Tue: sun");

    run(
        &page,
        "document.querySelector('#footer-weather button.clear').click()",
    )
    .await;
    shown(
        &page,
        "document.getElementById('footer-weather')?.innerText.includes('weather: clear skies')",
    )
    .await;
    let calm: bool = eval(
        &page,
        "document.getElementById('footer-weather').classList.contains('tone-calm')",
    )
    .await
    .unwrap();
    assert!(calm, "the cleared sky is calm");
    let stored = agent
        .session(session)
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(
        stored.footer[0].text, "weather: clear skies",
        "the page's click ran the command"
    );
    server.stop().await;
    chromium.close().await;
}
