//! The seed's fresh-project check: a new project that uses only the packed crates
//! builds a Local Agent with the roster and the scripted model, runs a Session through
//! a tool call, answers a question through the bound contract, and reads it all back
//! through `RemoteAgent` over HTTP.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use shiitake_client::{ClientOptions, RemoteAgent, bind_session_extension};
use shiitake_core::FixedModel;
use shiitake_ext_question::contract::{
    AnswerAsk, AskView, QuestionAnswer, QuestionContract, QuestionProjection,
};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::{ExtensionViewV0, view};
use shiitake_protocol::message::{AssistantContent, Message};
use shiitake_protocol::{
    AgentApi, PromptText, ReadOptions, RequestId, SendOptions, SessionApi, SessionSnapshot,
};
use shiitake_roster_local::{LocalDirectory, LocalOptions};
use shiitake_server::{ServerConfig, Token, directory_router};

/// Runs the whole check on its own runtime.
pub fn local_roster() -> Result<(), String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|error| format!("runtime: {error}"))?;
    // The timer is made inside the runtime: a `Sleep` needs its reactor.
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(60), check()).await })
        .map_err(|_| "timed out after 60 s".to_owned())?
}

fn fail(what: &str) -> impl Fn(String) -> String + '_ {
    move |error| format!("{what}: {error}")
}

async fn check() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| fail("temp dir")(e.to_string()))?;
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call(
            "plan__update_plan",
            json!({"steps": [{"step": "Choose a database", "status": "in_progress"}]}),
        ),
        Turn::tool_call(
            "question__ask",
            json!({"mode": "continue", "questions": [{
                "header": "Database",
                "question": "Which database should the service use?",
                "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]
            }]}),
        ),
        Turn::text("Asked the person."),
        Turn::text("Going with SQLite."),
    ])));
    let options = LocalOptions::new(dir.path().join("data"), Arc::new(FixedModel(model)));
    let directory = LocalDirectory::open(options)
        .await
        .map_err(|e| fail("open the Local roster")(e.to_string()))?;

    let token = "stranger-token-0123456789abcdef";
    let app = directory_router(
        Arc::new(directory.clone()),
        ServerConfig::new(Token::new(token).map_err(|e| fail("token")(e.to_string()))?),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| fail("listen")(e.to_string()))?;
    let url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| fail("listen")(e.to_string()))?
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let client = RemoteAgent::new(ClientOptions::new(url).with_token(token))
        .map_err(|e| fail("client")(e.to_string()))?;
    let agents = client.agents().await.map_err(|e| fail("GET /v1/agents")(e.to_string()))?;
    let main = agents
        .agents
        .first()
        .map(|entry| entry.name.clone())
        .ok_or("the directory lists no Agent")?;
    let agent = client.agent(main);
    let session_id = agent
        .create_session(RequestId::new("stranger-1").map_err(|e| e.to_string())?)
        .await
        .map_err(|e| fail("create a Session")(e.to_string()))?;
    let session = agent.session(session_id);
    session
        .send(
            PromptText::new("Plan the service, and ask me which database.").map_err(|e| e.to_string())?,
            SendOptions::default(),
        )
        .await
        .map_err(|e| fail("send")(e.to_string()))?;

    let ask = until(&session, |snapshot| open_asks(snapshot).into_iter().next()).await?;
    let receipt = bind_session_extension::<_, QuestionContract>(&session)
        .call(&AnswerAsk {
            ask_id: ask.ask_id.clone(),
            request_id: "stranger-answer-1".into(),
            answers: vec![QuestionAnswer {
                selected: vec!["SQLite".into()],
                text: None,
            }],
        })
        .await
        .map_err(|e| fail("answer through the bound contract")(e.to_string()))?;
    if receipt.ask_id != ask.ask_id {
        return Err(format!("the receipt names another Ask: {receipt:?}"));
    }
    let last = until(&session, |snapshot| {
        last_text(snapshot).filter(|text| text == "Going with SQLite.")
    })
    .await?;
    let snapshot = session
        .read(ReadOptions::default())
        .await
        .map_err(|e| fail("read back")(e.to_string()))?;
    let plan_called = snapshot.messages.iter().any(|message| match &message.value {
        Message::ToolResult(result) => result.tool_name == "plan__update_plan" && !result.is_error,
        _ => false,
    });
    if !plan_called {
        return Err("the transcript read back over HTTP has no plan tool result".into());
    }
    println!("stranger fixture: Local roster over HTTP: tool call, answered question, reply {last:?}");
    server.abort();
    directory.close().await;
    Ok(())
}

/// Reads the Session over HTTP until `found` gives a value (at most 30 s).
async fn until<T>(
    session: &impl SessionApi,
    found: impl Fn(&SessionSnapshot) -> Option<T>,
) -> Result<T, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let snapshot = session
            .read(ReadOptions::default())
            .await
            .map_err(|e| fail("read")(e.to_string()))?;
        if let Some(value) = found(&snapshot) {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(format!("gave up waiting; last snapshot: {snapshot:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn open_asks(snapshot: &SessionSnapshot) -> Vec<AskView> {
    match view::<QuestionContract>(&snapshot.extensions) {
        Ok(ExtensionViewV0::Running { value }) => value.unwrap_or_else(QuestionProjection::default).asks,
        _ => Vec::new(),
    }
}

fn last_text(snapshot: &SessionSnapshot) -> Option<String> {
    snapshot.messages.iter().rev().find_map(|message| match &message.value {
        Message::Assistant(assistant) => assistant.content.iter().find_map(|block| match block {
            AssistantContent::Text(text) => Some(text.text.clone()),
            _ => None,
        }),
        _ => None,
    })
}
