//! The question contract: what clients compile against, without shiitake-core.
//!
//! Wire types (camelCase JSON), the bounds the extension enforces, the human
//! commands (`list`, `answer`, `decline`) as typed [`ContractCommand`]s, the
//! projection published per Session with the footer rows every client shows of it
//! ([`footer_rows`]), and the label-list codec the `/answer` flow uses for several
//! selections.
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
use shiitake_protocol::extension::ContractCommand;
use shiitake_protocol::footer::{FooterActionKind, FooterActionV0, FooterRowV0};
use shiitake_protocol::{ExtensionId, apply, contract_commands, extension_contract, tool_input};

pub use crate::labels::{LabelsError, format_labels, parse_labels};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-session-question";
/// The namespace of its tools: `question.ask`, `question.withdraw`.
pub const NAMESPACE: &str = "question";
/// The command the `/answer` catalog flow walks (and an open Ask's *Answer* button).
pub const ANSWER_FLOW: &str = "answer_flow";
/// The footer kind of an open Ask's row, which a page styles it by.
pub const FOOTER_KIND: &str = "question";

/// Questions in one Ask: one to four.
pub const MAX_QUESTIONS: usize = 4;
/// Open Asks a Session holds at once.
pub const MAX_OPEN_ASKS: usize = 4;
/// Closed Asks a Session remembers, most recent first: an answer to one of them is
/// `conflict` (it lost the race), to an older one `not_found`.
pub const MAX_CLOSED_REMEMBERED: usize = 64;
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
/// Longest Ask id a tool takes (an id is 30 characters).
pub const MAX_ASK_ID_CHARS: usize = 64;
/// The longest a live wait lasts, in seconds (ten minutes).
pub const LIVE_WAIT_CAP_SECS: u64 = 600;
/// What a live wait leaves of the call's execute deadline, in seconds.
pub const LIVE_WAIT_RESERVE_SECS: u64 = 60;

extension_contract! {
    /// The question contract, for `bind_session_extension`.
    pub QuestionContract = EXTENSION_ID, projection QuestionProjection
}

/// An Ask's id: `ask_` followed by a ULID.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
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
#[apply(tool_input!)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionOption {
    /// What the person picks (and what an answer names).
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_LABEL_CHARS)))]
    pub label: String,
    /// What picking it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Absent, never null, as the model is told.
    #[cfg_attr(
        feature = "runtime",
        schemars(with = "String", length(max = MAX_DESCRIPTION_CHARS))
    )]
    pub description: Option<String>,
}

/// One decision question.
#[apply(tool_input!)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// A short tag for the question, such as "Database", shown as a chip.
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_HEADER_CHARS)))]
    pub header: String,
    /// The question itself.
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_QUESTION_CHARS)))]
    pub question: String,
    /// The choices; put the recommended one first.
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_OPTIONS)))]
    pub options: Vec<QuestionOption>,
    /// Several options may be picked.
    #[serde(default)]
    pub multi_select: bool,
}

impl Question {
    /// `[Database] Which database?`: how the footer, the prompt and `/answer` name it.
    pub fn tagged(&self) -> String {
        format!("[{}] {}", self.header, self.question)
    }
}

/// How `question.ask` behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ExpireAction {
    /// Tell the model not to proceed.
    Stop,
    /// Answer every question with its first (recommended) option.
    ProceedWithRecommended,
}

/// An Ask's expiry.
#[apply(tool_input!)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnExpire {
    /// Minutes after the Ask opened.
    #[cfg_attr(
        feature = "runtime",
        schemars(range(min = MIN_EXPIRE_MINUTES, max = MAX_EXPIRE_MINUTES))
    )]
    pub after_minutes: u32,
    /// What expiry does.
    pub action: ExpireAction,
}

/// The input of the model tool `question.ask`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskInput {
    /// One to four decision questions. The person may always answer in free text.
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_QUESTIONS)))]
    pub questions: Vec<Question>,
    /// wait: receive the answer in this turn; continue: return the askId now and get
    /// the answer later as a message.
    #[serde(default)]
    pub mode: AskMode,
    /// Optional expiry: what happens when nobody answers in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Absent, never null, as the model is told.
    #[cfg_attr(feature = "runtime", schemars(with = "OnExpire"))]
    pub on_expire: Option<OnExpire>,
}

/// The input of the model tool `question.withdraw`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WithdrawInput {
    /// The open question to withdraw.
    #[cfg_attr(feature = "runtime", schemars(length(min = 1, max = MAX_ASK_ID_CHARS)))]
    pub ask_id: AskId,
}

/// The answer to one question: offered labels, free text, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionAnswer {
    /// Labels of the picked options (at most one unless the question is multi-select).
    /// Written as a list; read from a list or from one label on its own (`"selected":
    /// "SQLite"`), the natural shape for a single-select question.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::labels::one_or_more"
    )]
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

