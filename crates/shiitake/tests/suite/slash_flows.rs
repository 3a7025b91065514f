//! `shiitake chat` runs the server's human command flows from piped lines: `/help`
//! lists what the server advertises, `/answer` answers a question (the lines that
//! follow answer the flow's questions in order), `/plan` runs a catalog command,
//! and the footer after each run shows the open question and the plan; `/goal` sets a
//! goal the agent then pursues in turns of its own, shown in the footer; `/answer @B`
//! answers, from A's chat, the question a sub-agent B escalated to the person.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{chat, roster};

use std::io::Write;
use std::sync::Arc;

use serde_json::json;
use shiitake_model::Turn;
use shiitake_protocol::{AgentApi, SessionApi};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_lines_run_help_answer_and_plan_flows() {
    let ask = json!({"mode": "continue", "questions": [{
        "header": "Database", "question": "Which database?",
        "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]}]});
    let plan = json!({"steps": [
        {"step": "Pick a database", "status": "in_progress"},
        {"step": "Write the schema", "status": "pending"}]});
    let (url, agent, dir) = chat::served(
        vec![
            Turn::tool_call("plan__update_plan", plan),
            Turn::tool_call("question__ask", ask),
            Turn::text("I asked which database."),
            Turn::text("PostgreSQL it is."),
        ],
        |agent| agent,
    )
    .await;
    let (mut chat, mut stdin, mut wait_for) = chat::piped_chat(&url, chat::TOKEN, dir.path());
    writeln!(stdin, "/help").unwrap();
    wait_for("/answer — Answer a question the agent asked");
    wait_for("/plan");
    writeln!(stdin, "Set up the service").unwrap();
    let footer = wait_for("? [Database] Which database? — /answer");
    assert!(footer.starts_with("  "), "{footer}");
    wait_for("plan 0/2: Pick a database");
    writeln!(stdin, "/answer").unwrap();
    wait_for("[?] [Database] Which database?");
    wait_for("2) PostgreSQL");
    writeln!(stdin, "2").unwrap();
    wait_for("[ok] Answer [Database] PostgreSQL");
    let receipt = wait_for("[/answer] ");
    assert!(receipt.contains("\"delivery\":\"follow_up\""), "{receipt}");
    wait_for("assistant: PostgreSQL it is.");
    writeln!(stdin, "/plan clear").unwrap();
    let cleared = wait_for("[/plan] ");
    assert!(cleared.contains("\"cleared\":true"), "{cleared}");
    writeln!(stdin, "/nosuch").unwrap();
    wait_for("[/nosuch] no such command here; /help lists them");
    drop(stdin);
    let status = chat.wait().unwrap();
    assert!(status.success());

    let sessions = agent.list_sessions(None).await.unwrap();
    assert_eq!(sessions.sessions.len(), 1);
    let session = agent.session(sessions.sessions[0].session_id().clone());
    let snapshot = session
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    let texts: Vec<String> = snapshot
        .messages
        .iter()
        .filter_map(|m| match &m.value {
            shiitake_protocol::message::Message::User(user) => Some(format!("{:?}", user.content)),
            _ => None,
        })
        .collect();
    assert_eq!(texts.len(), 2, "the prompt and one follow-up: {texts:?}");
    assert!(texts[1].contains("Answer: PostgreSQL"), "{}", texts[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_goal_flow_sets_a_goal_the_agent_pursues_until_complete() {
    let plan = json!({"steps": [{"step": "Draft the notes", "status": "in_progress"}]});
    let (url, agent, dir) = chat::served(
        vec![
            Turn::text("Hello."),
            // The first goal turn works (a tool call, so no stall) and ends with the goal live.
            Turn::tool_call("plan__update_plan", plan),
            Turn::text("Drafted."),
            // The continuation completes it.
            Turn::tool_call("goal__complete", json!({"summary": "Notes shipped"})),
            Turn::text("Shipped."),
        ],
        |agent| agent,
    )
    .await;
    let (mut chat, mut stdin, mut wait_for) = chat::piped_chat(&url, chat::TOKEN, dir.path());
    writeln!(stdin, "Hi").unwrap();
    wait_for("assistant: Hello.");
    writeln!(stdin, "/goal set").unwrap();
    wait_for("What should the agent work toward");
    writeln!(stdin, "Ship the release notes").unwrap();
    let receipt = wait_for("[/goal] ");
    assert!(receipt.contains("Ship the release notes"), "{receipt}");
    wait_for("assistant: Drafted.");
    wait_for("Pursuing goal since ");
    wait_for("assistant: Shipped.");
    drop(stdin);
    assert!(chat.wait().unwrap().success());

    let sessions = agent.list_sessions(None).await.unwrap();
    let session = agent.session(sessions.sessions[0].session_id().clone());
    let snapshot = session
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    let goal = shiitake_protocol::extension::view::<shiitake_ext_goal::contract::GoalContract>(
        &snapshot.extensions,
    )
    .unwrap();
    let shiitake_protocol::extension::ExtensionViewV0::Running { value: Some(goal) } = goal else {
        panic!("no goal projection: {goal:?}");
    };
    let goal = goal.goal.expect("the goal");
    assert_eq!(goal.objective, "Ship the release notes");
    assert_eq!(
        goal.status,
        shiitake_ext_goal::contract::GoalStatus::Achieved
    );
    assert_eq!(shiitake_ext_goal::contract::Footer::of(&goal), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_answer_at_agent_answers_what_a_sub_agent_escalated() {
    // A sends B work and waits; B asks A; A escalates the question to the person, whose
    // chat is on A. A's second call waits at the gate until B has asked.
    let a_model = roster::Gated::new(
        vec![
            Turn::tool_call(
                "agents__send",
                json!({"agent": "B", "text": "Pick a database and build the service.",
                       "mode": "wait"}),
            ),
            Turn::tool_call("agents__escalate", json!({"agent": "B"})),
            Turn::text("A person decides."),
            Turn::text("Noted B's reply."),
        ],
        1,
    );
    let b_model = roster::Gated::new(
        vec![
            roster::ask_turn(),
            Turn::text("Asked A."),
            Turn::text("Built it with PostgreSQL."),
        ],
        10,
    );
    let served = roster::Served::start(
        vec![("A", a_model.clone()), ("B", b_model)],
        Arc::new(shiitake_core::clock::SystemClock),
    )
    .await;
    let (url, token, dir) = (
        served.url.clone(),
        served.token.clone(),
        served.dir.path().to_owned(),
    );
    let (mut chat, mut stdin, mut wait_for) = chat::piped_chat(&url, &token, &dir);
    writeln!(stdin, "/answer @B").unwrap();
    wait_for("[/answer] no question of @B waits on you here");
    writeln!(stdin, "Have B build the service.").unwrap();

    let a = served.remote("A");
    let a_session = a.session(roster::only_session(&a).await);
    roster::footer_until(&a_session, |footer| {
        footer.rows.iter().any(|row| {
            row.agent == "B"
                && matches!(
                    row.status,
                    shiitake_ext_subagents::contract::ChildStatus::WaitingOn { .. }
                )
        })
    })
    .await;
    a_model.release(3);

    let row = wait_for("needs you: Which database should the service use? — /answer @B");
    assert!(row.trim_start().starts_with("! agent B "), "{row}");
    writeln!(stdin, "/answer @B").unwrap();
    wait_for("[?] [Database] Which database should the service use?");
    wait_for("2) PostgreSQL");
    writeln!(stdin, "2").unwrap();
    let receipt = wait_for("[/answer @B] ");
    assert!(receipt.contains("\"delivery\":\"follow_up\""), "{receipt}");
    // B runs on with the answer and finishes; A's footer shows it idle.
    roster::footer_until(&a_session, |footer| {
        footer.rows.iter().any(|row| {
            row.agent == "B" && row.status == shiitake_ext_subagents::contract::ChildStatus::Idle
        })
    })
    .await;
    drop(stdin);
    assert!(chat.wait().unwrap().success());

    let b = served.remote("B");
    let b_session = b.session(roster::only_session(&b).await);
    let snapshot = b_session
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    let messages: Vec<_> = snapshot.messages.into_iter().map(|m| m.value).collect();
    let b_texts = roster::user_texts(&messages);
    assert!(
        b_texts
            .iter()
            .any(|text| text.starts_with("A person answered")),
        "{b_texts:?}"
    );
    served.stop().await;
}
