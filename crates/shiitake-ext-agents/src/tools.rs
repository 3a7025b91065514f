//! The model tools `agents.create`, `agents.send`, `agents.answer` and `agents.escalate`.
//!
//! `agents.send` accepts the work in the child's Session through
//! `LocalSession::send_from` with a `Sender` naming this Agent and Session, records it,
//! and waits in-turn for the reply or for a question the child asks this Session
//! (`waiting_on_you`). What comes after the tool returned is delivered as messages by a
//! follower. Request ids derived from the call's execution id make a replay after a
//! restart reach the same Session and command, so `agents.send` and `agents.create`
//! are replay-safe.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use shiitake_capabilities::{InvocationContext, Replay, ToolError};
use shiitake_core::extension::Sender;
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::kit::{AsyncToolCall, KitError, Tool};
use shiitake_core::{Agent, LocalSession};
use shiitake_ext_question::contract::{AskId, AskView};
use shiitake_ext_question::sender;
use shiitake_protocol::{
    AgentApi, CommandId, PageLimit, PromptText, ReadOptions, RequestId, SendOptions, SessionApi,
    SessionId, ShiitakeError,
};

use crate::contract::{
    AgentName, AnswerInput, ChildRecord, CreateInput, Created, EscalateInput, MAX_PROMPTED_AGENTS,
    SEND_WAIT_CAP_SECS, SEND_WAIT_RESERVE_SECS, SendInput, SendMode, SendResult, SendStatus, Via,
};
use crate::directory::DirectoryError;
use crate::follow::{self, Awaited, Follower, Found};
use crate::record;
use crate::runtime::{GoalNews, Shared, session_of};

/// What a handler knows of its call: the runtime, the owner's transaction door and
/// the sending Session (the run's facts).
#[derive(Clone)]
struct Run {
    shared: Arc<Shared>,
    tools: ToolTx,
    /// The sending Session.
    session_id: SessionId,
}

fn for_model(error: ShiitakeError) -> ToolError {
    ToolError::for_model(error.message)
}

/// A request id for `purpose` of this call: stable across a replay of the call.
fn request_id(purpose: &str, ctx: &InvocationContext) -> RequestId {
    RequestId::new(format!("agents-{purpose}:{}", ctx.execution_id().as_str()))
        .unwrap_or_else(|_| shiitake_core::ids::request_id())
}

/// How long an in-turn wait may last: the call's deadline less the reserve, at most the cap.
pub(crate) fn send_wait(remaining: Option<Duration>) -> Duration {
    let cap = Duration::from_secs(SEND_WAIT_CAP_SECS);
    match remaining {
        Some(left) => left
            .saturating_sub(Duration::from_secs(SEND_WAIT_RESERVE_SECS))
            .min(cap),
        None => cap,
    }
}

/// One `agents.*` tool: `handler` runs on the run's task (it waits on other Agents)
/// with the call's [`Run`] and invocation, and its result goes to the model as JSON.
fn tool<I, O, Fut>(
    shared: &Arc<Shared>,
    name: &str,
    description: &str,
    replay: Replay,
    handler: fn(Run, I, InvocationContext) -> Fut,
) -> Result<Tool<SessionId>, KitError>
where
    I: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize,
    Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
{
    let shared = shared.clone();
    let tool = Tool::waiting(
        name,
        description,
        move |call: AsyncToolCall<SessionId>, input: I| {
            let run = Run {
                shared: shared.clone(),
                tools: call.tools,
                session_id: call.call.run,
            };
            let answered = handler(run, input, call.ctx);
            async move {
                let output = answered.await?;
                serde_json::to_value(output).map_err(|error| ToolError::fatal(error.to_string()))
            }
        },
    )?;
    Ok(tool.replay(replay))
}

