//! A person answers a waiting tool call from the web page, in headless Chromium: the
//! inbox shows the Session `needs_you`, the Session's footer shows the call in
//! attention with its *Answer* button, which walks the `/approve` flow (allow once,
//! confirm); the call runs once, the run completes and the row goes. The page knows
//! nothing of the approval extension: it renders the footer rows and walks the flow.
//!
//! Without a browser (and without `SHIITAKE_CHROMIUM`) the test prints a SKIPPED line
//! (or fails with `SHIITAKE_REQUIRE_SERVICES=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use shiitake_chromium::{Chromium, Page, eval, wait_for};
use shiitake_conformance::support::*;
use shiitake_ext_testkit::TestAgent;
use shiitake_protocol::*;
use shiitake_server::{ServerConfig, Token, WebLogin, router};

const TOKEN: &str = "approval-web-token-0123456789";

async fn run(page: &Page, script: &str) {
    let _: bool = eval(page, &format!("(() => {{ {script}; return true; }})()"))
        .await
        .unwrap();
}

async fn shown(page: &Page, condition: &str) {
    if let Err(error) = wait_for(page, condition, Duration::from_secs(20)).await {
        let body: String = eval(page, "document.body.innerText")
            .await
            .unwrap_or_default();
        panic!("{error}\n--- the page shows ---\n{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_answers_a_waiting_call_from_its_footer_row() {
    let Some(chromium) = Chromium::launch_or_skip("approval web page").await.unwrap() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let kit = TestAgent::builder()
        .turns(write_then("hello", "Wrote hello."))
        .tools(catalog(dir.path(), false).await)
        .kit_extension(shiitake_ext_approval::extension(ask_policy()).unwrap())
        .open()
        .await;
    let agent = Arc::new(kit.agent);
    let session = new_session(&*agent).await;
    let command = send(&session, "Write hello").await;
    until_waiting(&session, 1).await;

    let login = WebLogin::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(
        agent.clone(),
        ServerConfig::new(Token::new(TOKEN).unwrap()).with_web(login.clone()),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let page = chromium
        .open(&login.login_url(&url).unwrap(), &[])
        .await
        .unwrap();
    shown(
        &page,
        "document.querySelector('#inbox li')?.dataset.state === 'needs_you'",
    )
    .await;
    run(
        &page,
        &format!("location.hash = '#/s/{}'", session.session_id().as_str()),
    )
    .await;
    shown(&page, "document.getElementById('footer-ap1')").await;
    let row: String = eval(&page, "document.getElementById('footer-ap1').innerText")
        .await
        .unwrap();
    assert!(
        row.contains(r#"approve notes__write? {"text":"hello"}"#) && row.contains("— /approve"),
        "{row}"
    );
    let attention: bool = eval(
        &page,
        "document.getElementById('footer-ap1').classList.contains('tone-attention') \
         && document.getElementById('footer-ap1').classList.contains('approval')",
    )
    .await
    .unwrap();
    assert!(attention, "an approval row in attention");
    assert!(notes(dir.path()).is_empty(), "held");

    run(
        &page,
        "document.querySelector('#footer-ap1 button.answer').click()",
    )
    .await;
    shown(
        &page,
        "document.querySelector('#flow-form input[data-label=\"Allow once\"]')",
    )
    .await;
    run(
        &page,
        "document.querySelector('#flow-form input[data-label=\"Allow once\"]').checked = true; \
         document.getElementById('flow-continue').click()",
    )
    .await;
    shown(&page, "document.getElementById('flow-confirm')").await;
    let summary: String = eval(
        &page,
        "document.querySelector('#flow-form .summary').textContent",
    )
    .await
    .unwrap();
    assert_eq!(summary, "Allow once: notes__write");
    run(&page, "document.getElementById('flow-confirm').click()").await;
    shown(
        &page,
        "document.getElementById('flow-message')?.textContent.includes('done')",
    )
    .await;
    shown(&page, "!document.getElementById('footer-ap1')").await;
    shown(
        &page,
        "[...document.querySelectorAll('.msg.assistant .text')].some((e) => e.textContent === 'Wrote hello.')",
    )
    .await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(notes(dir.path()), ["hello"], "ran once");
}
