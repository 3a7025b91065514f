//! The web page in headless Chromium, driven from Rust: open it through the
//! one-time login link, send a prompt to the scripted model and watch the answer
//! stream in, steer the running work, answer a question from the footer through
//! the catalog flow, see the inbox put that Session first, and abort a run; a
//! retryable model failure shows as a retry notice.
//! Screenshots land in `<target>/tmp/web-page/` (inbox, a streamed answer, the
//! footer with a plan and an open question).
//!
//! Without a browser (and without `SHIITAKE_CHROMIUM`) the test prints a note and
//! passes; `cargo xtask test` provides one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shiitake_chromium::{Chromium, Page, eval, screenshot, wait_for};
use shiitake_core::{Agent, AgentConfig, Durability, FixedModel, SqliteStore};
use shiitake_ext_question::{QuestionConfig, QuestionExtension, question_grants};
use shiitake_ext_subagents::contract::{
    ANSWER_ACTION_LABEL, AnswerAction, ChildRow, ChildStatus, EXTENSION_ID, FooterSummary,
    FooterView, NeedsYouQuestion, QUESTION_ANSWER_CALL, QUESTION_ANSWER_FLOW,
    QUESTION_EXTENSION_ID, Tone,
};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::AgentName;
use shiitake_protocol::message::{Message, UserContent};
use shiitake_protocol::{AgentApi, PromptText, RequestId, SendOptions, SessionApi};
use shiitake_server::{AgentDirectoryApi, ServerConfig, Token, WebLogin, directory_router, router};
use support::{Server, TOKEN};

/// How long the page may take to show something.
const SHOWN: Duration = Duration::from_secs(20);

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

/// A new Session of `agent` (created under `request`) with `text` sent to it.
async fn session_with_prompt(
    agent: &Agent,
    request: &str,
    text: &str,
) -> shiitake_protocol::SessionId {
    let id = agent
        .create_session(RequestId::new(request).unwrap())
        .await
        .unwrap();
    agent
        .session(id.clone())
        .send(PromptText::new(text).unwrap(), SendOptions::default())
        .await
        .unwrap();
    id
}

async fn agent(model: Arc<ScriptedModel>) -> (Arc<Agent>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        AgentConfig::new(Arc::new(FixedModel(model))),
    )
    .extension(
        QuestionExtension::new(QuestionConfig::default()).unwrap(),
        question_grants(),
    )
    .extension(
        shiitake_ext_plan::PlanExtension::new().unwrap(),
        shiitake_ext_plan::plan_grants(),
    )
    .open()
    .await
    .unwrap();
    (Arc::new(agent), dir)
}

/// Runs `script` in the page (a statement or an expression; its value is dropped).
async fn run(page: &Page, script: &str) {
    let _: bool = eval(page, &format!("(() => {{ {script}; return true; }})()"))
        .await
        .unwrap();
}

async fn shown(page: &Page, condition: &str) {
    if let Err(error) = wait_for(page, condition, SHOWN).await {
        let body: String = eval(page, "document.querySelectorAll('details').forEach((d) => d.open = true), document.body.innerText")
            .await
            .unwrap_or_default();
        panic!("{error}\n--- the page shows ---\n{body}");
    }
}

/// Types `text` into the prompt box and clicks the button `id`.
async fn type_and_click(page: &Page, text: &str, id: &str) {
    let text = serde_json::to_string(text).unwrap();
    run(
        page,
        &format!("document.getElementById('prompt').value = {text}; document.getElementById('{id}').click()"),
    )
    .await;
}