/// The `agents.*` tools, in the order the model sees them. Request ids derived from
/// the call make `send` and `create` safe to repeat after a restart.
pub(crate) fn tools(shared: &Arc<Shared>) -> Result<Vec<Tool<SessionId>>, KitError> {
    Ok(vec![
        tool(
            shared,
            "send",
            "Send another Agent work and wait for its reply. A question it asks you comes back as \
             waiting_on_you. mode \"continue\" returns at once; the reply arrives later as a message.",
            Replay::Safe,
            send,
        )?,
        tool(
            shared,
            "create",
            "Create a new Agent with its own conversations; then give it work with agents.send.",
            Replay::Safe,
            create,
        )?,
        tool(
            shared,
            "answer",
            "Answer a question an Agent you sent work to asks you (waiting_on_you).",
            Replay::Unsafe,
            answer,
        )?,
        tool(
            shared,
            "escalate",
            "Pass a question an Agent you sent work to asks you to a person instead of answering it.",
            Replay::Unsafe,
            escalate,
        )?,
    ])
}

/// The prompt section: who this Agent is, whom it can reach, and how the tools go.
pub(crate) fn prompt_section(shared: &Shared) -> String {
    let others: Vec<String> = shared
        .directory
        .names()
        .into_iter()
        .filter(|name| name != &shared.me)
        .take(MAX_PROMPTED_AGENTS)
        .map(String::from)
        .collect();
    let reach = if others.is_empty() {
        "No other Agent exists yet; agents.create makes one.".to_owned()
    } else {
        format!("Agents you can send work to: {}.", others.join(", "))
    };
    format!(
        "You are the Agent {me}. {reach} agents.send gives one of them work and waits for \
         its reply; a question it asks you comes back as waiting_on_you: answer it with \
         agents.answer, or pass it to a person with agents.escalate. Questions you leave \
         go to a person when your turn ends.",
        me = shared.me
    )
}

impl Run {
    fn parent(&self, agent: &Agent) -> LocalSession {
        agent.session(self.session_id.clone())
    }

    /// Records one accepted create or send in this Session and shows it in the footer.
    async fn record(
        &self,
        agent: &AgentName,
        child: &SessionId,
        via: Via,
        command: Option<&CommandId>,
    ) -> Result<(), ToolError> {
        let (agent, child_id) = (agent.clone(), child.as_str().to_owned());
        let command = command.map(|c| c.as_str().to_owned());
        self.tools
            .run(move |tx| {
                let mut row = record::child(&agent, &child_id, via, tx.now());
                row.last_command_id = command;
                Ok(json!(record::put(tx, row)?))
            })
            .await?;
        self.shared.children_changed(&self.session_id);
        Ok(())
    }

    async fn records(&self) -> Result<Vec<ChildRecord>, ToolError> {
        let rows = self.tools.run(|tx| Ok(json!(record::load(tx)?))).await?;
        serde_json::from_value(rows).map_err(|error| ToolError::fatal(format!("record: {error}")))
    }
}

