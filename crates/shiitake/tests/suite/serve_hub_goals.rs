//! The Hub's behaviour from seed 000 on real `serve --database postgres://`
//! processes, for a tenant made with the operator's token: a goal turn interrupted
//! by a deploy (SIGTERM: the process drains and hands its Sessions over) resumes on
//! the process that stays, the goal stays live and its next turn runs, and a
//! replacement process reads the Session; and a tenant's run that calls
//! `agents.create` makes an Agent the tenant's token reaches on every process and
//! another tenant's token finds `not_found`.
//!
//! The model is the scripted one. `serve` keeps a script's place per data directory,
//! so each process plays its script from the first turn: the scripts are written so
//! that whichever process makes a call, it gets the turn the test means.
//!
//! Reads `SHIITAKE_TEST_POSTGRES_URL`; without it, or when it does not answer, each
//! test prints one `SKIPPED` line, or fails when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::hub::{self as hub, Served, create_tenant, json_of, test_database};

const GOAL: &str = "botanical-session-goal";

/// A Hub `serve` child on `database` playing the scripted model `model`, with the data
/// directory `dir/name`, a 200 ms heartbeat and its stderr in `dir/name.log`.
fn start(dir: &Path, name: &str, database: &str, agent: &str, model: &str) -> Served {
    let mut command = hub::command(dir, name, database, agent);
    command
        .args(["--model", model, "--heartbeat", "200ms"])
        .arg("--workspace")
        .arg(dir)
        // Warnings, and how each owner takes its work over.
        .env("SHIITAKE_LOG", "warn,shiitake_core::owner::runs=info");
    hub::spawn(command, &dir.join(format!("{name}.log")))
}

/// `method path` with `token` through `served`, answered 200: its JSON.
fn ok(served: &Served, token: &str, method: &str, path: &str, body: &Value) -> Value {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let (status, answer) = served.request_as(Some(token), method, path, &body);
    assert_eq!(status, 200, "{method} {path} on {}: {answer}", served.url);
    json_of(&answer)
}

/// A new Session of `token`'s caller through `served`, under `prefix` (`/v1` or an
/// Agent's `/v1/agents/NAME`).
fn new_session(served: &Served, token: &str, prefix: &str, request: &str) -> String {
    let created = ok(
        served,
        token,
        "POST",
        &format!("{prefix}/sessions"),
        &json!({"requestId": request}),
    );
    created["sessionId"].as_str().unwrap().to_owned()
}

fn snapshot(served: &Served, token: &str, session: &str) -> Value {
    ok(
        served,
        token,
        "GET",
        &format!("/v1/sessions/{session}/snapshot?limit=200"),
        &Value::Null,
    )
}

/// The Session's goal, through its `get` command.
fn goal(served: &Served, token: &str, session: &str) -> Value {
    ok(
        served,
        token,
        "POST",
        &format!("/v1/sessions/{session}/extensions/{GOAL}/get"),
        &json!({}),
    )
}

/// The terminal of `command` in `snapshot`, if it has settled.
fn terminal<'a>(snapshot: &'a Value, command: &str) -> Option<&'a Value> {
    snapshot["terminals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|terminal| terminal["commandId"] == command)
}

