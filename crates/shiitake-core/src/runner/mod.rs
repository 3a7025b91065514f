//! The runner: one task per run that drives the model and the tools.
//!
//! A run takes one prompt (already committed as the lineage leaf by the owner).
//! Each turn it takes waiting steers at the model-call boundary, streams the
//! model with retries, has the owner commit the completed assistant message,
//! executes the tool calls it asks for through the execute door and has their
//! results committed, until the model stops. Every await is cancellable by the
//! run's one token. The runner never writes to the store itself: the owner
//! commits, so the Session keeps one writer.

mod compact;
pub(crate) mod compaction;
mod gate;
pub(crate) mod offered;
mod recovery;
mod stream;
mod tool_progress;
mod tools;
mod transcript;

use std::sync::Arc;

use shiitake_model::{ModelContext, ModelOptions, ReasoningLevel, ToolChoice};
use shiitake_protocol::message::{Message, StopReason};
use shiitake_protocol::{
    CommandId, EntryId, ModelPreference, RetryState, SessionId, SessionProgress, ShiitakeError,
    TerminalOutcome,
};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::store::Store;
pub(crate) use gate::GateLink;
pub(crate) use offered::RunTools;
pub(crate) use transcript::Transcript;

pub(crate) use recovery::{Resume, plan_resume};

/// What a run needs of its Agent, and nothing more: the store it reads its
/// transcript from, the Agent's tools and its settings.
pub(crate) struct RunDeps {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) tools: Arc<shiitake_capabilities::Catalog>,
    pub(crate) config: Arc<AgentConfig>,
}

/// The prompt sections extensions contribute to a run, each with its extension.
pub(crate) type PromptSections = Vec<(shiitake_protocol::ExtensionId, String)>;

/// The tool modules extensions contribute to a run, each with its extension.
pub(crate) type ToolModules = Vec<(
    shiitake_protocol::ExtensionId,
    shiitake_capabilities::Module,
)>;

/// Everything a run starts with.
pub(crate) struct RunStart {
    /// The store, tools and settings of the Agent.
    pub(crate) agent: RunDeps,
    pub(crate) session_id: SessionId,
    pub(crate) command_id: CommandId,
    pub(crate) leaf: Option<EntryId>,
    pub(crate) preference: Option<ModelPreference>,
    pub(crate) owner: Arc<dyn OwnerMailbox>,
    pub(crate) cancel: CancellationToken,
    /// Raised while a steer waits for the next model-call boundary.
    pub(crate) steer_waiting: tokio::sync::watch::Receiver<bool>,
    /// Raised while operator lines wait for the next model-call boundary.
    pub(crate) lines_waiting: tokio::sync::watch::Receiver<bool>,
    /// Set when the run goes on from work committed before (after a restart, a
    /// takeover or a wait for the store): the steers that work had absorbed.
    pub(crate) recovering: Option<Vec<CommandId>>,
    /// Going on after a pause for the store: the tool calls (by id) the stopped run had
    /// started; a call not among them never ran. `None` when nobody knows (a restart).
    pub(crate) started_calls: Option<Vec<String>>,
    /// Bounded prompt sections of extensions, captured at the start of the run, with
    /// the extension that contributed each.
    pub(crate) prompt_sections: PromptSections,
    /// Tool modules of extensions, captured at the start of the run, with the
    /// extension that contributed each.
    pub(crate) modules: ToolModules,
    /// The tool gates the host granted, in registration order: asked before each call.
    pub(crate) gates: Vec<GateLink>,
    /// The transcript the Session's previous run ended with, if the owner kept it:
    /// the run reads only the entries committed after it.
    pub(crate) transcript: Option<Transcript>,
}

/// What a run's model did, for settled hooks: the tool calls it asked for and the
/// tokens its provider reported, those committed before a restart included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunTally {
    pub(crate) tool_calls: u32,
    /// The sum of each answer's `usage.totalTokens` (0 where the provider reports none).
    pub(crate) tokens: u64,
}

impl RunTally {
    /// Counts one committed answer of the model.
    fn add(&mut self, message: &shiitake_protocol::message::AssistantMessage) {
        let calls = u32::try_from(message.tool_calls().count()).unwrap_or(u32::MAX);
        self.tool_calls = self.tool_calls.saturating_add(calls);
        self.tokens = self.tokens.saturating_add(message.usage.total_tokens);
    }
}

/// How a run ended.
pub(crate) struct Settled {
    pub(crate) outcome: TerminalOutcome,
    pub(crate) diagnostic: Option<String>,
}

impl Settled {
    fn completed() -> Self {
        Self {
            outcome: TerminalOutcome::Completed,
            diagnostic: None,
        }
    }