async fn send(run: Run, input: SendInput, ctx: InvocationContext) -> Result<SendResult, ToolError> {
    let text = PromptText::new(input.text.as_str())
        .map_err(|error| ToolError::for_model(format!("agents.send text: {error}")))?;
    let me = run.shared.agent().await.map_err(for_model)?;
    let target = run.shared.reach(&input.agent).map_err(for_model)?;
    let child_id = match input.session_id {
        Some(id) => SessionId::new(id)
            .map_err(|error| ToolError::for_model(format!("agents.send sessionId: {error}")))?,
        None => match record::last_session_with(&run.records().await?, &input.agent) {
            Some(id) => SessionId::new(id).map_err(|error| ToolError::fatal(error.to_string()))?,
            None => target
                .create_session(request_id("session", &ctx))
                .await
                .map_err(for_model)?,
        },
    };
    if input.agent == run.shared.me && child_id == run.session_id {
        return Err(ToolError::for_model(
            "agents.send cannot send work to the Session that is sending it",
        ));
    }
    let child = target.session(child_id.clone());
    let sent_by = Sender {
        agent: run.shared.me.as_str().to_owned(),
        session_id: run.session_id.clone(),
    };
    let options = SendOptions {
        request_id: Some(request_id("send", &ctx)),
        delivery: None,
    };
    let accepted = child
        .send_from(sent_by, text, options)
        .await
        .map_err(for_model)?;
    run.record(
        &input.agent,
        &child_id,
        Via::Sent,
        Some(&accepted.command_id),
    )
    .await?;
    let parent = run.parent(&me);
    run.shared
        .tell_goal(
            &parent,
            &accepted.command_id,
            GoalNews::Sent(input.agent.clone()),
        )
        .await;
    let follower = Follower {
        parent,
        child: child.clone(),
        agent: input.agent.clone(),
        command_id: accepted.command_id.clone(),
        awaited: Awaited::Command(accepted.command_id.clone()),
        told: BTreeSet::new(),
    };
    let result = |status, reply, asks: Vec<AskView>| SendResult {
        agent: input.agent.clone(),
        session_id: child_id.as_str().to_owned(),
        command_id: accepted.command_id.as_str().to_owned(),
        status,
        reply,
        waiting_on_you: asks,
    };
    if input.mode == SendMode::Continue {
        follow::spawn(&run.shared, follower);
        return Ok(result(SendStatus::Working, None, Vec::new()));
    }
    let parent_id = run.session_id.as_str().to_owned();
    let awaited = Awaited::Command(accepted.command_id.clone());
    let known = BTreeSet::new();
    let waited = tokio::select! {
        biased;
        () = ctx.cancellation().cancelled() => return Err(ToolError::Cancelled),
        () = ctx.newer_input().raised() => None,
        () = tokio::time::sleep(send_wait(ctx.remaining())) => None,
        found = follow::next(&child, &awaited, &parent_id, Some(&known)) => Some(found.map_err(for_model)?),
    };
    match waited {
        Some(Found::Replied) => {
            run.shared
                .tell_goal(&follower.parent, &accepted.command_id, GoalNews::Replied)
                .await;
            let words = follow::last_words(&child).await.map_err(for_model)?;
            Ok(result(SendStatus::Replied, Some(words), Vec::new()))
        }
        Some(Found::Asks(asks)) => {
            let mut follower = follower;
            follower.told = asks
                .iter()
                .map(|ask| ask.ask_id.as_str().to_owned())
                .collect();
            follow::spawn(&run.shared, follower);
            Ok(result(SendStatus::WaitingOnYou, None, asks))
        }
        None => {
            follow::spawn(&run.shared, follower);
            Ok(result(SendStatus::Working, None, Vec::new()))
        }
    }
}

async fn create(
    run: Run,
    input: CreateInput,
    ctx: InvocationContext,
) -> Result<Created, ToolError> {
    let agent = match run.shared.directory.create(&input.name).await {
        Ok(agent) => agent,
        Err(DirectoryError::Exists(_)) => {
            // A replay after a restart finds the Agent it made; anyone else is told it exists.
            let known = run.records().await?;
            if known
                .iter()
                .any(|row| row.agent == input.name && row.via == Via::Created)
            {
                run.shared.reach(&input.name).map_err(for_model)?
            } else {
                return Err(ToolError::for_model(format!(
                    "an Agent named {} exists; send it work with agents.send",
                    input.name
                )));
            }
        }
        Err(error) => return Err(ToolError::for_model(error.to_string())),
    };
    let session_id = agent
        .create_session(request_id("create", &ctx))
        .await
        .map_err(for_model)?;
    run.record(&input.name, &session_id, Via::Created, None)
        .await?;
    Ok(Created {
        agent: input.name,
        session_id: session_id.as_str().to_owned(),
    })
}