/// The goal turns' command ids in `snapshot` (the goal's projection), oldest first.
fn goal_turns(snapshot: &Value) -> Vec<String> {
    snapshot["extensions"][GOAL]["value"]["turns"]
        .as_array()
        .map(|turns| {
            turns
                .iter()
                .map(|turn| turn.as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the Session through `served` until `done` holds of its snapshot.
fn until(
    served: &Served,
    token: &str,
    session: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let snapshot = snapshot(served, token, session);
        if done(&snapshot) {
            return snapshot;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not within {within:?} on {}:\n{snapshot:#}\nits log:\n{}",
            served.url,
            std::fs::read_to_string(&served.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The operator's rows of `/v1/hub/nodes` for `tenant`.
fn nodes_of(served: &Served, tenant: &str) -> Vec<Value> {
    let (status, body) = served.request("GET", "/v1/hub/nodes", "");
    assert_eq!(status, 200, "{body}");
    json_of(&body)["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|node| node["agent"] == tenant)
        .cloned()
        .collect()
}

/// The holder of `served`'s row of `tenant`.
fn rows_holder(served: &Served, tenant: &str) -> Value {
    let rows = nodes_of(served, tenant);
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0]["holder"].clone()
}

/// SIGTERMs `served` (a deploy) and waits for it to exit cleanly.
fn drain(served: &mut Served) {
    let status = Command::new("kill")
        .args(["-TERM", &served.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(exited) = served.child.try_wait().unwrap() {
            break exited;
        }
        assert!(Instant::now() < deadline, "serve did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exited.success(), "{exited}");
}

/// The names of the tool calls of the snapshot's assistant messages, in order.
fn tool_calls(snapshot: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for message in snapshot["messages"].as_array().unwrap() {
        for part in message["value"]["content"].as_array().into_iter().flatten() {
            if part["type"] == "toolCall" {
                names.push(part["name"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    names
}

#[test]
fn a_goal_turn_interrupted_by_a_deploy_resumes_and_the_goal_stays_live() {
    let Some(database) = test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Each process plays this from its first turn: the first call of a goal turn is
    // slow (the deploy comes during it) and reads the goal; then the turn ends, and
    // the next goal turn (slow enough to look at the goal between the two) completes it.
    let model = crate::support::script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [{"delay_ms": 6000}, {"tool_call": {"name": "goal__get", "arguments": {}}}]},
            {"steps": [{"text": "Read the goal; one more step."}]},
            {"steps": [{"delay_ms": 3000}, {"tool_call": {"name": "goal__complete", "arguments": {"summary": "done across a deploy"}}}]},
            {"steps": [{"text": "Finished."}]}
        ]}),
    );
    let run = std::process::id();
    let operator = format!("op-goals-{run}");
    let mut first = start(dir.path(), "a", &database, &operator, &model);
    let second = start(dir.path(), "b", &database, &operator, &model);
    let tenant = format!("goals-{run}");
    let token = create_tenant(&first, &tenant);

    // The Session and its goal through the first process: the goal's first turn
    // runs there (the only process that has the tenant open yet).
    let session = new_session(&first, &token, "/v1", &format!("{tenant}-s"));
    let set = ok(
        &first,
        &token,
        "POST",
        &format!("/v1/sessions/{session}/extensions/{GOAL}/set"),
        &json!({"objective": "Finish across a deploy", "requestId": format!("{tenant}-goal")}),
    );
    assert_eq!(set["status"], "live", "{set}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rows = nodes_of(&first, &tenant);
        if rows.len() == 1 && rows[0]["openRuns"] == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the goal turn never ran: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = snapshot(&first, &token, &session);
    let turns = goal_turns(&before);
    assert_eq!(turns.len(), 1, "{before:#}");
    assert!(terminal(&before, &turns[0]).is_none(), "{before:#}");
    assert!(
        nodes_of(&second, &tenant)
            .iter()
            .all(|row| row["holder"] == rows_holder(&first, &tenant)),
        "the other process has not opened the tenant"
    );

    // The deploy: the first process drains mid model call and hands the Session over.
    // The other process never had the tenant open: the drain's announcement opens it
    // there at once (its sweep, every 30 s, would be far later). Only the operator's
    // view is read until it holds the Session, so no request of the tenant opens it.
    drain(&mut first);
    let drained_at = Instant::now();
    while !nodes_of(&second, &tenant)
        .iter()
        .any(|row| row["sessions"] == 1 && row["connected"] == true)
    {
        assert!(
            drained_at.elapsed() < Duration::from_secs(10),
            "the other process did not take the tenant's Session over within 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "the handed-over Session was held by the other process {:?} after the drain",
        drained_at.elapsed()
    );
    let interrupted = &turns[0];
    let settled = until(
        &second,
        &token,
        &session,
        Duration::from_secs(30),
        "the interrupted goal turn settled",
        |snapshot| terminal(snapshot, interrupted).is_some(),
    );
    assert_eq!(
        terminal(&settled, interrupted).unwrap()["outcome"],
        "completed",
        "{settled:#}"
    );
    // The goal is still live (the next goal turn is slow, so this reads it before
    // that turn completes it).
    let live = goal(&second, &token, &session);
    assert_eq!(
        (&live["status"], &live["pauseCause"]),
        (&json!("live"), &Value::Null),
        "{live}"
    );
    let log = std::fs::read_to_string(&second.log).unwrap();
    assert!(
        log.contains("resuming work handed over by a draining process"),
        "the survivor did not resume a handover:\n{log}"
    );

    // The next goal turn runs and completes the goal.
    let done = until(
        &second,
        &token,
        &session,
        Duration::from_secs(30),
        "the next goal turn settled",
        |snapshot| {
            let turns = goal_turns(snapshot);
            turns.len() == 2 && terminal(snapshot, &turns[1]).is_some()
        },
    );
    let turns = goal_turns(&done);
    assert_eq!(
        terminal(&done, &turns[1]).unwrap()["outcome"],
        "completed",
        "{done:#}"
    );
    let outcomes: Vec<&Value> = done["terminals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|terminal| &terminal["outcome"])
        .collect();
    assert_eq!(
        outcomes,
        [&json!("completed"), &json!("completed")],
        "{done:#}"
    );
    // The interrupted call was made again on the survivor, not run twice.
    assert_eq!(
        tool_calls(&done),
        ["goal__get", "goal__complete"],
        "{done:#}"
    );
    let achieved = goal(&second, &token, &session);
    assert_eq!(achieved["status"], "achieved", "{achieved}");
    assert_eq!(achieved["goalId"], set["goalId"], "{achieved}");

    // The rolling deploy goes on: a replacement process reads the Session as it is.
    let replacement = start(dir.path(), "c", &database, &operator, &model);
    let read = snapshot(&replacement, &token, &session);
    assert_eq!(read["messages"], done["messages"], "{read:#}");
    assert_eq!(read["terminals"], done["terminals"], "{read:#}");
    assert_eq!(goal(&replacement, &token, &session), achieved);
}

#[test]
fn a_tenant_run_creates_an_agent_that_only_its_tenant_reaches() {
    let Some(database) = test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = std::process::id();
    let tenant = format!("makers-{run}");
    let other = format!("others-{run}");
    let helper = format!("helper-{run}");
    let model = crate::support::script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [{"tool_call": {"name": "agents__create", "arguments": {"name": helper}}}]},
            {"steps": [{"text": "Made it."}]}
        ]}),
    );
    let operator = format!("op-makers-{run}");
    let first = start(dir.path(), "a", &database, &operator, &model);
    let second = start(dir.path(), "b", &database, &operator, &model);
    let token = create_tenant(&first, &tenant);
    let stranger = create_tenant(&second, &other);

    let session = new_session(&first, &token, "/v1", &format!("{tenant}-s"));
    let accepted = ok(
        &first,
        &token,
        "POST",
        &format!("/v1/sessions/{session}/commands"),
        &json!({"type": "prompt", "requestId": format!("{tenant}-p"), "text": "Make a helper Agent.", "delivery": "followUp"}),
    );
    let command = accepted["commandId"].as_str().unwrap().to_owned();
    let settled = until(
        &first,
        &token,
        &session,
        Duration::from_secs(30),
        "the run settled",
        |snapshot| terminal(snapshot, &command).is_some(),
    );
    assert_eq!(
        terminal(&settled, &command).unwrap()["outcome"],
        "completed",
        "{settled:#}"
    );

    // Both processes list the tenant's two Agents, its first one the default.
    for served in [&first, &second] {
        let listed = ok(served, &token, "GET", "/v1/agents", &Value::Null);
        assert_eq!(
            listed["agents"],
            json!([{"name": tenant, "default": true}, {"name": helper, "default": false}]),
            "{listed}"
        );
    }
    // The new Agent's routes answer for the tenant on either process.
    let helped = new_session(
        &second,
        &token,
        &format!("/v1/agents/{helper}"),
        &format!("{helper}-s"),
    );
    for served in [&first, &second] {
        let listed = ok(
            served,
            &token,
            "GET",
            &format!("/v1/agents/{helper}/sessions"),
            &Value::Null,
        );
        assert!(listed.to_string().contains(&helped), "{listed}");
        ok(
            served,
            &token,
            "GET",
            &format!("/v1/agents/{helper}/sessions/{helped}/snapshot"),
            &Value::Null,
        );
    }

    // agents.create made the new Agent a Session of its own (`docs/ext-agents.md`);
    // `helped` is the other.
    let sessions_of_helper = || -> Vec<String> {
        let listed = ok(
            &second,
            &token,
            "GET",
            &format!("/v1/agents/{helper}/sessions"),
            &Value::Null,
        );
        let mut ids: Vec<String> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["sessionId"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let before = sessions_of_helper();
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(before.contains(&helped), "{before:?}");
    // Another tenant finds neither the Agent nor its Session, and changes nothing.
    let listed = ok(&first, &stranger, "GET", "/v1/agents", &Value::Null);
    assert_eq!(
        listed["agents"],
        json!([{"name": other, "default": true}]),
        "{listed}"
    );
    for served in [&first, &second] {
        for (method, path, body) in [
            (
                "GET",
                format!("/v1/agents/{helper}/sessions"),
                String::new(),
            ),
            (
                "POST",
                format!("/v1/agents/{helper}/sessions"),
                json!({"requestId": "intruder"}).to_string(),
            ),
            (
                "GET",
                format!("/v1/agents/{helper}/sessions/{helped}/snapshot"),
                String::new(),
            ),
            (
                "GET",
                format!("/v1/agents/{helper}/sessions/{helped}/events"),
                String::new(),
            ),
            (
                "GET",
                format!("/v1/agents/{helper}/extensions"),
                String::new(),
            ),
        ] {
            let (status, answer) = served.request_as(Some(&stranger), method, &path, &body);
            assert_eq!(status, 404, "{method} {path} on {}: {answer}", served.url);
            assert_eq!(json_of(&answer)["code"], "not_found", "{answer}");
        }
    }
    assert_eq!(
        sessions_of_helper(),
        before,
        "the stranger changed the Agent"
    );
}
