//! A footer row the page has never heard of, in headless Chromium: the test kit's
//! sample extension (`example-weather`) describes a row of its own kind,
//! and the page shows its text, tone, note, progress and detail lines, and runs its
//! command action, without a line of the page knowing the extension.
//!
//! Without a browser (and without `SHIITAKE_CHROMIUM`) the test prints a SKIPPED line
//! (or fails with `SHIITAKE_REQUIRE_SERVICES=1`); `cargo xtask test` provides one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::page::{run, shown};
use crate::support::{Server, TOKEN};
use serde_json::json;
use shiitake_chromium::{Chromium, eval};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_testkit::sample::weather;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::{AgentApi, ExtensionId, RequestId, SessionApi};
use shiitake_server::{ServerConfig, Token, WebLogin, router};
use shiitake_store_sqlite::{Durability, SqliteStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_extensions_row_shows_and_its_action_runs_with_no_page_change() {
    let Some(chromium) = Chromium::launch_or_skip("web footer rows").await.unwrap() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        AgentConfig::new(Arc::new(FixedModel(model))),
    )
    .kit_extension(weather().unwrap())
    .open()
    .await
    .unwrap();
    let agent = Arc::new(agent);
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
    let login = WebLogin::default();
    let config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_web(login.clone());
    let server = Server::start(
        router(agent.clone(), config),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;

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
