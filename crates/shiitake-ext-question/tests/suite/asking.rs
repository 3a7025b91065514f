//! Ask on a real Agent: the wait, parking, follow-ups, declines, withdrawals,
//! attention, idempotent answers and the `/answer` flow.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_ext_question::contract::{
    AnswerAsk, AskStatus, DeclineAsk, Delivery, ListAsks, QuestionAnswer, QuestionContract, Receipt,
};
use shiitake_ext_question::extension_id;
use shiitake_model::Turn;
use shiitake_protocol::catalog::FlowStep;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

fn pick(label: &str) -> Vec<QuestionAnswer> {
    vec![QuestionAnswer {
        selected: vec![label.into()],
        text: None,
    }]
}

#[tokio::test]
async fn a_waiting_ask_receives_the_persons_answer_in_turn() {
    let setup = setup(vec![ask_call(json!({})), Turn::text("Using PostgreSQL.")]).await;
    let session = new_session(&setup.agent).await;
    let sent = send(&session, "Set up the service").await;
    let asks = open_asks(&session, 1).await;
    assert_eq!(
        inbox_state(&setup.agent, session.session_id()).await,
        SessionInboxState::NeedsYou,
        "an open Ask waits on a person"
    );
    let contract = bind_session_extension::<_, QuestionContract>(&session);
    assert_eq!(contract.call(&ListAsks {}).await.unwrap(), asks);

    let answer = AnswerAsk {
        ask_id: asks[0].ask_id.clone(),
        request_id: "answer-1".into(),
        answers: pick("PostgreSQL"),
    };
    let receipt = contract.call(&answer).await.unwrap();
    assert_eq!(
        receipt,
        Receipt {
            ask_id: asks[0].ask_id.clone(),
            status: AskStatus::Answered,
            delivery: Delivery::InTurn,
        }
    );
    assert_eq!(
        terminal_of(&session, &sent).await.outcome,
        TerminalOutcome::Completed
    );
    let messages = transcript(&session).await;
    let results = tool_values(&messages);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["status"], "answered");
    assert_eq!(results[0]["answers"][0]["selected"], json!(["PostgreSQL"]));
    assert_eq!(
        user_texts(&messages).len(),
        1,
        "no follow-up: it was delivered in-turn"
    );

    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert!(projection(&snapshot).asks.is_empty());
    assert_ne!(
        inbox_state(&setup.agent, session.session_id()).await,
        SessionInboxState::NeedsYou,
        "attention clears when the Ask closes"
    );
    // An exact retry returns the original receipt; a changed payload conflicts.
    assert_eq!(contract.call(&answer).await.unwrap(), receipt);
    let changed = AnswerAsk {
        answers: pick("SQLite"),
        ..answer
    };
    assert_eq!(
        contract.call(&changed).await.unwrap_err().code,
        ErrorCode::Conflict
    );
}

#[tokio::test]
async fn a_parked_ask_is_answered_by_one_self_contained_follow_up() {
    let setup = setup(vec![
        ask_call(json!({"mode": "continue"})),
        Turn::text("I asked; waiting."),
        Turn::text("Thanks, going with SQLite."),
    ])
    .await;
    let session = new_session(&setup.agent).await;
    let sent = send(&session, "Set up the service").await;
    terminal_of(&session, &sent).await;
    let asks = open_asks(&session, 1).await;
    let parked = tool_values(&transcript(&session).await);
    assert_eq!(parked[0]["status"], "parked");
    assert_eq!(parked[0]["askId"], json!(asks[0].ask_id));

    let contract = bind_session_extension::<_, QuestionContract>(&session);
    let receipt = contract
        .call(&AnswerAsk {
            ask_id: asks[0].ask_id.clone(),
            request_id: "answer-1".into(),
            answers: vec![QuestionAnswer {
                selected: vec!["SQLite".into()],
                text: Some("keep it small".into()),
            }],
        })
        .await
        .unwrap();
    assert_eq!(receipt.delivery, Delivery::FollowUp);
    let follow_up = wait_for(
        &session,
        |snapshot| {
            snapshot
                .terminals
                .iter()
                .filter(|t| t.outcome == TerminalOutcome::Completed)
                .nth(1)
                .cloned()
        },
        |frame| match frame {
            SessionFrame::Update(update) => update.terminals.first().cloned(),
            _ => None,
        },
    )
    .await;
    assert_eq!(follow_up.outcome, TerminalOutcome::Completed);
    let texts = user_texts(&transcript(&session).await);
    assert_eq!(texts.len(), 2, "exactly one follow-up: {texts:?}");
    let prompt = &texts[1];
    assert!(
        prompt.contains("[Database] Which database should the service use?"),
        "{prompt}"
    );
    assert!(
        prompt.contains("Answer: SQLite — \"keep it small\""),
        "{prompt}"
    );
    assert!(prompt.contains(asks[0].ask_id.as_str()), "{prompt}");
}

