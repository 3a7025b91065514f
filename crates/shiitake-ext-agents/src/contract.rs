//! What clients compile against: the wire shapes of the `agents.*` tools and of the
//! record, and their bounds. Builds without core (`default-features = false`).
//!
//! ```
//! use shiitake_ext_agents::contract::{SendResult, SendStatus};
//!
//! fn replied(result: &serde_json::Value) -> Option<String> {
//!     let result: SendResult = serde_json::from_value(result.clone()).ok()?;
//!     (result.status == SendStatus::Replied).then(|| result.reply.unwrap_or_default())
//! }
//! ```

use serde::{Deserialize, Serialize};
/// Longest `askId` a tool takes: the question contract's bound.
pub use shiitake_ext_question::contract::MAX_ASK_ID_CHARS;
#[cfg(feature = "runtime")]
use shiitake_ext_question::contract::MAX_QUESTIONS;
use shiitake_ext_question::contract::{AskView, QuestionAnswer};
#[cfg(feature = "runtime")]
use shiitake_protocol::PromptText;
pub use shiitake_protocol::directory::{AgentName, AgentNameError, MAX_AGENT_NAME_BYTES};
use shiitake_protocol::extension_contract;

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-session-agents";
/// The namespace of its tools: `agents.create`, `agents.send`, `agents.answer`, `agents.escalate`.
pub const NAMESPACE: &str = "agents";
/// The record's collection in the sending Session.
pub const RECORD_COLLECTION: &str = "children";
/// Records kept per Session; past it the least recently used goes.
pub const MAX_RECORDS: usize = 64;
/// Longest reply carried back to the sender, in characters (the rest is cut with `…`).
pub const MAX_REPLY_CHARS: usize = 4_000;
/// Agent names listed in the prompt section.
pub const MAX_PROMPTED_AGENTS: usize = 32;
/// The longest an `agents.send` waits in-turn for the reply, in seconds.
pub const SEND_WAIT_CAP_SECS: u64 = 600;
/// What an in-turn wait leaves of the call's execute deadline, in seconds.
pub const SEND_WAIT_RESERVE_SECS: u64 = 60;

/// Longest Session id a tool takes, in bytes (a protocol identifier's bound).
pub const MAX_SESSION_ID_BYTES: usize = shiitake_protocol::BoundedId::MAX_BYTES;

extension_contract! {
    /// The `agents.*` contract: its identity. It publishes nothing per Session (the record
    /// feeds the Subagents footer) and offers people no commands; its wire shapes are the
    /// tools' inputs and results below.
    pub AgentsContract = EXTENSION_ID, projection ()
}

/// How a Session came to know a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// It created the Agent (`agents.create`).
    Created,
    /// It sent the Agent work (`agents.send`).
    Sent,
}

/// One record row (collection [`RECORD_COLLECTION`], key `<agent>/<session>`): an
/// accepted create or send, for the footer. Read-only: it grants no relationship or
/// authority; the host's directory decides who may reach whom.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildRecord {
    /// The child Agent.
    pub agent: AgentName,
    /// Its Session the work went to.
    pub session_id: String,
    /// How it was first recorded.
    pub via: Via,
    /// Unix milliseconds of the latest create or send (the Agent's clock).
    pub at: u64,
    /// The command the latest send became in the child's Session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_command_id: Option<String>,
}

impl ChildRecord {
    /// Its key in the collection.
    pub fn key(&self) -> String {
        record_key(&self.agent, &self.session_id)
    }
}

/// The key of a child's record.
pub fn record_key(agent: &AgentName, session_id: &str) -> String {
    format!("{agent}/{session_id}")
}

/// How `agents.send` waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SendMode {
    /// Wait in-turn for the reply, or for a question the child asks you.
    #[default]
    Wait,
    /// Return at once; the reply arrives later as a message.
    Continue,
}

