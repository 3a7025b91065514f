//! The question contract: what clients compile against, without shiitake-core.
//!
//! Wire types (camelCase JSON), the bounds the extension enforces, the human
//! commands (`list`, `answer`, `decline`) as typed [`ContractCommand`]s, the
//! projection published per Session, and the label-list codec the `/answer` flow
//! uses for several selections.
//!
//! ```
//! use shiitake_ext_question::contract::{QuestionContract, ListAsks};
//! use shiitake_protocol::extension::bind_session_extension;
//!
//! async fn open_questions<S: shiitake_protocol::SessionApi>(session: &S)
//!     -> Result<usize, shiitake_protocol::ShiitakeError> {
//!     let asks = bind_session_extension::<_, QuestionContract>(session).call(&ListAsks {}).await?;
//!     Ok(asks.len())
//! }
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};
use shiitake_protocol::extension::{ContractCommand, ExtensionContract, SessionScope};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-session-question";
/// The namespace of its tools: `question.ask`, `question.withdraw`.
pub const NAMESPACE: &str = "question";

/// Questions in one Ask: one to four.
pub const MAX_QUESTIONS: usize = 4;
/// Open Asks a Session holds at once.
pub const MAX_OPEN_ASKS: usize = 4;
/// Longest question header, in characters.
pub const MAX_HEADER_CHARS: usize = 12;
/// Longest question text, in characters.
pub const MAX_QUESTION_CHARS: usize = 1000;
/// Options of one question: one to eight (free text is always allowed besides).
pub const MAX_OPTIONS: usize = 8;
/// Longest option label, in characters.
pub const MAX_LABEL_CHARS: usize = 60;
/// Longest option description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 300;
/// Longest free-text answer to one question, in characters.
pub const MAX_ANSWER_TEXT_CHARS: usize = 4000;
/// Longest reason given with a decline, in characters.
pub const MAX_REASON_CHARS: usize = 1000;
/// Shortest `onExpire.afterMinutes`.
pub const MIN_EXPIRE_MINUTES: u32 = 5;
/// Longest `onExpire.afterMinutes`: seven days.
pub const MAX_EXPIRE_MINUTES: u32 = 10_080;
/// How long an Ask waits on the Agent that sent the work before it goes to a person.
pub const SENDER_FALLBACK_MINUTES: u32 = 15;
/// The longest a live wait lasts, in seconds (ten minutes).
pub const LIVE_WAIT_CAP_SECS: u64 = 600;
/// What a live wait leaves of the call's execute deadline, in seconds.
pub const LIVE_WAIT_RESERVE_SECS: u64 = 60;

/// The question contract, for `bind_session_extension`.
#[derive(Debug)]
pub enum QuestionContract {}

impl ExtensionContract for QuestionContract {
    const EXTENSION_ID: &'static str = EXTENSION_ID;
    type Projection = QuestionProjection;
}

/// An Ask's id: `ask_` followed by a ULID.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AskId(String);

impl AskId {
    /// Wraps an id read from the wire; it is checked where it is looked up.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One choice offered with a question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionOption {
    /// What the person picks (and what an answer names).
    pub label: String,
    /// What picking it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One decision question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// A short tag shown as a chip, at most [`MAX_HEADER_CHARS`] characters.
    pub header: String,
    /// The question itself.
    pub question: String,
    /// The choices; the first is the recommended one.
    pub options: Vec<QuestionOption>,
    /// Several options may be picked.
    #[serde(default)]
    pub multi_select: bool,
}

/// How `question.ask` behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskMode {
    /// Wait in-turn for the answer (parks when the wait runs out or a steer arrives).
    #[default]
    Wait,
    /// Park at once and return the `askId`; the answer arrives as a follow-up prompt.
    Continue,
}

/// What happens when nobody answers in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpireAction {
    /// Tell the model not to proceed.
    Stop,
    /// Answer every question with its first (recommended) option.
    ProceedWithRecommended,
}

/// An Ask's expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OnExpire {
    /// Minutes after the Ask opened, [`MIN_EXPIRE_MINUTES`] to [`MAX_EXPIRE_MINUTES`].
    pub after_minutes: u32,
    /// What expiry does.
    pub action: ExpireAction,
}

/// The input of the model tool `question.ask`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskInput {
    /// One to four questions.
    pub questions: Vec<Question>,
    /// Wait (default) or continue.
    #[serde(default)]
    pub mode: AskMode,
    /// Optional expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expire: Option<OnExpire>,
}

/// The answer to one question: offered labels, free text, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionAnswer {
    /// Labels of the picked options (at most one unless the question is multi-select).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selected: Vec<String>,
    /// Free text, instead of or besides the labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Who a waiting Ask waits on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingOn {
    /// The Agent that sent the work, by name.
    pub agent: String,
    /// Its Session that sent the work.
    pub session_id: String,
    /// Passed to a person (by the sender, or after the fallback or the sender's turn).
    pub escalated: bool,
}

/// One open Ask as clients see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AskView {
    /// The Ask.
    pub ask_id: AskId,
    /// Its questions.
    pub questions: Vec<Question>,
    /// Unix milliseconds it opened.
    pub created_at: u64,
    /// Unix milliseconds it expires, with `onExpire`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// What expiry does, with `onExpire`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expire: Option<ExpireAction>,
    /// Set when the Ask waits on the Agent that sent the work rather than a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<WaitingOn>,
}