/// The one Ask of `agent` that waits on this Session (`ask_id`, or the only one), and
/// the child Session it is in.
async fn find_ask(
    run: &Run,
    agent: &AgentName,
    ask_id: Option<&str>,
) -> Result<(LocalSession, String), ToolError> {
    let target = run.shared.reach(agent).map_err(for_model)?;
    let parent = run.session_id.as_str().to_owned();
    let mut found: Vec<(LocalSession, AskView)> = Vec::new();
    for row in run
        .records()
        .await?
        .into_iter()
        .filter(|row| &row.agent == agent)
    {
        let Ok(child) = session_of(&target, &row.session_id) else {
            continue;
        };
        let from = parent.clone();
        let waiting = child
            .host_transaction(&run.shared.question_id, move |tx| {
                Ok(json!(sender::waiting_on(tx, &from)?))
            })
            .await;
        let Ok(waiting) = waiting else { continue };
        let asks: Vec<AskView> = serde_json::from_value(waiting).unwrap_or_default();
        found.extend(asks.into_iter().map(|ask| (child.clone(), ask)));
    }
    let matching: Vec<(LocalSession, AskView)> = match ask_id {
        Some(id) => found
            .into_iter()
            .filter(|(_, ask)| ask.ask_id.as_str() == id)
            .collect(),
        None => found,
    };
    match matching.as_slice() {
        [(child, ask)] => Ok((child.clone(), ask.ask_id.as_str().to_owned())),
        [] => Err(ToolError::for_model(match ask_id {
            Some(id) => format!("no question {id} of {agent} waits on you"),
            None => format!("no question of {agent} waits on you"),
        })),
        several => Err(ToolError::for_model(format!(
            "{} questions of {agent} wait on you; give the askId of one: {}",
            several.len(),
            several
                .iter()
                .map(|(_, ask)| ask.ask_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

async fn answer(run: Run, input: AnswerInput, _ctx: InvocationContext) -> Result<Value, ToolError> {
    let (child, ask_id) = find_ask(&run, &input.agent, input.ask_id.as_deref()).await?;
    let me = run.shared.agent().await.map_err(for_model)?;
    // The latest terminal before the answer: the reply is the work after it.
    let before = latest_terminal(&child).await;
    let parent = run.session_id.as_str().to_owned();
    let answers = input.answers;
    let id = AskId::new(ask_id.clone());
    let receipt = child
        .host_transaction(&run.shared.question_id, move |tx| {
            sender::answer(tx, &id, &parent, answers.clone())
        })
        .await
        .map_err(for_model)?;
    // The send's own follower, if it still runs, delivers the reply; else a new one does.
    follow::spawn(
        &run.shared,
        Follower {
            parent: run.parent(&me),
            child: child.clone(),
            agent: input.agent.clone(),
            command_id: before
                .clone()
                .unwrap_or_else(shiitake_core::ids::command_id),
            awaited: Awaited::After(before),
            told: BTreeSet::from([ask_id]),
        },
    );
    run.shared.children_changed(&run.session_id);
    let mut receipt = receipt;
    if let Some(map) = receipt.as_object_mut() {
        map.insert(
            "message".into(),
            json!(format!(
                "{} has your answer; its reply arrives as a message.",
                input.agent
            )),
        );
    }
    Ok(receipt)
}

async fn escalate(
    run: Run,
    input: EscalateInput,
    _ctx: InvocationContext,
) -> Result<Value, ToolError> {
    let (child, ask_id) = find_ask(&run, &input.agent, input.ask_id.as_deref()).await?;
    let parent = run.session_id.as_str().to_owned();
    let id = AskId::new(ask_id);
    let escalated = child
        .host_transaction(&run.shared.question_id, move |tx| {
            sender::escalate(tx, &id, &parent)
        })
        .await
        .map_err(for_model)?;
    run.shared.children_changed(&run.session_id);
    Ok(escalated)
}

/// The command of the child's latest terminal, if it has one.
async fn latest_terminal(child: &LocalSession) -> Option<CommandId> {
    let options = ReadOptions {
        limit: PageLimit::new(20).ok(),
        ..Default::default()
    };
    let snapshot = child.read(options).await.ok()?;
    snapshot.terminals.last().map(|t| t.command_id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_wait_leaves_the_reserve_and_is_capped() {
        assert_eq!(send_wait(None), Duration::from_secs(SEND_WAIT_CAP_SECS));
        assert_eq!(
            send_wait(Some(Duration::from_secs(120))),
            Duration::from_secs(60)
        );
        assert_eq!(
            send_wait(Some(Duration::from_secs(
                SEND_WAIT_CAP_SECS + SEND_WAIT_RESERVE_SECS
            ))),
            Duration::from_secs(SEND_WAIT_CAP_SECS)
        );
        assert_eq!(send_wait(Some(Duration::from_secs(30))), Duration::ZERO);
    }
}