/// The input of `agents.send`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendInput {
    /// The Agent to send the work to (its name: letters, digits, - and _).
    #[cfg_attr(feature = "runtime", schemars(with = "NameShape"))]
    pub agent: AgentName,
    /// The work.
    #[cfg_attr(
        feature = "runtime",
        schemars(length(min = 1, max = PromptText::MAX_BYTES))
    )]
    pub text: String,
    /// Its Session to continue; by default the last one you used with it, or a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "runtime",
        schemars(with = "String", length(min = 1, max = MAX_SESSION_ID_BYTES))
    )]
    pub session_id: Option<String>,
    /// Wait (default) or continue.
    #[serde(default)]
    pub mode: SendMode,
}

/// The input of `agents.create`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateInput {
    /// The new Agent's name: letters, digits, - and _, starting with a letter or digit.
    #[cfg_attr(feature = "runtime", schemars(with = "NameShape"))]
    pub name: AgentName,
}

/// The input of `agents.answer`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerInput {
    /// The Agent that asks (its name: letters, digits, - and _).
    #[cfg_attr(feature = "runtime", schemars(with = "NameShape"))]
    pub agent: AgentName,
    /// The question's askId; leave it out when exactly one of that Agent's questions
    /// waits on you.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "runtime", schemars(with = "AskIdShape"))]
    pub ask_id: Option<String>,
    /// One answer per question, in order: offered labels, free text, or both.
    #[cfg_attr(
        feature = "runtime",
        schemars(with = "Vec<AnswerShape>", length(min = 1, max = MAX_QUESTIONS))
    )]
    pub answers: Vec<QuestionAnswer>,
}

// The schemas of an Agent name and an askId in a tool's input: only the tools' schemas
// are derived from these shapes; the fields decode as their own types.
#[cfg(feature = "runtime")]
#[derive(schemars::JsonSchema)]
#[serde(transparent)]
#[allow(dead_code)]
struct NameShape(#[schemars(length(min = 1, max = MAX_AGENT_NAME_BYTES))] String);

#[cfg(feature = "runtime")]
#[derive(schemars::JsonSchema)]
#[serde(transparent)]
#[allow(dead_code)]
struct AskIdShape(#[schemars(length(min = 1, max = MAX_ASK_ID_CHARS))] String);

// The schema of the question contract's `QuestionAnswer`, which derives none of its
// own: only the tool's schema is derived from this shape; answers decode as
// `QuestionAnswer`.
/// One answer: offered labels, free text, or both.
#[cfg(feature = "runtime")]
#[derive(schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct AnswerShape {
    /// Labels of the picked options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    selected: Vec<String>,
    /// Free text, instead of or besides the labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    text: Option<String>,
}

/// The input of `agents.escalate`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EscalateInput {
    /// The Agent that asks (its name: letters, digits, - and _).
    #[cfg_attr(feature = "runtime", schemars(with = "NameShape"))]
    pub agent: AgentName,
    /// The question's askId; leave it out when exactly one of that Agent's questions
    /// waits on you.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "runtime", schemars(with = "AskIdShape"))]
    pub ask_id: Option<String>,
}

/// Where a sent piece of work stands when `agents.send` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SendStatus {
    /// The child finished and replied (`reply`).
    Replied,
    /// The child asks you (`waitingOnYou`): answer with `agents.answer` or pass it to a
    /// person with `agents.escalate`. Its reply arrives later as a message.
    WaitingOnYou,
    /// Still working; the reply arrives later as a message.
    Working,
}

/// What `agents.send` returns (and what a later reply message carries).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendResult {
    /// The child Agent.
    pub agent: AgentName,
    /// Its Session.
    pub session_id: String,
    /// The command the work became there.
    pub command_id: String,
    /// Where it stands.
    pub status: SendStatus,
    /// The child's last words, at most [`MAX_REPLY_CHARS`], once it replied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Questions of the child that wait on you.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_on_you: Vec<AskView>,
}

/// What `agents.create` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Created {
    /// The new Agent.
    pub agent: AgentName,
    /// A Session of it, ready for `agents.send`.
    pub session_id: String,
}