    fn cancelled() -> Self {
        Self {
            outcome: TerminalOutcome::Cancelled,
            diagnostic: None,
        }
    }

    fn failed(diagnostic: impl Into<String>) -> Self {
        Self {
            outcome: TerminalOutcome::Failed,
            diagnostic: Some(diagnostic.into()),
        }
    }
}

/// What the runner tells its owner.
///
/// Its large payloads (a message, a transcript) are boxed: every request of an owner's
/// mailbox takes the size of the largest, and the mailbox is allocated in blocks of 32
/// requests, so one inline message (440 bytes) made each owner's mailbox 18 KB
/// (docs/benchmarks.md, "CPU per committed message").
pub(crate) enum RunEvent {
    /// At a model-call boundary: take waiting steers and operator lines into the lineage.
    Boundary(oneshot::Sender<Result<Vec<(EntryId, Message)>, ShiitakeError>>),
    /// Commit one completed message under the given entry id.
    Commit {
        entry_id: EntryId,
        message: Box<Message>,
        /// Set for the result of an extension's tool: its tool-result hook runs in this commit.
        tool: Option<Box<crate::extension::ToolOutcome>>,
        reply: oneshot::Sender<Result<(), ShiitakeError>>,
    },
    /// The streaming message moved on (never stored).
    Progress(SessionProgress),
    /// A model call failed retryably and waits (`Some`), or the wait is over (`None`).
    Retry(Option<RetryState>),
    /// A tool started; committing its result (any message of the run) ends it.
    ActiveTool(String),
    /// The tool call `call_id` is about to run: the owner notes it before it does, so a
    /// pause knows which calls never started.
    ToolStarting {
        call_id: String,
        reply: oneshot::Sender<Result<(), ShiitakeError>>,
    },
    /// The running tool's latest output (`tool_progress.rs`); boxed, as a mailbox slot
    /// takes the size of the largest event.
    ToolOutput(Box<shiitake_protocol::ToolOutput>),
    /// Older messages were summarised: the model reads the summary instead of the
    /// entries before `first_kept`.
    Compacted {
        first_kept: EntryId,
        summary: String,
        reply: oneshot::Sender<Result<(), ShiitakeError>>,
    },
    /// A sandbox refused a tool call.
    SandboxFailure { capability: String, message: String },
    /// The run could not read its Session from the store for a reason that passes: the
    /// owner pauses as for a failed commit, and the work goes on from what is committed
    /// once the store is back (never settled by the outage).
    StoreFailed(crate::store::StoreError),
    /// The run settled; `tally` counts what its model did (tool calls, tokens).
    /// `transcript` is what it ended with, for the next run (none after an error).
    Finished {
        outcome: TerminalOutcome,
        diagnostic: Option<String>,
        tally: RunTally,
        transcript: Option<Box<Transcript>>,
    },
}

/// Where a run sends what it tells its owner, in the order it sends it.
#[async_trait::async_trait]
pub(crate) trait OwnerMailbox: Send + Sync {
    /// Sends one event; `false` once the owner has stopped.
    async fn send_event(&self, event: RunEvent) -> bool;
}

/// The run's conversation with its owner.
pub(crate) struct OwnerLink {
    owner: Arc<dyn OwnerMailbox>,
}

impl OwnerLink {
    pub(crate) async fn ask<T>(
        &self,
        event: impl FnOnce(oneshot::Sender<Result<T, ShiitakeError>>) -> RunEvent,
    ) -> Result<T, ShiitakeError> {
        let (reply, answer) = oneshot::channel();
        if !self.owner.send_event(event(reply)).await {
            return Err(ShiitakeError::stopped("the Session's owner stopped"));
        }
        answer
            .await
            .map_err(|_| ShiitakeError::stopped("the Session's owner stopped"))?
    }

    /// Has the owner commit a tool result of an extension's tool, with that
    /// extension's tool-result hook in the same transaction.
    pub(crate) async fn commit_tool_result(
        &self,
        message: Message,
        outcome: Option<crate::extension::ToolOutcome>,
    ) -> Result<EntryId, ShiitakeError> {
        let entry_id = crate::ids::entry_id();
        let id = entry_id.clone();
        self.ask(|reply| RunEvent::Commit {
            entry_id,
            message: Box::new(message),
            tool: outcome.map(Box::new),
            reply,
        })
        .await?;
        Ok(id)
    }

    /// Has the owner commit a completed message under an entry id chosen earlier.
    pub(crate) async fn commit_as(
        &self,
        entry_id: EntryId,
        message: Message,
    ) -> Result<EntryId, ShiitakeError> {
        let id = entry_id.clone();
        self.ask(|reply| RunEvent::Commit {
            entry_id,
            message: Box::new(message),
            tool: None,
            reply,
        })
        .await?;
        Ok(id)
    }