#[tokio::test]
async fn a_steer_parks_a_waiting_ask_so_the_steer_is_delivered() {
    let setup = setup(vec![ask_call(json!({})), Turn::text("Heard you.")]).await;
    let session = new_session(&setup.agent).await;
    let sent = send(&session, "Set up the service").await;
    open_asks(&session, 1).await;
    steer(&session, "Use whatever is simplest").await;
    terminal_of(&session, &sent).await;
    let messages = transcript(&session).await;
    assert_eq!(tool_values(&messages)[0]["status"], "parked");
    let last_context = setup.model.requests().last().cloned().unwrap();
    assert!(
        user_texts(&last_context.messages)
            .iter()
            .any(|text| text == "Use whatever is simplest"),
        "the steer reached the model"
    );
    assert_eq!(
        open_asks(&session, 1).await.len(),
        1,
        "the Ask stays open, parked"
    );
}

#[tokio::test]
async fn a_decline_reaches_the_waiter_and_withdraw_closes_without_delivery() {
    let setup = setup(vec![
        ask_call(json!({})),
        ask_call(json!({"mode": "continue"})),
        Turn::tool_call("question__withdraw", json!({"askId": "PLACEHOLDER"})),
        Turn::text("Fine."),
    ])
    .await;
    let session = new_session(&setup.agent).await;
    let sent = send(&session, "Go").await;
    let asks = open_asks(&session, 1).await;
    let contract = bind_session_extension::<_, QuestionContract>(&session);
    let receipt = contract
        .call(&DeclineAsk {
            ask_id: asks[0].ask_id.clone(),
            request_id: "no".into(),
            reason: Some("not my call".into()),
        })
        .await
        .unwrap();
    assert_eq!(receipt.status, AskStatus::Declined);
    assert_eq!(receipt.delivery, Delivery::InTurn);
    terminal_of(&session, &sent).await;
    let results = tool_values(&transcript(&session).await);
    assert_eq!(results[0]["status"], "declined");
    assert_eq!(results[0]["reason"], "not my call");
    assert_eq!(results[1]["status"], "parked");
    // The scripted withdraw names no real Ask: the model is told, the run goes on.
    assert!(
        results[2]
            .as_str()
            .unwrap_or_default()
            .contains("no open question"),
        "{}",
        results[2]
    );
    let open = open_asks(&session, 1).await;

    // A person's withdraw is not a command; the model's is. Withdraw the open one.
    let withdrawn = session
        .call_extension(
            &extension_id().unwrap(),
            "withdraw",
            json!({"askId": open[0].ask_id}),
        )
        .await;
    assert_eq!(
        withdrawn.unwrap_err().code,
        ErrorCode::NotFound,
        "people do not withdraw"
    );
}

#[tokio::test]
async fn the_model_withdraws_its_own_open_ask_and_nothing_is_delivered() {
    let setup = setup(vec![
        ask_call(json!({"mode": "continue"})),
        Turn::text("Asked."),
    ])
    .await;
    let session_id = new_session(&setup.agent).await.session_id().clone();
    let session = setup.agent.session(session_id.clone());
    let sent = send(&session, "Go").await;
    terminal_of(&session, &sent).await;
    let asks = open_asks(&session, 1).await;
    setup.agent.close().await.unwrap();

    // The same database, a model that now knows the Ask's id.
    let model = std::sync::Arc::new(shiitake_model::ScriptedModel::new(
        shiitake_model::Script::new(vec![
            Turn::tool_call("question__withdraw", json!({"askId": asks[0].ask_id})),
            Turn::text("Withdrawn."),
        ]),
    ));
    let agent = open_at(
        &setup.dir.path().join("agent.db"),
        model,
        setup.clock.clone(),
        Default::default(),
        |_| {},
    )
    .await;
    let session = agent.session(session_id.clone());
    let sent = send(&session, "Never mind the question").await;
    terminal_of(&session, &sent).await;
    let messages = transcript(&session).await;
    assert_eq!(tool_values(&messages)[1]["status"], "withdrawn");
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert!(projection(&snapshot).asks.is_empty());
    assert_eq!(
        user_texts(&messages).len(),
        2,
        "a withdrawn Ask delivers nothing"
    );
    assert_ne!(
        inbox_state(&agent, &session_id).await,
        SessionInboxState::NeedsYou
    );
    let contract = bind_session_extension::<_, QuestionContract>(&session);
    let late = contract
        .call(&AnswerAsk {
            ask_id: asks[0].ask_id.clone(),
            request_id: "late".into(),
            answers: pick("SQLite"),
        })
        .await;
    // The Ask was withdrawn: the late answer lost, which is a conflict, not bad input.
    let late = late.unwrap_err();
    assert_eq!(late.code, ErrorCode::Conflict, "{late}");
    assert!(late.message.contains("withdrawn"), "{late}");
}

