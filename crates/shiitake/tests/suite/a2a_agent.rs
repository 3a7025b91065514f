//! `serve` as an A2A agent, driven by an agent this project did not write: the official
//! A2A Python SDK (`a2a-sdk` from PyPI, `cargo xtask clients`), its card resolver and
//! JSON-RPC client with a bearer token, against a scripted model. A streamed task
//! reaches its answer; a question ends the stream input-required and the next message
//! of that task answers it; a cancelled task is cancelled; a task whose `serve` is
//! killed and restarted is subscribed to from a new process and every answer arrives
//! exactly once; mistakes get JSON-RPC errors with HTTP 200, and a retried send starts
//! nothing new.
//!
//! Without the clients' Python (`SHIITAKE_CLIENTS_PYTHON`) the tests print a `SKIPPED`
//! line, or fail when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::clients::{Scene, json_lines};

/// The SDK's client in `mode` (with its arguments) against `scene`'s `serve`: the
/// JSON lines it printed.
fn client(scene: &Scene, mode: &[&str]) -> Vec<Value> {
    let token = scene.token();
    let args = [scene.serve.url.as_str(), token.as_str()]
        .into_iter()
        .chain(mode.iter().copied());
    json_lines(
        &scene.python,
        "a2a_client.py",
        args,
        Duration::from_secs(120),
    )
}

/// The events among `lines`, up to the first end of a stream after `from`.
fn events(lines: &[Value], from: usize) -> Vec<&Value> {
    lines[from..]
        .iter()
        .take_while(|line| line.get("end").is_none())
        .filter_map(|line| line.get("event"))
        .collect()
}

/// The state an event puts its task in, if it says one.
fn state(event: &Value) -> Option<&str> {
    event
        .get("task")
        .or_else(|| event.get("statusUpdate"))
        .and_then(|it| it["status"]["state"].as_str())
}