    /// Takes waiting steers and operator lines; returns the entries now on the lineage.
    async fn boundary(&self) -> Result<Vec<(EntryId, Message)>, ShiitakeError> {
        self.ask(RunEvent::Boundary).await
    }

    /// Tells the owner something that needs no answer (progress, retries, tools).
    pub(crate) async fn tell(&self, event: RunEvent) {
        if !self.owner.send_event(event).await {
            tracing::trace!("owner gone; dropping a run event");
        }
    }
}

/// Runs to a terminal and reports it to the owner.
pub(crate) async fn run(mut start: RunStart) {
    let link = OwnerLink {
        owner: start.owner.clone(),
    };
    let kept = start.transcript.take();
    let mut tally = RunTally::default();
    let (settled, transcript) = match load_transcript(&start, kept).await {
        Ok(Loaded {
            mut transcript,
            earlier,
            resume,
        }) => {
            tally = earlier;
            match drive(&start, &link, &mut transcript, resume, &mut tally).await {
                Ok(settled) => (settled, Some(transcript)),
                Err(error) => (Settled::failed(error.message), None),
            }
        }
        Err(error) if error.is_transient() => {
            link.tell(RunEvent::StoreFailed(error)).await;
            return;
        }
        Err(error) => (Settled::failed(ShiitakeError::from(error).message), None),
    };
    let settled = if start.cancel.is_cancelled() && settled.outcome == TerminalOutcome::Failed {
        Settled::cancelled()
    } else {
        settled
    };
    crate::spans::run_ended(settled.outcome);
    link.tell(RunEvent::Finished {
        outcome: settled.outcome,
        diagnostic: settled.diagnostic,
        tally,
        transcript: transcript.map(Box::new),
    })
    .await;
}

/// Drives the run to its terminal on `transcript`, which holds every message it
/// commits; `tally` counts what the model did in this run (those answers committed
/// before a restart included), for settled hooks.
async fn drive(
    start: &RunStart,
    link: &OwnerLink,
    transcript: &mut Transcript,
    resume: Option<Resume>,
    tally: &mut RunTally,
) -> Result<Settled, ShiitakeError> {
    let core = &start.agent;
    let model = match core.config.models.resolve(start.preference.as_ref()) {
        Ok(model) => model,
        Err(diagnostic) => return Ok(Settled::failed(diagnostic)),
    };
    let profile = model.profile();
    let tool_set = core.config.offered_tools.for_profile(profile);
    if let Some(resume) = resume {
        match resume {
            Resume::Finish(outcome) => {
                return Ok(Settled {
                    outcome,
                    diagnostic: None,
                });
            }
            Resume::Abandon(diagnostic) => {
                return Ok(Settled {
                    outcome: TerminalOutcome::Interrupted,
                    diagnostic: Some(diagnostic.to_owned()),
                });
            }
            Resume::ResolveTools(calls) => {
                let run_tools = RunTools::capture(start, tool_set, profile).await?;
                for (id, message) in
                    tools::resolve_after_restart(start, link, &run_tools, &calls).await?
                {
                    transcript.push(id, message);
                }
            }
            Resume::CallModel => {}
        }
    }
    let options = model_options(start.preference.as_ref());
    let tools = RunTools::capture(start, tool_set, profile).await?;
    let system_prompt =
        offered::system_prompt(&core.config, profile, &start.prompt_sections, &tools);
    let mut calls = 0;
    let mut compaction_failed = false;
    let system_tokens = system_prompt.len().div_ceil(4);
    loop {
        // Only a boundary with something waiting asks the owner.
        if *start.steer_waiting.borrow() || *start.lines_waiting.borrow() {
            for (id, message) in link.boundary().await? {
                transcript.push(id, message);
            }
        }
        if start.cancel.is_cancelled() {
            return Ok(Settled::cancelled());
        }
        calls += 1;
        if calls > core.config.max_model_calls {
            return Ok(Settled::failed(format!(
                "the run stopped after {} model calls without finishing",
                core.config.max_model_calls
            )));
        }
        if !compaction_failed {
            let attempt =
                compaction::maybe_compact(start, link, &*model, transcript, system_tokens).await?;
            compaction_failed = attempt == compaction::Compaction::Failed;
        }
        let context = ModelContext {
            system_prompt: system_prompt.clone(),
            messages: transcript.context(),
            tools: tools.specs(),
        };
        let (message, entry_id) =
            match stream::complete(start, link, &*model, context, &options).await? {
                stream::Completion::Message(message, entry_id) => (message, entry_id),
                stream::Completion::Failed(diagnostic) => return Ok(Settled::failed(diagnostic)),
                stream::Completion::Cancelled => return Ok(Settled::cancelled()),
            };
        let stop_reason = message.stop_reason;
        let error_message = message.error_message.clone();
        let tool_calls: Vec<_> = message.tool_calls().cloned().collect();
        let entry = Message::Assistant(message);
        let entry_id = link.commit_as(entry_id, entry.clone()).await?;
        if let Message::Assistant(answer) = &entry {
            tally.add(answer);
        }
        transcript.push(entry_id, entry);
        match stop_reason {
            StopReason::Aborted => return Ok(Settled::cancelled()),
            StopReason::Error => {
                return Ok(Settled::failed(
                    error_message.unwrap_or_else(|| "the model failed".into()),
                ));
            }
            StopReason::ToolUse if !tool_calls.is_empty() => {
                match tools::execute_all(start, link, &tools, &tool_calls).await? {
                    tools::Executed::Results(results) => {
                        for (id, message) in results {
                            transcript.push(id, message);
                        }
                    }
                    tools::Executed::Cancelled => return Ok(Settled::cancelled()),
                    tools::Executed::Fatal(diagnostic) => return Ok(Settled::failed(diagnostic)),
                }
            }
            StopReason::Stop | StopReason::Length | StopReason::ToolUse => {
                if !*start.steer_waiting.borrow() {
                    return Ok(Settled::completed());
                }
            }
        }
    }
}