#[tokio::test]
async fn the_answer_flow_collects_one_answer_per_question() {
    let two = json!({"questions": [
        database_question(),
        {"header": "Features", "question": "Which features?", "multiSelect": true,
         "options": [{"label": "Auth"}, {"label": "Search, full text"}, {"label": "Export"}]}
    ], "mode": "continue"});
    let setup = setup(vec![
        Turn::tool_call("question__ask", two),
        Turn::text("Asked."),
        Turn::text("Got the answers."),
    ])
    .await;
    let session = new_session(&setup.agent).await;
    let id = extension_id().unwrap();
    let flow = |input: Value| {
        let session = &session;
        let id = id.clone();
        async move {
            let step = session
                .call_extension(&id, "answer_flow", input)
                .await
                .unwrap();
            serde_json::from_value::<FlowStep>(step).unwrap()
        }
    };
    assert!(matches!(
        flow(json!({})).await,
        FlowStep::Unavailable { .. }
    ));
    let sent = send(&session, "Go").await;
    terminal_of(&session, &sent).await;
    let asks = open_asks(&session, 1).await;

    let FlowStep::Ask { argument, kind, .. } = flow(json!({})).await else {
        panic!("the flow asks the first question");
    };
    assert_eq!(
        argument, "a1",
        "the only waiting Ask is chosen without asking"
    );
    assert!(matches!(
        kind,
        shiitake_protocol::catalog::ArgumentKind::Choice {
            free_text: true,
            multiple: false,
            ..
        }
    ));
    let FlowStep::Ask { argument, kind, .. } = flow(json!({"a1": "PostgreSQL"})).await else {
        panic!("then the second");
    };
    assert_eq!(argument, "a2");
    assert!(matches!(
        kind,
        shiitake_protocol::catalog::ArgumentKind::Choice { multiple: true, .. }
    ));
    let collected = json!({"a1": "PostgreSQL", "a2": "Auth, \"Search, full text\""});
    let FlowStep::Confirm { input, summary } = flow(collected).await else {
        panic!("then it confirms");
    };
    assert!(
        summary.contains("[Features] Auth, Search, full text"),
        "{summary}"
    );
    let mut call = input.clone();
    call["requestId"] = json!("flow-1");
    let receipt: Receipt =
        serde_json::from_value(session.call_extension(&id, "answer", call).await.unwrap()).unwrap();
    assert_eq!(receipt.ask_id, asks[0].ask_id);
    assert_eq!(receipt.delivery, Delivery::FollowUp);

    // Free text that is not a label list is kept as text.
    let FlowStep::Unavailable { .. } = flow(json!({"askId": asks[0].ask_id})).await else {
        panic!("an answered Ask is no longer in the flow");
    };
}

#[tokio::test]
async fn describe_shows_the_validated_bounds() {
    let setup = setup(vec![Turn::text("Hi.")]).await;
    let session = new_session(&setup.agent).await;
    let sent = send(&session, "Hello").await;
    terminal_of(&session, &sent).await;
    let context = setup.model.requests()[0].clone();
    let ask = context
        .tools
        .iter()
        .find(|tool| tool.name == "question__ask")
        .unwrap();
    let schema = &ask.parameters;
    assert_eq!(schema["properties"]["questions"]["minItems"], 1);
    assert_eq!(schema["properties"]["questions"]["maxItems"], 4);
    let question = &schema["properties"]["questions"]["items"]["properties"];
    assert_eq!(question["header"]["maxLength"], 12);
    let expire = &schema["properties"]["onExpire"]["properties"]["afterMinutes"];
    assert_eq!(
        (expire["minimum"].clone(), expire["maximum"].clone()),
        (json!(5), json!(10080))
    );
    assert!(
        context
            .tools
            .iter()
            .any(|tool| tool.name == "question__withdraw")
    );
    assert!(
        !context
            .tools
            .iter()
            .any(|tool| tool.name.contains("answer")),
        "the model has no answer operation"
    );
}

#[tokio::test]
async fn an_expiry_while_the_waiter_is_live_is_delivered_in_turn_once() {
    let setup = setup(vec![
        ask_call(json!({"onExpire": {"afterMinutes": 5, "action": "proceed_with_recommended"}})),
        Turn::text("Proceeding with SQLite."),
    ])
    .await;
    let session = new_session(&setup.agent).await;
    let sent = send(&session, "Set up the service").await;
    open_asks(&session, 1).await;
    setup.clock.advance(std::time::Duration::from_secs(5 * 60));
    assert_eq!(
        terminal_of(&session, &sent).await.outcome,
        TerminalOutcome::Completed
    );
    let messages = transcript(&session).await;
    let results = tool_values(&messages);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["status"], "expired");
    assert_eq!(
        results[0]["answers"][0]["selected"],
        json!(["SQLite"]),
        "the recommended option"
    );
    assert_eq!(
        user_texts(&messages).len(),
        1,
        "delivered in-turn, not again as a follow-up"
    );
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert!(projection(&snapshot).asks.is_empty());
}