fn user_texts(model: &ScriptedModel) -> Vec<Vec<String>> {
    model
        .requests()
        .iter()
        .map(|context| {
            context
                .messages
                .iter()
                .filter_map(|message| match message {
                    Message::User(user) => Some(match &user.content {
                        UserContent::Text(text) => text.clone(),
                        UserContent::Blocks(blocks) => format!("{blocks:?}"),
                    }),
                    _ => None,
                })
                .collect()
        })
        .collect()
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
    let login = WebLogin::default();
    let config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_web(login.clone());
    let server = Server::start(
        router(agent.clone(), config),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;

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
    let config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_web(WebLogin::default());
    let server = Server::start(router(agent, config), "127.0.0.1:0".parse().unwrap()).await;
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

/// A stand-in for the subagents view: publishes the `rows` a command sets, so the
/// footer's subagent rows (Open, Answer) can be driven without the roster.
/// A stand-in for the subagents extension: publishes the footer view a test sets,
/// in the subagents contract's shape and under its id, so the page renders it as it
/// would the real rows (the real extension needs a roster of Agents behind it).
mod rows {
    use serde_json::{Value, json};
    use shiitake_core::extension::{
        Extension, ExtensionDefinition, Grant, Grants, HookError, StateScope, StateView, Tx,
    };
    use shiitake_ext_subagents::contract::{EXTENSION_ID, FooterView};
    use shiitake_protocol::ExtensionId;

    pub struct Rows(ExtensionDefinition);

    impl Rows {
        pub fn new() -> Self {
            Self(ExtensionDefinition {
                id: ExtensionId::new(EXTENSION_ID).unwrap(),
                namespace: "rows".into(),
                scopes: vec![StateScope::Session],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            })
        }

        pub fn grants() -> Grants {
            Grants::none()
                .with(Grant::State)
                .with(Grant::Commands)
                .with(Grant::Projection)
        }
    }

    impl Extension for Rows {
        fn definition(&self) -> &ExtensionDefinition {
            &self.0
        }

        fn command(
            &self,
            tx: &mut Tx<'_>,
            command: &str,
            input: Value,
        ) -> Result<Value, HookError> {
            match command {
                "set" => {
                    let view: FooterView = serde_json::from_value(input["view"].clone())
                        .map_err(|error| HookError::Invalid(error.to_string()))?;
                    tx.put(StateScope::Session, "rows", "view", &view)?;
                    Ok(json!(true))
                }
                other => Err(HookError::UnknownCommand(other.to_owned())),
            }
        }

        fn projection(&self, state: &StateView<'_>) -> Option<Value> {
            state.get(StateScope::Session, "rows", "view")
        }
    }
}

/// A directory of Agents, the first its default (`main`), as `shiitake serve` serves
/// its roster.
struct Agents(Vec<(AgentName, Arc<Agent>)>);

impl AgentDirectoryApi for Agents {
    type Agent = Agent;

    fn agent(&self, name: &AgentName) -> Option<Arc<Agent>> {
        self.0
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, agent)| agent.clone())
    }

    fn names(&self) -> Vec<AgentName> {
        self.0.iter().map(|(name, _)| name.clone()).collect()
    }

    fn default_name(&self) -> AgentName {
        self.0[0].0.clone()
    }
}