/// What a run starts from: its transcript, what its model did before (for a run that
/// goes on from committed work), and how such a run resumes.
struct Loaded {
    transcript: Transcript,
    earlier: RunTally,
    /// Set for a run that goes on from committed work: its first step, planned from
    /// its own messages on the lineage.
    resume: Option<Resume>,
}

/// The selected lineage, root first, behind its latest compaction summary, and the
/// tool calls this run's model already asked for on it (before a restart).
///
/// A transcript `kept` by the owner (the previous run's, with every entry the owner
/// committed since) serves a new run when it ends at the leaf; otherwise, and always
/// for a run that goes on from committed work, the whole lineage is read.
async fn load_transcript(
    start: &RunStart,
    kept: Option<Transcript>,
) -> Result<Loaded, crate::store::StoreError> {
    let Some(leaf) = &start.leaf else {
        return Ok(Loaded {
            transcript: Transcript::default(),
            earlier: RunTally::default(),
            resume: start
                .recovering
                .as_ref()
                .map(|_| Resume::Abandon(recovery::PROMPT_NOT_ON_LINEAGE)),
        });
    };
    let store = &start.agent.store;
    if let Some(transcript) = kept
        && start.recovering.is_none()
        && transcript.last_id() == Some(leaf)
    {
        // A kept transcript serves a new run, never a resumed one: no earlier calls.
        return Ok(Loaded {
            transcript,
            earlier: RunTally::default(),
            resume: None,
        });
    }
    let mut path = store.lineage(&start.session_id, leaf, usize::MAX).await?;
    path.reverse();
    let earlier = tally_of(&path, &start.command_id);
    let resume = start.recovering.as_ref().map(|absorbed| {
        let owned: Vec<recovery::Owned<'_>> = path
            .iter()
            .map(|entry| (entry.command_id.as_ref(), &entry.message))
            .collect();
        plan_resume(&owned, &start.command_id, absorbed)
    });
    let mut transcript = Transcript::new(
        path.into_iter()
            .map(|entry| (entry.id, entry.message))
            .collect(),
    );
    for compaction in store
        .compactions(&start.session_id)
        .await?
        .into_iter()
        .rev()
    {
        if transcript.summarised_before(&compaction.first_kept, compaction.summary) {
            break;
        }
    }
    Ok(Loaded {
        transcript,
        earlier,
        resume,
    })
}

/// What the model did in these entries of `command_id`'s run.
fn tally_of(entries: &[crate::store::StoredEntry], command_id: &CommandId) -> RunTally {
    let mut tally = RunTally::default();
    for entry in entries
        .iter()
        .filter(|entry| entry.command_id.as_ref() == Some(command_id))
    {
        if let Message::Assistant(answer) = &entry.message {
            tally.add(answer);
        }
    }
    tally
}

fn model_options(preference: Option<&ModelPreference>) -> ModelOptions {
    use shiitake_protocol::ReasoningLevel as Wanted;
    let reasoning = preference
        .and_then(|p| p.reasoning)
        .map(|level| match level {
            Wanted::Minimal => ReasoningLevel::Minimal,
            Wanted::Low => ReasoningLevel::Low,
            Wanted::Medium => ReasoningLevel::Medium,
            Wanted::High | Wanted::Xhigh => ReasoningLevel::High,
        });
    ModelOptions {
        reasoning,
        tool_choice: ToolChoice::Auto,
        ..ModelOptions::default()
    }
}
