//! Sub-agent rows of the footer in headless Chromium: a row whose child asks a person
//! answers through the question's own flow on the child's Session, *Open* shows the
//! child's conversation, and *Open* on the row of another Agent shows that Agent's
//! Session, where what is sent reaches that Agent.
//!
//! Without a browser (and without `SHIITAKE_CHROMIUM`) the test prints a note and
//! passes; `cargo xtask test` provides one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::support::page::{
    SHOWN, agent, run, session_with_prompt, shown, type_and_click, user_texts,
};
use crate::support::{Server, TOKEN};
use serde_json::json;
use shiitake_chromium::{Chromium, eval};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_question::QuestionConfig;
use shiitake_ext_subagents::contract::{
    ANSWER_ACTION_LABEL, AnswerAction, ChildRow, ChildStatus, EXTENSION_ID, FooterSummary,
    FooterView, NeedsYouQuestion, QUESTION_ANSWER_CALL, QUESTION_ANSWER_FLOW,
    QUESTION_EXTENSION_ID, Tone,
};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::{AgentApi, AgentName, RequestId, SessionApi};
use shiitake_server::{AgentDirectoryApi, Caller, ServerConfig, Token, WebLogin, directory_router};
use shiitake_store_sqlite::{Durability, SqliteStore};

/// A stand-in for the subagents extension: publishes the footer view a test sets, in
/// the subagents contract's shape and under its id, and the rows the contract draws of
/// it (`FooterView::footer_rows`), so the page renders them as it would the real rows
/// (the real extension needs a roster of Agents behind it).
mod rows {
    use serde::{Deserialize, Serialize};
    use shiitake_core::extension::kit::{ExtensionKit, KitExtension};
    use shiitake_core::extension::{StateScope, StateView};
    use shiitake_ext_subagents::contract::{FooterView, SubagentsContract};
    use shiitake_protocol::extension::ExtensionContract;
    use shiitake_protocol::{contract_commands, extension_contract};

    /// `set`: the view to publish.
    #[derive(Serialize, Deserialize)]
    pub struct Set {
        pub view: FooterView,
    }
    extension_contract! {
        /// A stand-in command, declared on its own marker contract under the same id.
        pub Stand = <SubagentsContract as ExtensionContract>::EXTENSION_ID, projection FooterView
    }
    contract_commands!(Stand { Set => "set" in SessionScope -> bool });

    fn view(state: &StateView<'_>) -> Option<FooterView> {
        state.get(StateScope::Session, "rows", "view")
    }

    pub fn extension() -> KitExtension<Stand> {
        ExtensionKit::<Stand>::new("rows")
            .unwrap()
            .session_state()
            .command(|tx, input: Set| {
                tx.put(StateScope::Session, "rows", "view", &input.view)?;
                Ok(true)
            })
            .projection(view)
            .footer(|state, id| view(state).map(|v| v.footer_rows(id)).unwrap_or_default())
            .build()
            .unwrap()
    }
}

/// A directory of Agents, the first its default (`main`), as `shiitake serve` serves
/// its roster.
struct Agents(Vec<(AgentName, Arc<Agent>)>);

#[async_trait::async_trait]
impl AgentDirectoryApi for Agents {
    type Agent = Agent;

    async fn agent(
        &self,
        name: &AgentName,
        _caller: &Caller,
    ) -> Result<Arc<Agent>, shiitake_protocol::ShiitakeError> {
        self.0
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, agent)| agent.clone())
            .ok_or_else(|| shiitake_protocol::ShiitakeError::not_found(format!("no {name}")))
    }

    async fn names(
        &self,
        _caller: &Caller,
    ) -> Result<Vec<AgentName>, shiitake_protocol::ShiitakeError> {
        Ok(self.0.iter().map(|(name, _)| name.clone()).collect())
    }

    fn default_name(&self, _caller: &Caller) -> Option<AgentName> {
        Some(self.0[0].0.clone())
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
    .kit_extension(shiitake_ext_question::extension(QuestionConfig::default()).unwrap())
    .kit_extension(rows::extension())
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
    let (helper, _helper_dir) = self::agent(helper_model.clone()).await;
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
                    approval: None,
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
