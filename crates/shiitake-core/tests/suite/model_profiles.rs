//! What a run offers its model by the model's profile: the host's tool set for that
//! profile (a tool outside it is neither listed nor run), short descriptions and a short
//! system prompt for a small model, and a system prompt and tool list that are the same
//! bytes on every call and every run.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_conformance::{TestTools, tools};
use shiitake_core::config::SMALL_SYSTEM_PROMPT;
use shiitake_core::extension::Grants;
use shiitake_core::{Agent, AgentConfig, ToolSet};
use shiitake_model::{ModelContext, ModelProfile, Script, ScriptedModel, Turn};
use shiitake_protocol::message::Message;
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

use crate::support::harness::config;
use crate::support::probe::Probe;

/// An Agent with the test tools (`test.echo`, `test.slow`) and the probe (`probe.bump`,
/// a two-sentence prompt section), its model of `profile`, configured by `configure`.
async fn profiled_agent(
    dir: &tempfile::TempDir,
    turns: Vec<Turn>,
    profile: ModelProfile,
    configure: impl FnOnce(&mut AgentConfig),
) -> (Agent, Arc<ScriptedModel>, Arc<TestTools>) {
    let model = Arc::new(ScriptedModel::new(Script::new(turns)).with_profile(profile));
    let mut config = config(model.clone());
    configure(&mut config);
    let counters = Arc::new(TestTools::default());
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let probe = Probe::new().with_section("Probe one. Probe two.".into());
    let agent = Agent::builder(
        Arc::new(store),
        tools::catalog(counters.clone()).await,
        config,
    )
    .extension(probe, Grants::all())
    .open()
    .await
    .unwrap();
    (agent, model, counters)
}

/// What a model of `profile` reads in one run of "hello" (answered "hi"), the Agent
/// configured by `configure`.
async fn first_request(
    profile: ModelProfile,
    configure: impl FnOnce(&mut AgentConfig),
) -> ModelContext {
    let dir = tempfile::tempdir().unwrap();
    let (agent, model, _) = profiled_agent(&dir, vec![Turn::text("hi")], profile, configure).await;
    let session = new_session(&agent).await;
    let command = send(&session, "hello").await;
    terminal_of(&session, &command).await;
    model.requests().remove(0)
}

fn names(context: &ModelContext) -> Vec<&str> {
    context
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect()
}

#[tokio::test]
async fn a_small_model_gets_the_hosts_set_short_and_a_call_outside_it_is_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::tool_call("test__slow", json!({})),
        Turn::tool_call("probe__bump", json!({})),
        Turn::text("done"),
        Turn::text("again"),
    ];
    let (agent, model, counters) = profiled_agent(&dir, turns, ModelProfile::Small, |config| {
        config.offered_tools.small = ToolSet::parse("test.echo,probe").unwrap();
    })
    .await;
    let session = new_session(&agent).await;
    let first = send(&session, "go").await;
    assert_eq!(
        terminal_of(&session, &first).await.outcome,
        TerminalOutcome::Completed
    );

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(names(&requests[0]), ["test__echo", "probe__bump"]);
    assert_eq!(requests[0].tools[1].description, "Bumps the probe counter.");
    // The short prompt, and of the probe's section its first sentence only.
    let system = &requests[0].system_prompt;
    assert!(system.starts_with(SMALL_SYSTEM_PROMPT), "{system}");
    assert!(system.ends_with("Probe one."), "{system}");
    // The call of a tool outside the set was answered as unknown and never ran.
    assert_eq!(counters.slow_started.load(Ordering::SeqCst), 0);
    let slow = transcript(&session)
        .await
        .into_iter()
        .find_map(|message| match message {
            Message::ToolResult(result) if result.tool_name == "test__slow" => Some(result),
            _ => None,
        });
    let slow = slow.unwrap();
    assert!(slow.is_error);
    assert_eq!(
        slow.content,
        vec![message::InputContent::Text(message::TextContent::new(
            "no tool `test__slow` is available"
        ))]
    );
    assert_eq!(
        slow.details.as_ref().map(|d| d["error"].clone()),
        Some(json!("unknown_operation"))
    );

    // Every call of the run and the next run read the same prompt and tools, byte for byte.
    let second = send(&session, "again").await;
    terminal_of(&session, &second).await;
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    for later in &requests[1..] {
        assert_eq!(later.system_prompt, requests[0].system_prompt);
        assert_eq!(later.tools, requests[0].tools);
        assert_eq!(
            serde_json::to_vec(&later.tools).unwrap(),
            serde_json::to_vec(&requests[0].tools).unwrap()
        );
    }
}

#[tokio::test]
async fn by_default_a_small_model_gets_the_compact_set_and_no_section_about_other_tools() {
    let request = first_request(ModelProfile::Small, |_| {}).await;
    // Neither the test tools nor the probe's are files or question tools.
    assert_eq!(names(&request), Vec::<&str>::new());
    assert_eq!(request.system_prompt, SMALL_SYSTEM_PROMPT);
}

#[tokio::test]
async fn a_full_model_gets_everything_in_full_unless_the_host_names_a_set() {
    let request = first_request(ModelProfile::Full, |_| {}).await;
    assert_eq!(names(&request), ["test__echo", "test__slow", "probe__bump"]);
    assert!(
        request.system_prompt.ends_with("Probe one. Probe two."),
        "{}",
        request.system_prompt
    );
    assert!(!request.system_prompt.starts_with(SMALL_SYSTEM_PROMPT));

    let request = first_request(ModelProfile::Full, |config| {
        config.offered_tools.full = ToolSet::parse("test").unwrap();
    })
    .await;
    assert_eq!(names(&request), ["test__echo", "test__slow"]);
    // The probe offers no tool to this model: its section is left out.
    assert!(
        !request.system_prompt.contains("Probe one."),
        "{}",
        request.system_prompt
    );
}
