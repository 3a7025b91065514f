//! Commands a person allows for the rest of a Session, in a real Agent: a tool that runs
//! commands (`commands.exec`, recording what it ran) with call facts; "allow for this
//! Session" of one command lets that command run again without asking while another
//! still asks; the approval shows the facts the tool gives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use crate::support::*;
use serde_json::{Value, json};
use shiitake_capabilities::{
    CallFacts, Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId,
    StaticSource,
};
use shiitake_conformance::support::*;
use shiitake_ext_approval::contract::{
    AnswerApproval, ApprovalContract, ApprovalProjection, Decision,
};
use shiitake_ext_testkit::{TestAgent, projection};
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

/// `commands.exec {command}` records `command` in `ran` and answers `ok`; its call
/// facts say where it runs and that it has no network.
async fn commands(ran: Arc<Mutex<Vec<String>>>) -> Arc<Catalog> {
    let exec = Operation::from_fn(
        OperationName::new("exec").unwrap(),
        "Runs a command.",
        move |input: Value, _ctx| {
            let ran = ran.clone();
            async move {
                let line = input["command"].as_str().unwrap_or_default().to_owned();
                ran.lock().unwrap().push(line);
                Ok(Value::from("ok"))
            }
        },
    )
    .with_replay(Replay::Unsafe)
    .with_call_facts(Arc::new(|input: &Value| {
        CallFacts::from([
            (
                "cwd".to_owned(),
                format!("computer://work/{}", input["cwd"].as_str().unwrap_or("")),
            ),
            ("network".to_owned(), "off".to_owned()),
        ])
    }));
    let module = Module::new(ModulePath::new("commands").unwrap(), "Commands.")
        .with_operation(exec)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("commands"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

fn exec(line: &str) -> Turn {
    Turn::tool_call("commands__exec", json!({"command": line, "cwd": "src"}))
}

#[tokio::test]
async fn a_command_allowed_for_the_session_runs_again_and_another_still_asks() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let turns = vec![
        exec("make test"),
        exec("make test && ls"),
        exec("make install"),
        Turn::text("done"),
    ];
    let kit = TestAgent::builder()
        .turns(turns)
        .tools(commands(ran.clone()).await)
        .kit_extension(shiitake_ext_approval::extension(ask_policy()).unwrap())
        .open()
        .await;
    let session = kit.session().await;
    let command = send(&session, "build").await;
    let approval = bind_session_extension::<_, ApprovalContract>(&session);

    let first = until_waiting(&session, 1).await;
    assert_eq!(first[0].arguments["command"], "make test");
    assert_eq!(first[0].facts["cwd"], "computer://work/src");
    assert_eq!(first[0].facts["network"], "off");
    approval
        .call(&AnswerApproval {
            approval_id: first[0].approval_id.clone(),
            request_id: "allow-make-test".into(),
            decision: Decision::AllowSession,
            reason: None,
        })
        .await
        .unwrap();

    // `make test && ls` runs without asking; `make install` waits.
    let second = projection::until::<ApprovalContract>(&session, |p: &ApprovalProjection| {
        p.approvals.len() == 1 && p.approvals[0].approval_id != first[0].approval_id
    })
    .await;
    assert_eq!(second.approvals[0].arguments["command"], "make install");
    assert_eq!(second.allowed_commands, ["make test"]);
    assert!(second.allowed.is_empty(), "the tool itself is not allowed");
    assert_eq!(*ran.lock().unwrap(), ["make test", "make test && ls"]);
    approval
        .call(&AnswerApproval {
            approval_id: second.approvals[0].approval_id.clone(),
            request_id: "deny-install".into(),
            decision: Decision::Deny,
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(ran.lock().unwrap().len(), 2, "the denied command never ran");
}
