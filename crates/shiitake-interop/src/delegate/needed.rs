//! What a run waits on a person for, and a person's reply read as its answer: the
//! same for every protocol, which only carries the question out and the reply back.

use shiitake_ext_approval::contract::{ApprovalView, Decision, waiting_approvals};
use shiitake_ext_question::contract::{AnswerAsk, AskView, QuestionAnswer};
use shiitake_ext_question::reply::{answer_from_reply, ask_text, waiting_asks};
use shiitake_protocol::{SessionExtensionSlots, ShiitakeError};

/// A person's input a run waits for.
#[derive(Clone, Debug, PartialEq)]
pub enum Needed {
    /// A question the agent asked (the Question extension).
    Ask(AskView),
    /// A tool call waiting for an approval (the approval extension).
    Approval(ApprovalView),
}

/// A reply to what a run needs: words, or one value per question (a form's fields).
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// One line per question (an option's number or label, or the person's own
    /// words); for an approval, `allow`, `allow_session` or `deny`.
    Text(String),
    /// The fields of a form, named as [`Needed::fields`] names them.
    Fields(serde_json::Map<String, serde_json::Value>),
}

/// The field of an approval's form.
pub const DECISION_FIELD: &str = "decision";

impl Needed {
    /// What a Session's extension slots say its running work waits on: the oldest Ask
    /// a person is asked, else the oldest approval the run holds (not a parked one).
    pub fn in_slots(slots: &SessionExtensionSlots) -> Option<Self> {
        if let Some(ask) = waiting_asks(slots).into_iter().find(AskView::needs_person) {
            return Some(Self::Ask(ask));
        }
        waiting_approvals(slots)
            .into_iter()
            .find(|approval| !approval.parked)
            .map(Self::Approval)
    }

    /// The Ask's or the approval's id.
    pub fn id(&self) -> &str {
        match self {
            Self::Ask(ask) => ask.ask_id.as_str(),
            Self::Approval(approval) => approval.approval_id.as_str(),
        }
    }

    /// `ask` or `approval`: what the id names.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Ask(_) => "ask",
            Self::Approval(_) => "approval",
        }
    }

    /// What a person reads: the questions with numbered options, or the call and how
    /// to answer it.
    pub fn text(&self) -> String {
        match self {
            Self::Ask(ask) => ask_text(ask).trim_start().to_owned(),
            Self::Approval(approval) => {
                let mut said = approval.line();
                if !approval.facts.is_empty() {
                    said.push_str(&format!("\n{}", approval.facts_line()));
                }
                said.push_str(&format!(
                    "\n{}\nReply with one of: {}.",
                    approval.why,
                    Decision::ALL.map(Decision::as_str).join(", ")
                ));
                said
            }
        }
    }

    /// What a form for it says above its fields: the questions, or the call with where
    /// it runs and why the host asks.
    pub fn form_message(&self) -> String {
        match self {
            Self::Ask(ask) => ask
                .questions
                .iter()
                .map(|question| question.tagged())
                .collect::<Vec<_>>()
                .join("\n"),
            Self::Approval(approval) => {
                let mut said = approval.line();
                if !approval.facts.is_empty() {
                    said.push_str(&format!("\n{}", approval.facts_line()));
                }
                said.push_str(&format!("\n{}", approval.why));
                said
            }
        }
    }

    /// The fields a form for it has: one string per question (`q1`, `q2`, ...) whose
    /// options are its labels, or the one `decision` of an approval; each as
    /// `(name, title, description, allowed values)`.
    pub fn fields(&self) -> Vec<Field> {
        match self {
            Self::Ask(ask) => ask
                .questions
                .iter()
                .enumerate()
                .map(|(n, question)| Field {
                    name: format!("q{}", n + 1),
                    title: question.header.clone(),
                    description: question.question.clone(),
                    options: question
                        .options
                        .iter()
                        .map(|option| option.label.clone())
                        .collect(),
                    free_text: true,
                })
                .collect(),
            Self::Approval(approval) => vec![Field {
                name: DECISION_FIELD.to_owned(),
                title: format!("Run {}?", approval.tool),
                description: approval.line(),
                options: Decision::ALL.map(|d| d.as_str().to_owned()).to_vec(),
                free_text: false,
            }],
        }
    }
}

/// One field of the form a [`Needed`] is asked as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its key in the reply.
    pub name: String,
    /// A short title.
    pub title: String,
    /// The question.
    pub description: String,
    /// The values offered.
    pub options: Vec<String>,
    /// Whether other words are accepted too.
    pub free_text: bool,
}