/// Reads `session` until `done` holds for its snapshot (at most 20 s).
async fn until(
    agent: &Agent,
    session: &shiitake_protocol::SessionId,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + SHOWN;
    loop {
        let snapshot = agent
            .session(session.clone())
            .read(shiitake_protocol::ReadOptions::default())
            .await
            .unwrap();
        let snapshot = serde_json::to_value(&snapshot).unwrap();
        if done(&snapshot) {
            return snapshot;
        }
        assert!(tokio::time::Instant::now() < deadline, "never: {snapshot}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn open_asks(snapshot: &serde_json::Value) -> Vec<serde_json::Value> {
    snapshot["extensions"]["botanical-session-question"]["value"]["asks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A subagent row that needs a person (the subagents contract's shape): its Answer
/// action runs the question's answer flow on the child's Session through the Agent
/// segment of the directory routes, and Open shows that conversation; Open on the row
/// of another Agent shows its Session, and sending there reaches that Agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_row_answers_the_childs_question_and_opens_it() {
    let Some(chromium) = Chromium::launch_or_skip("web_page subagents")
        .await
        .unwrap()
    else {
        return;
    };
    let ask = json!({"mode": "continue", "questions": [{
        "header": "Database", "question": "Which database?",
        "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]}]});
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call("question__ask", ask),
        Turn::text("Asked."),
        Turn::text("Thanks, SQLite."),
    ])));
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        AgentConfig::new(Arc::new(FixedModel(model.clone()))),
    )
    .extension(
        QuestionExtension::new(QuestionConfig::default()).unwrap(),
        question_grants(),
    )
    .extension(rows::Rows::new(), rows::Rows::grants())
    .open()
    .await
    .unwrap();
    let agent = Arc::new(agent);
    let login = WebLogin::default();
    let config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_web(login.clone());
    // A second Agent, `helper`, with a conversation of its own.
    let helper_model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::text("Helper here."),
        Turn::text("Helper again."),
    ])));
    let (helper, _helper_dir) = crate::agent(helper_model.clone()).await;
    let helper_session = session_with_prompt(&helper, "web-helper", "Hello helper").await;
    let server = Server::start(
        directory_router(
            Arc::new(Agents(vec![
                (AgentName::default(), agent.clone()),
                (AgentName::new("helper").unwrap(), helper.clone()),
            ])),
            config,
        ),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;

    let child = session_with_prompt(&agent, "web-child", "Ask me").await;
    let snapshot = until(&agent, &child, |s| !open_asks(s).is_empty()).await;
    let ask_id = open_asks(&snapshot)[0]["askId"]
        .as_str()
        .unwrap()
        .to_owned();
    let parent = agent
        .create_session(RequestId::new("web-parent").unwrap())
        .await
        .unwrap();
    let view = FooterView {
        collapsed: false,
        rows: vec![
            ChildRow {
                agent: "main".into(),
                session_id: child.as_str().into(),
                title: "Researcher".into(),
                status: ChildStatus::NeedsYou {
                    question: Some(NeedsYouQuestion {
                        ask_id: ask_id.clone(),
                        text: "Which database?".into(),
                        answer: AnswerAction {
                            label: ANSWER_ACTION_LABEL.into(),
                            agent: "main".into(),
                            session_id: child.as_str().into(),
                            extension_id: QUESTION_EXTENSION_ID.into(),
                            flow: QUESTION_ANSWER_FLOW.into(),
                            call: QUESTION_ANSWER_CALL.into(),
                            ask_id: ask_id.clone(),
                        },
                    }),
                },
            },
            ChildRow {
                agent: "helper".into(),
                session_id: helper_session.as_str().into(),
                title: "Helper".into(),
                status: ChildStatus::Idle,
            },
        ],
        summary: FooterSummary {
            total: 2,
            needs_you: 1,
            tone: Tone::Amber,
            ..FooterSummary::default()
        },
        more: 0,
        refreshed_at: None,
    };
    agent
        .session(parent.clone())
        .call_extension(
            &shiitake_protocol::ExtensionId::new(EXTENSION_ID).unwrap(),
            "set",
            json!({ "view": view }),
        )
        .await
        .unwrap();

    let page = chromium
        .open(&login.login_url(&server.url()).unwrap(), &[])
        .await
        .unwrap();
    shown(&page, "document.getElementById('inbox')").await;
    run(&page, &format!("location.hash = '#/s/{}'", parent.as_str())).await;
    shown(
        &page,
        "document.querySelector('#footer .row.subagent button.answer')",
    )
    .await;
    let row: String = eval(
        &page,
        "document.querySelector('#footer .row.subagent').innerText",
    )
    .await
    .unwrap();
    assert!(
        row.contains("main")
            && row.contains("Researcher")
            && row.contains("needs you")
            && row.contains("Which database?"),
        "{row}"
    );
    run(
        &page,
        "document.querySelector('#footer .row.subagent button.answer').click()",
    )
    .await;
    shown(
        &page,
        "document.querySelector('#flow-form input[data-label=\"SQLite\"]')",
    )
    .await;
    run(
        &page,
        "document.querySelector('#flow-form input[data-label=\"SQLite\"]').checked = true; \
         document.getElementById('flow-continue').click()",
    )
    .await;
    shown(&page, "document.getElementById('flow-confirm')").await;
    run(&page, "document.getElementById('flow-confirm').click()").await;
    shown(
        &page,
        "document.getElementById('flow-message')?.textContent.includes('Answer @main: done')",
    )
    .await;
    until(&agent, &child, |s| open_asks(s).is_empty()).await;

    // Open shows once the page learned that `main` is its own (default) Agent.
    shown(
        &page,
        "document.querySelector('#footer .row.subagent a.open:not([hidden])')",
    )
    .await;
    run(
        &page,
        "document.querySelector('#footer .row.subagent a.open').click()",
    )
    .await;
    shown(
        &page,
        "[...document.querySelectorAll('.msg.assistant .text')].some((e) => e.textContent === 'Thanks, SQLite.')",
    )
    .await;
    let last = user_texts(&model).last().cloned().unwrap();
    assert!(last.iter().any(|u| u.contains("SQLite")), "{last:?}");

    // Open on the row of another Agent shows its conversation through its Agent
    // segment, and what is sent there goes to that Agent.
    run(&page, &format!("location.hash = '#/s/{}'", parent.as_str())).await;
    let helper_open = "document.querySelector('#footer .row.subagent[data-agent=\"helper\"] a.open:not([hidden])')";
    shown(&page, helper_open).await;
    run(&page, &format!("{helper_open}.click()")).await;
    shown(
        &page,
        "[...document.querySelectorAll('.msg.assistant .text')].some((e) => e.textContent === 'Helper here.')",
    )
    .await;
    let hash: String = eval(&page, "location.hash").await.unwrap();
    assert_eq!(hash, format!("#/a/helper/s/{}", helper_session.as_str()));
    type_and_click(&page, "And again", "send").await;
    shown(
        &page,
        "[...document.querySelectorAll('.msg.assistant .text')].some((e) => e.textContent === 'Helper again.')",
    )
    .await;
    let helper_turns = user_texts(&helper_model);
    assert_eq!(helper_turns.len(), 2, "{helper_turns:?}");
    assert!(
        helper_turns[1].iter().any(|u| u == "And again"),
        "{helper_turns:?}"
    );
    chromium.close().await;
}