impl AskView {
    /// Whether a person is asked now (not only the sending Agent).
    pub fn needs_person(&self) -> bool {
        self.waiting_on.as_ref().is_none_or(|w| w.escalated)
    }

    /// The footer line: `waiting on <agent>` while it waits on the sender, else the first question.
    pub fn status_line(&self) -> String {
        match &self.waiting_on {
            Some(waiting) if !waiting.escalated => format!("waiting on {}", waiting.agent),
            _ => self
                .questions
                .first()
                .map(|q| q.question.clone())
                .unwrap_or_default(),
        }
    }
}

/// What the extension publishes per Session: its open Asks, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionProjection {
    /// The Asks still waiting for an answer.
    pub asks: Vec<AskView>,
}

/// How a closed Ask was resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskStatus {
    /// A person (or the sending Agent) answered.
    Answered,
    /// A person declined to answer.
    Declined,
}

/// How the answer reaches the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// The waiting tool call receives it in the same turn.
    InTurn,
    /// A follow-up prompt was admitted with it.
    FollowUp,
}

/// What `answer` and `decline` return; an exact retry returns the same receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The Ask.
    pub ask_id: AskId,
    /// Answered or declined.
    pub status: AskStatus,
    /// How the model gets it.
    pub delivery: Delivery,
}

/// Lists the open Asks of the Session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListAsks {}

impl ContractCommand for ListAsks {
    type Contract = QuestionContract;
    type Scope = SessionScope;
    type Output = Vec<AskView>;
    const NAME: &'static str = "list";
}

/// Answers every question of an open Ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerAsk {
    /// The Ask.
    pub ask_id: AskId,
    /// Stable per answer: reuse it after an uncertain response.
    pub request_id: String,
    /// One answer per question, in order.
    pub answers: Vec<QuestionAnswer>,
}

impl ContractCommand for AnswerAsk {
    type Contract = QuestionContract;
    type Scope = SessionScope;
    type Output = Receipt;
    const NAME: &'static str = "answer";
}

/// Declines to answer an open Ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeclineAsk {
    /// The Ask.
    pub ask_id: AskId,
    /// Stable per decline: reuse it after an uncertain response.
    pub request_id: String,
    /// Why, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ContractCommand for DeclineAsk {
    type Contract = QuestionContract;
    type Scope = SessionScope;
    type Output = Receipt;
    const NAME: &'static str = "decline";
}

/// Why a label list did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelsError {
    /// A quoted label is not closed.
    #[error("a quoted label is not closed")]
    Unclosed,
    /// Something other than a comma follows a closing quote.
    #[error("expected a comma after the quoted label {0:?}")]
    AfterQuote(String),
}

/// Writes labels as the `/answer` flow expects several selections: comma-separated,
/// a label holding a comma or a double quote written in quotes with `\"` and `\\` escapes.
pub fn format_labels<S: AsRef<str>>(labels: &[S]) -> String {
    labels
        .iter()
        .map(|label| {
            let label = label.as_ref();
            if label.contains([',', '"', '\\']) || label.trim() != label {
                let escaped = label.replace('\\', "\\\\").replace('"', "\\\"");
                format!("\"{escaped}\"")
            } else {
                label.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a label list written by [`format_labels`] (or typed by a person): items
/// separated by commas, trimmed, optionally in double quotes; empty items are dropped.
pub fn parse_labels(text: &str) -> Result<Vec<String>, LabelsError> {
    let mut labels = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None => return Ok(labels),
            Some('"') => {
                chars.next();
                let mut label = String::new();
                loop {
                    match chars.next() {
                        None => return Err(LabelsError::Unclosed),
                        Some('\\') => match chars.next() {
                            Some(escaped) => label.push(escaped),
                            None => return Err(LabelsError::Unclosed),
                        },
                        Some('"') => break,
                        Some(other) => label.push(other),
                    }
                }
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                match chars.next() {
                    None | Some(',') => labels.push(label),
                    Some(_) => return Err(LabelsError::AfterQuote(label)),
                }
            }
            Some(_) => {
                let mut label = String::new();
                for c in chars.by_ref() {
                    if c == ',' {
                        break;
                    }
                    label.push(c);
                }
                let label = label.trim();
                if !label.is_empty() {
                    labels.push(label.to_owned());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn labels_with_commas_and_quotes_are_quoted() {
        let labels = ["Plain", "Red, green", "Say \"hi\"", " spaced "];
        let written = format_labels(&labels);
        assert_eq!(written, r#"Plain, "Red, green", "Say \"hi\"", " spaced ""#);
        assert_eq!(parse_labels(&written).unwrap(), labels);
        assert_eq!(parse_labels("a,, b ,").unwrap(), ["a", "b"]);
        assert_eq!(parse_labels("\"open").unwrap_err(), LabelsError::Unclosed);
        assert!(matches!(
            parse_labels("\"a\" b"),
            Err(LabelsError::AfterQuote(_))
        ));
    }

    proptest! {
        #[test]
        fn labels_round_trip(labels in proptest::collection::vec("[ -~é,\"\\\\]{1,12}", 0..6)) {
            let labels: Vec<String> = labels;
            prop_assert_eq!(parse_labels(&format_labels(&labels)).unwrap(), labels);
        }

        #[test]
        fn parsing_never_panics(text in "\\PC{0,40}") {
            let _ = parse_labels(&text);
        }
    }
}
