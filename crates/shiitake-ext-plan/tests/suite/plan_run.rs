//! A plan updated over a run with the scripted model, opened and cleared by a person;
//! the bounds reach the model as tool errors.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_ext_plan::contract::*;
use shiitake_ext_testkit::{TestAgent, connect};
use shiitake_model::Turn;
use shiitake_protocol::*;

async fn open(turns: Vec<Turn>) -> TestAgent {
    TestAgent::builder()
        .turns(turns)
        .kit_extension(shiitake_ext_plan::extension().unwrap())
        .open()
        .await
}

fn steps(items: &[(&str, StepStatus)]) -> Vec<PlanStep> {
    items
        .iter()
        .map(|(step, status)| PlanStep {
            step: (*step).into(),
            status: *status,
        })
        .collect()
}

fn update(items: &[(&str, StepStatus)]) -> Turn {
    Turn::tool_call("plan__update_plan", json!({ "steps": steps(items) }))
}

async fn projection(session: &impl SessionApi) -> PlanProjection {
    shiitake_ext_testkit::projection::read::<PlanContract>(session)
        .await
        .unwrap()
}

async fn history(fixture: &TestAgent) -> Vec<Value> {
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT value FROM extension_rows WHERE extension_id = ? AND collection = 'history' ORDER BY key",
    )
    .bind(EXTENSION_ID)
    .fetch_all(&mut connect(fixture.path()).await)
    .await
    .unwrap();
    rows.iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect()
}

use StepStatus::*;

#[tokio::test]
async fn a_plan_updated_over_a_run_then_opened_and_cleared_by_a_person() {
    let fixture = open(vec![
        update(&[("Read the code", InProgress), ("Fix the bug", Pending)]),
        update(&[("Read the code", Completed), ("Fix the bug", InProgress)]),
        Turn::text("Working on the fix."),
        Turn::text("Still on it."),
    ])
    .await;
    let session = new_session(&fixture.agent).await;
    let first = send(&session, "Fix the bug").await;
    assert_eq!(
        terminal_of(&session, &first).await.outcome,
        TerminalOutcome::Completed
    );
    let clear_action = FooterAction {
        label: "Clear plan".into(),
        command: "plan".into(),
        input: json!({"action": "clear"}),
    };
    assert_eq!(
        projection(&session).await,
        PlanProjection {
            footer: Some(PlanFooter {
                revision: 2,
                current: Some("Fix the bug".into()),
                completed: 1,
                total: 2,
                expanded: false,
                steps: None,
                actions: vec![clear_action.clone()],
            })
        },
        "updates keep only the current step and progress visible"
    );
    // Both tool calls answered the model without error.
    let outline = outline(&transcript(&session).await);
    assert_eq!(
        outline
            .iter()
            .filter(|l| l.starts_with("tool plan__update_plan:"))
            .count(),
        2,
        "{outline:?}"
    );

    // The next run sees the live plan as quiet context.
    let second = send(&session, "Go on").await;
    terminal_of(&session, &second).await;
    let requests = fixture.model.requests();
    let last = requests.last().unwrap();
    assert!(
        last.system_prompt.contains("[x] Read the code")
            && last.system_prompt.contains("[>] Fix the bug"),
        "{}",
        last.system_prompt
    );
    assert!(last.tools.iter().any(|t| t.name == "plan__update_plan"));

    // `/plan` opens the full checklist.
    let plan = bind_session_extension::<_, PlanContract>(&session);
    let opened = plan
        .call(&PlanCommand {
            action: PlanAction::Open,
            request_id: None,
        })
        .await
        .unwrap();
    let live = steps(&[("Read the code", Completed), ("Fix the bug", InProgress)]);
    assert_eq!(
        opened,
        PlanView {
            steps: Some(live.clone()),
            revision: Some(2),
            cleared: false
        }
    );
    let footer = projection(&session).await.footer.unwrap();
    assert_eq!((footer.expanded, footer.steps), (true, Some(live.clone())));

    // The footer's Clear plan action is the same owner command, idempotent by request id.
    let mut input = clear_action.input.clone();
    input["requestId"] = json!("clear-1");
    let cleared = session
        .call_extension(
            &ExtensionId::new(EXTENSION_ID).unwrap(),
            &clear_action.command,
            input.clone(),
        )
        .await
        .unwrap();
    assert_eq!(
        cleared,
        json!({"steps": null, "revision": null, "cleared": true})
    );
    assert_eq!(projection(&session).await, PlanProjection { footer: None });
    let retried = session
        .call_extension(&ExtensionId::new(EXTENSION_ID).unwrap(), "plan", input)
        .await
        .unwrap();
    assert_eq!(retried, cleared, "an exact retry answers the first result");
    // `/plan clear` with nothing live clears nothing.
    let again = plan
        .call(&PlanCommand {
            action: PlanAction::Clear,
            request_id: None,
        })
        .await
        .unwrap();
    assert!(!again.cleared);

    // The cleared plan stays in the history.
    let history = history(&fixture).await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["revision"], json!(2));
    assert_eq!(
        history[0]["end"],
        json!({"kind": "cleared", "by": "person"})
    );
    assert_eq!(history[0]["steps"], serde_json::to_value(&live).unwrap());
    fixture.agent.close().await.unwrap();
}