/// The words of a message (its text parts run together).
fn words(message: &Value) -> String {
    message["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// The words of the status message of a task or a status update, if it has one.
fn said(event: &Value) -> Option<String> {
    let it = event.get("statusUpdate").or_else(|| event.get("task"))?;
    Some(words(it.get("status")?.get("message")?))
}

/// The task an event is about.
fn task_of(event: &Value) -> &Value {
    match event.get("task") {
        Some(task) => &task["id"],
        None => event
            .get("statusUpdate")
            .or_else(|| event.get("artifactUpdate"))
            .map_or(&Value::Null, |update| &update["taskId"]),
    }
}

/// What `events` show, in order: each state change or message as `STATE` or
/// `STATE: words`, each artifact as `artifact: words`.
fn story(events: &[&Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| {
            if let Some(artifact) = event.get("artifactUpdate") {
                return format!("artifact: {}", words(&artifact["artifact"]));
            }
            let state = state(event).unwrap_or("?");
            match said(event) {
                Some(words) => format!("{state}: {words}"),
                None if event.get("task").is_some() => format!("task {state}"),
                None => state.to_owned(),
            }
        })
        .collect()
}

#[test]
fn a_client_reads_the_card_and_streams_a_task_to_its_answer() {
    let turns = json!({"model": "scripted", "turns": [
        // A moment before the answer: the stream starts before the run ends.
        {"steps": [{"delay_ms": 500}, {"text": "Hello from Shiitake."}]},
        {"steps": [{"text": "Second answer."}]}
    ]});
    let Some(scene) = Scene::start(&turns) else {
        return;
    };
    let lines = client(&scene, &["stream", "Say hello.", "Say it again."]);
    let card = &lines[0]["card"];
    assert_eq!(card["name"], "main", "{card}");
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": format!("{}/v1/a2a", scene.serve.url), "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0"}])
    );
    assert_eq!(card["capabilities"]["streaming"], true, "{card}");
    assert_eq!(card["skills"][0]["id"], "work", "{card}");

    let streamed = events(&lines, 1);
    let told = story(&streamed);
    // The task first (queued or already running), then what the run said, its answer
    // and its end; the stream closed there.
    assert!(
        matches!(
            told[0].as_str(),
            "task TASK_STATE_SUBMITTED" | "task TASK_STATE_WORKING"
        ),
        "{told:?}"
    );
    let tail: Vec<&str> = told
        .iter()
        .map(String::as_str)
        .skip_while(|step| !step.contains("Hello from Shiitake."))
        .collect();
    assert_eq!(
        tail,
        [
            "TASK_STATE_WORKING: Hello from Shiitake.",
            "artifact: Hello from Shiitake.",
            "TASK_STATE_COMPLETED: Hello from Shiitake.",
        ],
        "{told:?}"
    );
    assert!(
        told.iter()
            .any(|step| step == "TASK_STATE_WORKING" || step == "task TASK_STATE_WORKING")
    );
    let first = &streamed[0]["task"];
    let (task, context) = (
        first["id"].as_str().unwrap(),
        first["contextId"].as_str().unwrap(),
    );
    assert!(context.starts_with("ses_"), "{context}");
    assert_eq!(words(&first["history"][0]), "Say hello.", "{first}");

    // A blocking send in the same context waits for its answer: a new task, same Session.
    let blocked = &lines.iter().find_map(|line| line.get("blocked")).unwrap()["task"];
    assert_eq!(blocked["contextId"], context, "{blocked}");
    assert_ne!(blocked["id"], task);
    assert_eq!(
        blocked["status"]["state"], "TASK_STATE_COMPLETED",
        "{blocked}"
    );
    assert_eq!(words(&blocked["artifacts"][0]), "Second answer.");

    // GetTask of the first task: its prompt and answer as history.
    let got = lines.iter().find_map(|line| line.get("got")).unwrap();
    assert_eq!(got["id"], task);
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    let history: Vec<(&str, String)> = got["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| (message["role"].as_str().unwrap(), words(message)))
        .collect();
    assert_eq!(
        history,
        [
            ("ROLE_USER", "Say hello.".to_owned()),
            ("ROLE_AGENT", "Hello from Shiitake.".to_owned())
        ]
    );
}

#[test]
fn a_question_ends_the_stream_input_required_and_the_next_message_answers_it() {
    let turns = json!({"model": "scripted", "turns": [
        {"steps": [{"tool_call": {"name": "question__ask", "arguments": {"questions": [
            {"header": "Store", "question": "Which database?", "options": [
                {"label": "SQLite"}, {"label": "PostgreSQL"}]}]}}}]},
        {"steps": [{"delay_ms": 500}, {"text": "Noted."}]}
    ]});
    let Some(scene) = Scene::start(&turns) else {
        return;
    };
    let lines = client(&scene, &["question", "Pick a store.", "2"]);
    let asked = events(&lines, 1);
    let last = asked.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{lines:?}");
    let question = said(last).unwrap();
    assert!(
        question.contains("Which database?\n  1) SQLite\n  2) PostgreSQL\n"),
        "{question:?}"
    );
    let task = task_of(last).as_str().unwrap();
    let context = last
        .get("statusUpdate")
        .or_else(|| last.get("task"))
        .and_then(|it| it["contextId"].as_str())
        .unwrap();

    let second = lines
        .iter()
        .position(|line| line.get("end").is_some())
        .unwrap()
        + 1;
    let answered = events(&lines, second);
    let told = story(&answered);
    assert_eq!(
        told[told.len() - 2..],
        ["artifact: Noted.", "TASK_STATE_COMPLETED: Noted."],
        "{told:?}"
    );
    // The same task went on.
    for event in &answered {
        assert_eq!(task_of(event), task, "{event}");
    }
    // The reply "2" picked the second option.
    let transcript = scene.serve.watch_until_idle(context);
    assert!(transcript.contains("PostgreSQL"), "{transcript}");
}

#[test]
fn a_cancelled_task_is_canceled_and_cannot_be_cancelled_again() {
    let turns = json!({"model": "scripted", "turns": [
        {"steps": [{"text": "Starting."}, {"delay_ms": 30000}, {"text": " never"}]}
    ]});
    let Some(scene) = Scene::start(&turns) else {
        return;
    };
    let lines = client(&scene, &["cancel", "Think long."]);
    let submitted = &lines.iter().find_map(|line| line.get("submitted")).unwrap()["task"];
    assert!(
        matches!(
            submitted["status"]["state"].as_str(),
            Some("TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING")
        ),
        "{submitted}"
    );
    let got = lines.iter().find_map(|line| line.get("got")).unwrap();
    assert_eq!(got["status"]["state"], "TASK_STATE_WORKING", "{got}");
    let cancelled = lines.iter().find_map(|line| line.get("cancelled")).unwrap();
    assert_eq!(cancelled["id"], submitted["id"]);
    assert_eq!(
        cancelled["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    let again = lines
        .iter()
        .find_map(|line| line.get("cancelled_again"))
        .unwrap();
    assert_eq!(again, "TaskNotCancelableError");
}

#[test]
fn a_task_is_subscribed_to_after_a_restart_and_every_answer_arrives_once() {
    let read = json!({"tool_call": {"name": "files__read", "arguments": {"path": "notes.txt"}}});
    let turns = json!({"model": "scripted", "turns": [
        {"steps": [{"text": "First."}, read]},
        // The model call `serve` is killed under; the resumed run plays on from the next.
        {"steps": [{"delay_ms": 5000}, {"text": "Killed before this was sent."}]},
        {"steps": [{"text": "Second."}, read]},
        {"steps": [{"delay_ms": 5000}, {"text": "Done."}]}
    ]});
    let Some(mut scene) = Scene::start(&turns) else {
        return;
    };
    let lines = client(&scene, &["start", "Work slowly.", "First."]);
    let started = lines
        .iter()
        .find_map(|line| line.get("started"))
        .unwrap_or_else(|| panic!("the run never said \"First.\": {lines:?}"));
    let task = started["task"].as_str().unwrap().to_owned();
    scene.restart();

    let lines = client(&scene, &["subscribe", &task]);
    let streamed = events(&lines, 1);
    let first = &streamed[0]["task"];
    assert_eq!(first["id"], task.as_str(), "{lines:?}");
    assert!(streamed.len() > 1, "only the task came: {lines:?}");
    let told = story(&streamed);
    assert_eq!(
        told.last().unwrap(),
        "TASK_STATE_COMPLETED: Done.",
        "{told:?}"
    );
    // The history of the task, then the answers streamed after it: each once, in order.
    let mut answers: Vec<String> = first["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "ROLE_AGENT")
        .map(words)
        .collect();
    answers.extend(
        streamed[1..]
            .iter()
            .filter(|event| state(event) == Some("TASK_STATE_WORKING"))
            .filter_map(|event| said(event)),
    );
    assert_eq!(answers, ["First.", "Second.", "Done."], "{told:?} {first}");
}

#[test]
fn mistakes_get_json_rpc_errors_with_http_200() {
    let turns = json!({"model": "scripted", "turns": [{"steps": [{"text": "Fine."}]}]});
    let Some(scene) = Scene::start(&turns) else {
        return;
    };
    let lines = client(&scene, &["raw"]);
    let root = lines.iter().find_map(|line| line.get("root_card")).unwrap();
    assert_eq!(
        root["supportedInterfaces"][0]["url"],
        format!("{}/v1/a2a", scene.serve.url)
    );
    let answers: Vec<(&str, &Value)> = lines
        .iter()
        .filter_map(|line| line.get("raw"))
        .map(|raw| (raw["case"].as_str().unwrap(), raw))
        .collect();
    let expected = [
        ("malformed", -32700),
        ("batch", -32600),
        ("unknown_method", -32601),
        ("bad_params", -32602),
        ("unknown_task", -32001),
        ("not_a_task_id", -32001),
        ("unknown_context", -32602),
        ("huge", -32600),
    ];
    assert_eq!(answers.len(), expected.len(), "{lines:?}");
    for ((case, raw), (expected_case, code)) in answers.iter().zip(expected) {
        assert_eq!(*case, expected_case);
        assert_eq!(raw["status"], 200, "{raw}");
        assert_eq!(raw["body"]["jsonrpc"], "2.0", "{raw}");
        assert_eq!(raw["body"]["error"]["code"], code, "{raw}");
    }
    let unknown_method = answers[2].1;
    assert_eq!(unknown_method["body"]["id"], 1);
    // A retried send (the same messageId) started nothing new.
    let retried: Vec<&Value> = lines
        .iter()
        .filter_map(|line| line.get("retried"))
        .map(|answer| &answer["result"]["task"]["id"])
        .collect();
    assert_eq!(retried.len(), 2, "{lines:?}");
    assert!(retried[0].is_string(), "{lines:?}");
    assert_eq!(retried[0], retried[1]);
    let sdk = lines.iter().find_map(|line| line.get("sdk_error")).unwrap();
    assert_eq!(sdk, "TaskNotFoundError");
}

/// On a Hub of two processes, a tenant's task sent through one is read through the
/// other; another tenant's token gets neither the Agent's card nor its endpoint (`404`),
/// and naming the task or its context through its own Agent finds nothing.
#[test]
fn on_a_hub_a_tenant_reaches_only_its_own_agent_over_a2a() {
    use crate::support::hub::{ScriptedHub, create_tenant, tenant_names, test_database};
    let Some(python) = shiitake_test_services::Service::clients_python() else {
        return;
    };
    let Some(database) = test_database() else {
        return;
    };
    let (operator, tenant, other) = tenant_names("a2a");
    let hub = ScriptedHub::new(
        &database,
        &operator,
        &json!({"model": "scripted", "turns": [{"steps": [{"text": "Done for you."}]}]}),
    );
    let (one, two) = (hub.process("one"), hub.process("two"));
    let token = create_tenant(&one, &tenant);
    let other_token = create_tenant(&one, &other);
    let run_client = |url: &str, token: &str, mode: &[&str]| {
        let args = [url, token].into_iter().chain(mode.iter().copied());
        json_lines(&python, "a2a_client.py", args, Duration::from_secs(120))
    };

    let lines = run_client(&one.url, &token, &["send_on", &tenant, "Do it."]);
    let card = lines
        .iter()
        .find_map(|line| line.get("agent_card"))
        .unwrap();
    assert_eq!(card["name"], tenant.as_str(), "{card}");
    let url = card["supportedInterfaces"][0]["url"].as_str().unwrap();
    assert!(url.ends_with(&format!("/v1/agents/{tenant}/a2a")), "{url}");
    let task = &lines.iter().find_map(|line| line.get("blocked")).unwrap()["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{lines:?}");
    let task_id = task["id"].as_str().unwrap();

    // The same task through the other process.
    let lines = run_client(&two.url, &token, &["subscribe", task_id]);
    let seen = lines.iter().find_map(|line| line.get("event")).unwrap();
    assert_eq!(
        seen["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{lines:?}"
    );

    // Another tenant, through the other process.
    let lines = run_client(&two.url, &other_token, &["probe", &tenant, task_id]);
    let probes: Vec<&Value> = lines.iter().filter_map(|line| line.get("probe")).collect();
    let case = |name: &str| {
        *probes
            .iter()
            .find(|probe| probe["case"] == name)
            .unwrap_or_else(|| panic!("no {name} in {lines:?}"))
    };
    assert_eq!(case("card")["status"], 404, "{probes:?}");
    assert_eq!(case("their_endpoint")["status"], 404, "{probes:?}");
    assert_eq!(
        case("get_task")["body"]["error"]["code"],
        -32001,
        "{probes:?}"
    );
    assert_eq!(
        case("cancel_task")["body"]["error"]["code"],
        -32001,
        "{probes:?}"
    );
    assert_eq!(
        case("into_context")["body"]["error"]["code"],
        -32602,
        "{probes:?}"
    );
    for probe in &probes {
        assert!(!probe.to_string().contains("Done for you"), "{probe}");
    }
}