/// The answer `reply` gives `ask`.
pub(crate) fn ask_answer(
    ask: &AskView,
    reply: &Reply,
    request: String,
) -> Result<AnswerAsk, ShiitakeError> {
    match reply {
        Reply::Text(text) => answer_from_reply(ask, text, request).ok_or_else(|| {
            ShiitakeError::invalid(format!(
                "the reply answers fewer than the {} questions of {}: one line per question",
                ask.questions.len(),
                ask.ask_id.as_str()
            ))
        }),
        Reply::Fields(fields) => {
            let answers = ask
                .questions
                .iter()
                .enumerate()
                .map(|(n, question)| {
                    let name = format!("q{}", n + 1);
                    let value = fields.get(&name).and_then(serde_json::Value::as_str);
                    let value = value.map(str::trim).filter(|value| !value.is_empty());
                    let value = value.ok_or_else(|| {
                        ShiitakeError::invalid(format!(
                            "the reply has no {name} ({})",
                            question.question
                        ))
                    })?;
                    Ok(match question.options.iter().find(|o| o.label == value) {
                        Some(option) => QuestionAnswer {
                            selected: vec![option.label.clone()],
                            text: None,
                        },
                        None => QuestionAnswer {
                            selected: Vec::new(),
                            text: Some(value.to_owned()),
                        },
                    })
                })
                .collect::<Result<Vec<_>, ShiitakeError>>()?;
            Ok(AnswerAsk {
                ask_id: ask.ask_id.clone(),
                request_id: request,
                answers,
            })
        }
    }
}

/// The decision `reply` gives an approval.
pub(crate) fn decision(reply: &Reply) -> Result<Decision, ShiitakeError> {
    let said = match reply {
        Reply::Text(text) => Some(text.as_str()),
        Reply::Fields(fields) => fields
            .get(DECISION_FIELD)
            .and_then(serde_json::Value::as_str),
    };
    said.and_then(Decision::from_reply).ok_or_else(|| {
        ShiitakeError::invalid(format!(
            "an approval is answered with one of: {}",
            Decision::ALL.map(Decision::as_str).join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask() -> AskView {
        serde_json::from_value(json!({"askId": "ask_1", "createdAt": 1, "questions": [
            {"header": "Store", "question": "Which database?", "multiSelect": false,
             "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]}]}))
        .unwrap()
    }

    fn approval() -> ApprovalView {
        serde_json::from_value(json!({"approvalId": "ap1", "tool": "files__edit",
            "arguments": {"path": "a"}, "why": "the host asks", "createdAt": 1,
            "parked": false}))
        .unwrap()
    }

    #[test]
    fn an_ask_is_a_form_of_one_field_per_question() {
        let fields = Needed::Ask(ask()).fields();
        assert_eq!(fields.len(), 1);
        assert_eq!(fields[0].name, "q1");
        assert_eq!(fields[0].options, ["SQLite", "PostgreSQL"]);
        let mut form = serde_json::Map::new();
        form.insert("q1".into(), json!("PostgreSQL"));
        let answer = ask_answer(&ask(), &Reply::Fields(form), "r".into()).unwrap();
        assert_eq!(answer.answers[0].selected, ["PostgreSQL"]);
        let mut words = serde_json::Map::new();
        words.insert("q1".into(), json!("whatever is simplest"));
        let answer = ask_answer(&ask(), &Reply::Fields(words), "r".into()).unwrap();
        assert_eq!(
            answer.answers[0].text.as_deref(),
            Some("whatever is simplest")
        );
        let missing = ask_answer(&ask(), &Reply::Fields(serde_json::Map::new()), "r".into());
        assert!(missing.unwrap_err().message.contains("no q1"));
        let text = ask_answer(&ask(), &Reply::Text("2".into()), "r".into()).unwrap();
        assert_eq!(text.answers[0].selected, ["PostgreSQL"]);
    }

    #[test]
    fn an_approval_is_answered_by_its_decision_in_words_or_in_its_field() {
        assert_eq!(
            decision(&Reply::Text("allow".into())).unwrap(),
            Decision::AllowOnce
        );
        assert_eq!(
            decision(&Reply::Text(" Deny. ".into())).unwrap(),
            Decision::Deny
        );
        let mut form = serde_json::Map::new();
        form.insert(DECISION_FIELD.into(), json!("allow_session"));
        assert_eq!(
            decision(&Reply::Fields(form)).unwrap(),
            Decision::AllowSession
        );
        assert!(decision(&Reply::Text("maybe".into())).is_err());
        let text = Needed::Approval(approval()).text();
        assert!(text.starts_with("approve files__edit?"), "{text}");
        assert!(text.ends_with("Reply with one of: allow_once, allow_session, deny."));
        let form = Needed::Approval(approval()).form_message();
        assert!(form.ends_with("\nthe host asks"), "{form}");
        assert_eq!(Needed::Ask(ask()).form_message(), "[Store] Which database?");
    }
}
