//! The `/answer` conversation: which Ask, then one answer per question.
//!
//! The client calls [`ANSWER_FLOW`] with what it collected so far: `askId`, then
//! `a1`..`a4` (the raw text the person typed or picked for each question). A text
//! that reads entirely as offered labels (comma-separated, quoted when a label holds
//! a comma) selects them; anything else is free text.

use serde_json::{Map, Value, json};
use shiitake_protocol::catalog::{ArgumentKind, CatalogChoice, FlowStep};

use crate::contract::{AnswerAsk, MAX_ANSWER_TEXT_CHARS, Question, QuestionAnswer, parse_labels};
use crate::state::Book;

pub use crate::contract::ANSWER_FLOW;

/// The argument that carries the answer to question `index` (0-based): `a1`..`a4`.
pub fn answer_argument(index: usize) -> String {
    format!("a{}", index + 1)
}

/// Reads what a person typed or picked for `question`.
pub fn read_answer(question: &Question, raw: &str) -> QuestionAnswer {
    let offered = |label: &String| question.options.iter().any(|o| &o.label == label);
    if let Ok(labels) = parse_labels(raw)
        && !labels.is_empty()
        && labels.iter().all(offered)
        && (question.multi_select || labels.len() == 1)
    {
        return QuestionAnswer {
            selected: labels,
            text: None,
        };
    }
    QuestionAnswer {
        selected: Vec::new(),
        text: Some(raw.trim().to_owned()),
    }
}

/// The next step of the `/answer` conversation for the arguments collected so far.
pub fn answer_step(book: &Book, collected: &Value) -> FlowStep {
    let empty = Map::new();
    let collected = collected.as_object().unwrap_or(&empty);
    let open: Vec<_> = book.open().collect();
    if open.is_empty() {
        return FlowStep::Unavailable {
            message: "No question is waiting for an answer.".into(),
        };
    }
    let chosen = collected.get("askId").and_then(Value::as_str);
    let row = match chosen {
        Some(id) => match open.iter().find(|row| row.ask_id.as_str() == id) {
            Some(row) => *row,
            None => {
                return FlowStep::Unavailable {
                    message: format!("Question {id} is no longer waiting for an answer."),
                };
            }
        },
        None if open.len() == 1 => open[0],
        None => {
            return FlowStep::Ask {
                argument: "askId".into(),
                prompt: "Which question do you want to answer?".into(),
                kind: ArgumentKind::Choice {
                    choices: open
                        .iter()
                        .map(|row| CatalogChoice {
                            label: row
                                .questions
                                .first()
                                .map(Question::tagged)
                                .unwrap_or_default(),
                            value: row.ask_id.as_str().to_owned(),
                        })
                        .collect(),
                    multiple: false,
                    free_text: false,
                },
            };
        }
    };
    let mut answers = Vec::new();
    for (index, question) in row.questions.iter().enumerate() {
        let argument = answer_argument(index);
        let raw = collected
            .get(&argument)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|raw| !raw.is_empty());
        let Some(raw) = raw else {
            return FlowStep::Ask {
                argument,
                prompt: question.tagged(),
                kind: ArgumentKind::Choice {
                    choices: question
                        .options
                        .iter()
                        .map(|option| CatalogChoice {
                            label: match &option.description {
                                Some(description) => format!("{} — {description}", option.label),
                                None => option.label.clone(),
                            },
                            value: option.label.clone(),
                        })
                        .collect(),
                    multiple: question.multi_select,
                    free_text: true,
                },
            };
        };
        if raw.chars().count() > MAX_ANSWER_TEXT_CHARS {
            return FlowStep::Unavailable {
                message: format!(
                    "The answer to [{}] is longer than {MAX_ANSWER_TEXT_CHARS} characters.",
                    question.header
                ),
            };
        }
        answers.push(read_answer(question, raw));
    }
    let summary = row
        .questions
        .iter()
        .zip(&answers)
        .map(|(question, answer)| {
            let said = if answer.selected.is_empty() {
                format!("\"{}\"", answer.text.clone().unwrap_or_default())
            } else {
                answer.selected.join(", ")
            };
            format!("[{}] {said}", question.header)
        })
        .collect::<Vec<_>>()
        .join("; ");
    let input = AnswerAsk {
        ask_id: row.ask_id.clone(),
        request_id: String::new(),
        answers,
    };
    let mut input = json!(input);
    if let Some(object) = input.as_object_mut() {
        // The client adds its own request id when it makes the call.
        object.remove("requestId");
    }
    FlowStep::Confirm {
        summary: format!("Answer {summary}"),
        input,
    }
}