/// The footer row of one open Ask: `? [Database] Which database?` (with ` (+n more)`
/// for further questions); when a person is asked, the note `/answer` and an *Answer*
/// button that walks the `/answer` flow for this Ask, else what it waits on.
pub fn ask_footer_row(ask: &AskView, extension_id: &ExtensionId) -> FooterRowV0 {
    let first = ask
        .questions
        .first()
        .map(Question::tagged)
        .unwrap_or_default();
    let more = match ask.questions.len() {
        0 | 1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    let row = FooterRowV0::new(
        extension_id.clone(),
        ask.ask_id.as_str(),
        FOOTER_KIND,
        format!("? {first}{more}"),
    );
    if !ask.needs_person() {
        return row.with_note(ask.status_line());
    }
    let answer = FooterActionV0 {
        label: "Answer".into(),
        name: "answer".into(),
        primary: false,
        kind: FooterActionKind::Flow {
            extension_id: extension_id.clone(),
            flow: ANSWER_FLOW.into(),
            call: AnswerAsk::NAME.into(),
            preset: serde_json::json!({"askId": ask.ask_id}),
            target: None,
        },
    };
    row.with_note("/answer").with_action(answer.primary())
}

/// One footer row per open Ask, oldest first: what every client shows of the projection.
pub fn footer_rows(
    projection: &QuestionProjection,
    extension_id: &ExtensionId,
) -> Vec<FooterRowV0> {
    projection
        .asks
        .iter()
        .map(|ask| ask_footer_row(ask, extension_id))
        .collect()
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

// The human commands, all on one Session.
contract_commands!(QuestionContract {
    ListAsks => "list" in SessionScope -> Vec<AskView>,
    AnswerAsk => "answer" in SessionScope -> Receipt,
    DeclineAsk => "decline" in SessionScope -> Receipt,
});

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shiitake_protocol::footer::FooterTone;

    fn ask(headers: &[&str], waiting_on: Option<WaitingOn>) -> AskView {
        AskView {
            ask_id: AskId::new("ask_1"),
            questions: headers
                .iter()
                .map(|header| Question {
                    header: (*header).into(),
                    question: format!("Which {header}?"),
                    options: vec![QuestionOption {
                        label: "A".into(),
                        description: None,
                    }],
                    multi_select: false,
                })
                .collect(),
            created_at: 0,
            expires_at: None,
            on_expire: None,
            waiting_on,
        }
    }

    fn planner(escalated: bool) -> Option<WaitingOn> {
        Some(WaitingOn {
            agent: "Planner".into(),
            session_id: "s".into(),
            escalated,
        })
    }

    fn id() -> ExtensionId {
        ExtensionId::new(EXTENSION_ID).unwrap()
    }

    #[test]
    fn an_ask_for_a_person_shows_its_first_question_and_walks_the_answer_flow() {
        let row = ask_footer_row(&ask(&["DB"], None), &id());
        assert_eq!(
            (row.key.as_str(), row.kind.as_str(), row.tone),
            ("ask_1", "question", FooterTone::Calm)
        );
        assert_eq!(row.text, "? [DB] Which DB?");
        assert_eq!(row.note.as_deref(), Some("/answer"));
        assert_eq!(
            serde_json::to_value(&row.actions).unwrap(),
            json!([{"label": "Answer", "name": "answer", "primary": true, "kind": "flow",
                    "extensionId": EXTENSION_ID, "flow": "answer_flow", "call": "answer",
                    "preset": {"askId": "ask_1"}}])
        );
        let three = ask_footer_row(&ask(&["DB", "Cache", "Queue"], None), &id());
        assert_eq!(three.text, "? [DB] Which DB? (+2 more)");
    }

    #[test]
    fn selected_reads_one_label_or_a_list_and_writes_a_list() {
        let read = |value: serde_json::Value| serde_json::from_value::<QuestionAnswer>(value);
        let one = QuestionAnswer {
            selected: vec!["SQLite".into()],
            text: None,
        };
        assert_eq!(read(json!({"selected": "SQLite"})).unwrap(), one);
        assert_eq!(read(json!({"selected": ["SQLite"]})).unwrap(), one);
        assert_eq!(
            read(json!({"selected": ["Auth", "Export"]}))
                .unwrap()
                .selected,
            ["Auth", "Export"]
        );
        assert_eq!(
            read(json!({"text": "neither"})).unwrap().selected,
            Vec::<String>::new()
        );
        assert_eq!(
            serde_json::to_value(&one).unwrap(),
            json!({"selected": ["SQLite"]})
        );
        for wrong in [
            json!({"selected": 3}),
            json!({"selected": [3]}),
            json!({"selected": null}),
        ] {
            let error = read(wrong.clone()).unwrap_err().to_string();
            assert!(
                error.contains("a label (a string) or a list of labels")
                    || error.contains("expected a string"),
                "{wrong}: {error}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn an_answer_decodes_to_what_was_encoded(
            selected in proptest::collection::vec("\\PC{0,12}", 0..4),
            text in proptest::option::of("\\PC{0,20}"),
        ) {
            let answer = QuestionAnswer { selected, text };
            let encoded = serde_json::to_value(&answer).unwrap();
            proptest::prop_assert_eq!(serde_json::from_value::<QuestionAnswer>(encoded).unwrap(), answer);
        }
    }

    #[test]
    fn an_ask_waiting_on_the_sender_names_it_until_a_person_is_asked() {
        let waiting = ask_footer_row(&ask(&["X", "Y"], planner(false)), &id());
        assert_eq!(waiting.text, "? [X] Which X? (+1 more)");
        assert_eq!(waiting.note.as_deref(), Some("waiting on Planner"));
        assert!(waiting.actions.is_empty());
        let escalated = ask_footer_row(&ask(&["X"], planner(true)), &id());
        assert_eq!(escalated.note.as_deref(), Some("/answer"));
        assert_eq!(escalated.actions.len(), 1);
        let projection = QuestionProjection {
            asks: vec![ask(&["A"], None), ask(&["B"], planner(false))],
        };
        let texts: Vec<_> = footer_rows(&projection, &id())
            .into_iter()
            .map(|row| row.text)
            .collect();
        assert_eq!(texts, ["? [A] Which A?", "? [B] Which B?"]);
    }
}
