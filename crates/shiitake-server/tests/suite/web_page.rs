//! The web page in headless Chromium, driven from Rust: open it through the
//! one-time login link, send a prompt to the scripted model and watch the answer
//! stream in, steer the running work, answer a question from the footer through
//! the catalog flow, see the inbox put that Session first, and abort a run; a
//! retryable model failure shows as a retry notice.
//! Screenshots land in `<target>/tmp/web-page/` (inbox, a streamed answer, the
//! footer with a plan and an open question).
//!
//! The footer's sub-agent rows are in `web_subagents.rs`.
//!
//! Without a browser (and without `SHIITAKE_CHROMIUM`) the test prints a note and
//! passes; `cargo xtask test` provides one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use crate::support::page::{
    agent, run, served_page, session_with_prompt, shown, type_and_click, user_texts,
};
use serde_json::json;
use shiitake_chromium::{Chromium, eval, screenshot};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{AgentApi, SessionApi};

const ANSWER: &str = "Hello! This answer streams in small pieces, so the page shows it growing.";
const STEER: &str = "Use SQLite, please.";

fn artifacts() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-page")
}

fn turns() -> Vec<Turn> {
    let plan = json!({"steps": [
        {"step": "Pick a database", "status": "in_progress"},
        {"step": "Write the schema", "status": "pending"}]});
    let ask = json!({"mode": "continue", "questions": [{
        "header": "Database", "question": "Which database should the service use?",
        "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]}]});
    vec![
        // The Session that is already done when the page opens.
        Turn::text("Done earlier."),
        // 1. A retryable failure (a retry notice), then a streamed answer.
        Turn::fail(503),
        Turn::text(ANSWER),
        // 2. A run that updates the plan, then stays busy long enough to be steered
        //    (the steer skips the tool call still pending); the next call sees the
        //    steer and echoes it.
        Turn::new(vec![
            Step::Text("Starting on a plan.".into()),
            Step::tool_call("plan__update_plan", plan.clone()),
        ]),
        Turn::new(vec![
            Step::Text("Working on step one.".into()),
            Step::DelayMs(5000),
            Step::tool_call("plan__update_plan", plan),
        ]),
        Turn::new(vec![Step::Echo]),
        // 3. A question, parked for a person.
        Turn::tool_call("question__ask", ask),
        Turn::text("I asked which database."),
        // The follow-up the answer admits.
        Turn::text("PostgreSQL it is."),
        // 4. A run long enough to abort.
        Turn::new(vec![
            Step::Text("Counting slowly: one, two, three".into()),
            Step::DelayMs(120_000),
        ]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_logs_in_streams_steers_answers_and_aborts() {
    let Some(chromium) = Chromium::launch_or_skip("web_page").await.unwrap() else {
        return;
    };
    let mut script = Script::new(turns());
    script.chunk_chars = 4;
    script.chunk_delay_ms = 60;
    let model = Arc::new(ScriptedModel::new(script));
    let (agent, _dir) = agent(model.clone()).await;
    // Mounted the way `shiitake serve` mounts it.
    let (server, login) = served_page(agent.clone()).await;

    session_with_prompt(&agent, "web-earlier", "Earlier work").await;

    // Log in: the link sets the cookie and lands on the inbox.
    let link = login.login_url(&server.url()).unwrap();
    let page = chromium.open(&link, &[]).await.unwrap();
    shown(
        &page,
        "location.pathname === '/' && document.getElementById('inbox')",
    )
    .await;
    shown(
        &page,
        "document.querySelector('#inbox li[data-state=\"done\"]')",
    )
    .await;
    let cookie: String = eval(&page, "document.cookie").await.unwrap();
    assert_eq!(
        cookie, "",
        "the session cookie is HttpOnly: scripts cannot read it"
    );
    let refused: u16 = eval(
        &page,
        "fetch('/v1/sessions', {method: 'POST', headers: {'Content-Type': 'application/json'}, \
         body: JSON.stringify({requestId: 'no-csrf-header'})}).then((r) => r.status)",
    )
    .await
    .unwrap();
    assert_eq!(
        refused, 403,
        "a cookie write without the CSRF header is refused"
    );

    // 1. A new Session; a prompt; the answer streams in and commits.
    run(&page, "document.getElementById('new-session').click()").await;
    shown(&page, "document.getElementById('prompt')").await;
    run(
        &page,
        "window.streamed = []; new MutationObserver(() => { \
           const s = document.querySelector('#streaming:not([hidden]) .text'); \
           if (s && s.textContent && !window.streamed.includes(s.textContent)) window.streamed.push(s.textContent); \
         }).observe(document.getElementById('transcript'), {subtree: true, childList: true, characterData: true, attributes: true})",
    )
    .await;
    type_and_click(&page, "Say hello", "send").await;
    shown(&page, "!document.getElementById('streaming').hidden").await;
    screenshot(&page, &artifacts().join("streaming-answer.png"))
        .await
        .unwrap();
    let committed = format!(
        "[...document.querySelectorAll('.msg.assistant:not(.streaming) .text')].some((e) => e.textContent === {})",
        serde_json::to_string(ANSWER).unwrap()
    );
    shown(&page, &committed).await;
    shown(
        &page,
        "document.querySelectorAll('.terminal.outcome-completed').length === 1",
    )
    .await;
    let seen: Vec<String> = eval(&page, "window.streamed").await.unwrap();
    assert!(
        seen.len() >= 2 && seen.iter().all(|text| ANSWER.starts_with(text.as_str())),
        "the streamed bubble grew through prefixes of the answer: {seen:?}"
    );
    let notice: String = eval(
        &page,
        "document.querySelector('#transcript .notice.retry')?.textContent ?? ''",
    )
    .await
    .unwrap();
    assert!(
        notice.contains("retry 2/5") && notice.contains("503"),
        "the retry notice stays in the transcript: {notice:?}"
    );
    screenshot(&page, &artifacts().join("streamed-answer.png"))
        .await
        .unwrap();

    // 2. Steer the running work: the next model call sees it.
    type_and_click(&page, "Plan the service", "send").await;
    shown(
        &page,
        "document.getElementById('streaming').innerText.includes('Working on step one')",
    )
    .await;
    type_and_click(&page, STEER, "steer").await;
    let echoed = format!(
        "[...document.querySelectorAll('.msg.assistant .text')].some((e) => e.textContent === {})",
        serde_json::to_string(STEER).unwrap()
    );
    shown(&page, &echoed).await;
    shown(&page, "document.getElementById('footer-plan')").await;
    let contexts = user_texts(&model);
    let steered = contexts
        .iter()
        .position(|users| users.iter().any(|u| u == STEER));
    let planned = contexts
        .iter()
        .position(|users| users.iter().any(|u| u == "Plan the service"));
    assert!(
        steered.is_some() && steered > planned,
        "the steer reached a later call of the same run: {contexts:?}"
    );

    // 3. A question: the footer shows it with the plan; the inbox puts the Session first.
    type_and_click(&page, "Ask me about the database", "send").await;
    shown(&page, "document.querySelector('#footer .row.question')").await;
    run(&page, "[...document.querySelectorAll('#footer-plan button')].find((b) => b.textContent === 'Checklist').click()").await;
    shown(&page, "document.querySelector('#footer .steps')").await;
    let footer: String = eval(&page, "document.getElementById('footer').innerText")
        .await
        .unwrap();
    assert!(
        footer.contains("0/2") && footer.contains("Pick a database"),
        "{footer}"
    );
    assert!(
        footer.contains("Which database should the service use?"),
        "{footer}"
    );
    run(&page, "document.getElementById('footer').scrollIntoView()").await;
    screenshot(&page, &artifacts().join("footer-plan-question.png"))
        .await
        .unwrap();

    run(&page, "document.getElementById('back').click()").await;
    shown(&page, "document.querySelectorAll('#inbox li').length === 2").await;
    shown(
        &page,
        "document.querySelector('#inbox li').dataset.state === 'needs_you'",
    )
    .await;
    let states: Vec<String> = eval(
        &page,
        "[...document.querySelectorAll('#inbox li')].map((li) => li.dataset.state)",
    )
    .await
    .unwrap();
    assert_eq!(states, ["needs_you", "done"]);
    screenshot(&page, &artifacts().join("inbox.png"))
        .await
        .unwrap();
    run(
        &page,
        "document.querySelector('#inbox li[data-state=\"needs_you\"] button').click()",
    )
    .await;

    // Answer from the footer: the catalog's /answer flow asks, confirms, then calls.
    shown(
        &page,
        "document.querySelector('#footer .row.question button.answer')",
    )
    .await;
    run(
        &page,
        "document.querySelector('#footer .row.question button.answer').click()",
    )
    .await;
    shown(
        &page,
        "document.querySelector('#flow-form input[data-label=\"PostgreSQL\"]')",
    )
    .await;
    run(
        &page,
        "document.querySelector('#flow-form input[data-label=\"PostgreSQL\"]').checked = true; \
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
    assert!(summary.contains("PostgreSQL"), "{summary}");
    run(&page, "document.getElementById('flow-confirm').click()").await;
    shown(
        &page,
        "document.getElementById('flow-message')?.textContent.includes('/answer: done')",
    )
    .await;
    shown(&page, "!document.querySelector('#footer .row.question')").await;
    shown(&page, "[...document.querySelectorAll('.msg.assistant .text')].some((e) => e.textContent === 'PostgreSQL it is.')").await;
    let follow_up = user_texts(&model).last().cloned().unwrap();
    assert!(
        follow_up.iter().any(|u| u.contains("PostgreSQL")),
        "the answer reached the model: {follow_up:?}"
    );

    // 4. Abort a long run.
    type_and_click(&page, "Count slowly", "send").await;
    shown(
        &page,
        "document.getElementById('streaming').innerText.includes('Counting slowly')",
    )
    .await;
    shown(&page, "!document.getElementById('abort').disabled").await;
    run(&page, "document.getElementById('abort').click()").await;
    shown(
        &page,
        "document.querySelector('.terminal.outcome-cancelled')",
    )
    .await;
    shown(
        &page,
        "document.getElementById('activity').dataset.state === 'idle'",
    )
    .await;
    shown(&page, "document.getElementById('abort').disabled").await;
    screenshot(&page, &artifacts().join("aborted.png"))
        .await
        .unwrap();

    // The steer joined the running work: it was committed before that run's terminal.
    let hash: String = eval(&page, "location.hash").await.unwrap();
    let session_id = shiitake_protocol::SessionId::new(hash.trim_start_matches("#/s/")).unwrap();
    let snapshot = agent
        .session(session_id)
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    let snapshot = serde_json::to_value(&snapshot).unwrap();
    let user_message = |text: &str| {
        snapshot["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["value"]["role"] == "user" && m["value"]["content"] == text)
            .cloned()
            .unwrap_or_else(|| panic!("no user message {text:?}"))
    };
    let terminals = snapshot["terminals"].as_array().unwrap();
    let terminal_of = |message: &serde_json::Value| {
        terminals
            .iter()
            .find(|t| t["commandId"] == message["commandId"])
            .cloned()
            .unwrap()
    };
    let planned = user_message("Plan the service");
    let steered = user_message(STEER);
    assert!(
        steered["sequence"].as_u64() < terminal_of(&planned)["sequence"].as_u64(),
        "the steer was taken in by the running work: {steered} / {}",
        terminal_of(&planned)
    );
    let counted = user_message("Count slowly");
    assert_eq!(terminal_of(&counted)["outcome"], "cancelled");
    assert_eq!(terminal_of(&planned)["outcome"], "completed");

    chromium.close().await;
    server.stop().await;
    for name in [
        "inbox.png",
        "streaming-answer.png",
        "streamed-answer.png",
        "footer-plan-question.png",
    ] {
        let size = std::fs::metadata(artifacts().join(name)).unwrap().len();
        assert!(size > 1000, "{name}: {size} bytes");
    }
    eprintln!("web_page: screenshots in {}", artifacts().display());
}

/// The page's own rules, run in the browser against the Rust side and the
/// protocol fixtures: the label-list encoding the question extension reads, the
/// inbox order, and how frames fold into the Session state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_modules_agree_with_the_rust_side() {
    use shiitake_ext_question::contract::{format_labels, parse_labels};

    let Some(chromium) = Chromium::launch_or_skip("web_page modules").await.unwrap() else {
        return;
    };
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    let (agent, _dir) = agent(model).await;
    let (server, _login) = served_page(agent).await;
    // The page itself is public: its modules load without logging in.
    let page = chromium.open(&server.url(), &[]).await.unwrap();

    let cases: [&[&str]; 5] = [
        &["SQLite"],
        &["SQLite", "PostgreSQL"],
        &["Red, green", "say \"hi\""],
        &[" padded ", "back\\slash"],
        &["a,b,c", "plain", "x\"y,z"],
    ];
    for labels in cases {
        let script = format!(
            "import('/web/flow.js').then((m) => m.formatLabels({}))",
            serde_json::to_string(labels).unwrap()
        );
        let encoded: String = eval(&page, &script).await.unwrap();
        assert_eq!(encoded, format_labels(labels), "{labels:?}");
        assert_eq!(parse_labels(&encoded).unwrap(), labels, "{encoded}");
    }

    let order: Vec<String> = eval(
        &page,
        "import('/web/inbox.js').then((m) => m.sortRows([\
           {sessionId: 'a', state: 'done', lastActivityAt: 9}, \
           {sessionId: 'b', state: 'needs_you', lastActivityAt: 1}, \
           {sessionId: 'c', state: 'running', lastActivityAt: 5}, \
           {sessionId: 'd', state: 'errored', lastActivityAt: 2}, \
           {sessionId: 'e', state: 'needs_you', lastActivityAt: 3}, \
           {sessionId: 'f', state: 'unavailable'}]).map((r) => r.sessionId))",
    )
    .await
    .unwrap();
    assert_eq!(order, ["e", "b", "d", "c", "a", "f"]);

    let fixtures = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shiitake-protocol/tests/fixtures"
    );
    let read = |path: &str| std::fs::read_to_string(format!("{fixtures}/{path}")).unwrap();
    let script = format!(
        "import('/web/session.js').then((m) => {{ \
           const s = new m.SessionState(); \
           s.applySnapshot({snapshot}); \
           const before = {{messages: s.messages.size, progress: s.progress && s.progress.revision, \
                           running: s.running(), extensions: Object.keys(s.extensions).length}}; \
           const stale = {progress}; stale.progress.messageId = 'ent_4'; stale.progress.revision = 3; \
           s.applyFrame(stale); \
           const afterStale = s.progress.revision; \
           s.applyFrame({update}); \
           const afterUpdate = {{messages: s.messages.size, terminals: s.terminals.size, \
                                progress: s.progress, running: s.running(), items: s.items().length}}; \
           s.applyFrame({reset}); \
           return {{before, afterStale, afterUpdate, afterReset: s.messages.size}}; }})",
        snapshot = read("session_snapshot/full.json"),
        progress = read("session_frame/progress.json"),
        update = read("session_frame/update_live.json"),
        reset = read("session_frame/reset.json"),
    );
    let folded: serde_json::Value = eval(&page, &script).await.unwrap();
    assert_eq!(
        folded,
        json!({
            "before": {"messages": 2, "progress": 7, "running": true, "extensions": 3},
            // A progress frame older than the one shown is ignored.
            "afterStale": 7,
            // The update adds its message and terminal; the run is idle, so the preview goes.
            "afterUpdate": {"messages": 3, "terminals": 2, "progress": null, "running": false, "items": 5},
            // A reset starts over from its (empty) baseline.
            "afterReset": 0,
        })
    );
    chromium.close().await;
}