#[tokio::test]
async fn a_finished_or_emptied_plan_leaves_the_footer_and_stays_in_history() {
    let fixture = open(vec![
        update(&[("One", InProgress)]),
        update(&[("One", Completed)]),
        update(&[("Two", Pending)]),
        Turn::tool_call("plan__update_plan", json!({"steps": []})),
        Turn::text("done"),
    ])
    .await;
    let session = new_session(&fixture.agent).await;
    let id = send(&session, "go").await;
    terminal_of(&session, &id).await;
    assert_eq!(projection(&session).await, PlanProjection { footer: None });
    let ends: Vec<(Value, Value)> = history(&fixture)
        .await
        .into_iter()
        .map(|h| (h["revision"].clone(), h["end"].clone()))
        .collect();
    assert_eq!(
        ends,
        vec![
            (json!(2), json!({"kind": "finished"})),
            (json!(3), json!({"kind": "cleared", "by": "model"})),
        ]
    );
    fixture.agent.close().await.unwrap();
}

#[tokio::test]
async fn bounds_reach_the_model_as_tool_errors_and_leave_the_plan_alone() {
    let fifty: Vec<(String, StepStatus)> = (0..50).map(|i| (format!("s{i}"), Pending)).collect();
    let as_steps = |n: usize| -> Vec<PlanStep> {
        (0..n)
            .map(|i| PlanStep {
                step: format!("s{i}"),
                status: Pending,
            })
            .collect()
    };
    assert_eq!(fifty.len(), MAX_STEPS);
    let fixture = open(vec![
        Turn::tool_call("plan__update_plan", json!({"steps": as_steps(50)})),
        Turn::tool_call("plan__update_plan", json!({"steps": as_steps(51)})),
        update(&[("a", InProgress), ("b", InProgress)]),
        Turn::text("ok"),
    ])
    .await;
    let session = new_session(&fixture.agent).await;
    let id = send(&session, "plan big").await;
    terminal_of(&session, &id).await;
    let outline = outline(&transcript(&session).await);
    let results: Vec<&String> = outline
        .iter()
        .filter(|l| l.starts_with("tool plan__update_plan"))
        .collect();
    assert_eq!(results.len(), 3, "{outline:?}");
    assert!(
        !results[0].contains("(error)"),
        "50 steps pass: {}",
        results[0]
    );
    assert!(
        results[1].contains("(error)"),
        "51 steps do not: {}",
        results[1]
    );
    assert!(
        results[2].contains("(error)") && results[2].contains("in progress"),
        "two in progress do not: {}",
        results[2]
    );
    let footer = projection(&session).await.footer.unwrap();
    assert_eq!((footer.total, footer.revision), (50, 1));
    fixture.agent.close().await.unwrap();
}

#[tokio::test]
async fn the_catalog_advertises_plan_open_and_clear() {
    let fixture = open(vec![]).await;
    let catalogs = fixture.agent.catalogs().await.unwrap();
    let entry = catalogs
        .catalogs
        .iter()
        .find(|e| e.catalog.extension_id.as_str() == EXTENSION_ID)
        .unwrap();
    let text = serde_json::to_value(&entry.catalog).unwrap();
    assert_eq!(text["format"], json!("whistle.catalog/v1"));
    assert_eq!(text["commands"][0]["name"], json!("plan"));
    assert_eq!(text["commands"][0]["call"], json!("plan"));
    assert_eq!(
        text["commands"][0]["arguments"][0]["kind"]["choices"],
        json!([{"label": "open", "value": "open"}, {"label": "clear", "value": "clear"}])
    );
    fixture.agent.close().await.unwrap();
}
