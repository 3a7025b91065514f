//! What the model reads: the in-turn tool result and the self-contained follow-up.

use serde_json::{Value, json};

use crate::contract::{ExpireAction, Question, QuestionAnswer};
use crate::state::{AskRow, Resolution, Responder};

/// The recommended answers: the first option of each question.
pub fn recommended(questions: &[Question]) -> Vec<QuestionAnswer> {
    questions
        .iter()
        .map(|question| QuestionAnswer {
            selected: question
                .options
                .first()
                .map(|option| vec![option.label.clone()])
                .unwrap_or_default(),
            text: None,
        })
        .collect()
}

fn answer_line(answer: &QuestionAnswer) -> String {
    let mut parts = Vec::new();
    if !answer.selected.is_empty() {
        parts.push(answer.selected.join(", "));
    }
    if let Some(text) = answer
        .text
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        parts.push(format!("\"{text}\""));
    }
    parts.join(" — ")
}

fn questions_with(questions: &[Question], answers: Option<&[QuestionAnswer]>) -> String {
    let mut out = String::new();
    for (index, question) in questions.iter().enumerate() {
        out.push_str(&format!("\n[{}] {}", question.header, question.question));
        if let Some(answer) = answers.and_then(|answers| answers.get(index)) {
            out.push_str(&format!("\nAnswer: {}", answer_line(answer)));
        }
    }
    out
}

/// The follow-up prompt that delivers a resolution outside the turn that asked:
/// readable without the transcript (it names the questions and the answers).
pub fn follow_up(row: &AskRow, resolution: &Resolution) -> String {
    let id = &row.ask_id;
    match resolution {
        Resolution::Answered { answers, by } => {
            let who = match by {
                Responder::Person => "A person".to_owned(),
                Responder::Sender => row
                    .waiting_on
                    .as_ref()
                    .map_or_else(|| "The sending Agent".to_owned(), |w| w.agent.clone()),
            };
            format!(
                "{who} answered the question you asked earlier (question {id}).{}\nContinue with these answers.",
                questions_with(&row.questions, Some(answers))
            )
        }
        Resolution::Declined { reason } => {
            let reason = reason
                .as_deref()
                .map(|r| format!("\nReason: {r}"))
                .unwrap_or_default();
            format!(
                "The person declined to answer the question you asked earlier (question {id}).{}{reason}\nDo not wait for an answer; decide how to go on without it, or stop.",
                questions_with(&row.questions, None)
            )
        }
        Resolution::Expired { action } => {
            let minutes = row.on_expire.map(|e| e.after_minutes).unwrap_or_default();
            match action {
                ExpireAction::Stop => format!(
                    "Nobody answered the question you asked earlier (question {id}) within {minutes} minutes, and it expired.{}\nDo not proceed with the work that depended on it: stop here and say what is left undecided.",
                    questions_with(&row.questions, None)
                ),
                ExpireAction::ProceedWithRecommended => format!(
                    "Nobody answered the question you asked earlier (question {id}) within {minutes} minutes, so its recommended answers apply.{}\nProceed with these answers.",
                    questions_with(&row.questions, Some(&recommended(&row.questions)))
                ),
            }
        }
    }
}

/// The tool result that delivers a resolution in the turn that asked.
pub fn in_turn(row_questions: &[Question], ask_id: &str, resolution: &Resolution) -> Value {
    let answered = |answers: &[QuestionAnswer]| -> Vec<Value> {
        row_questions
            .iter()
            .zip(answers)
            .map(|(question, answer)| {
                json!({
                    "header": question.header,
                    "question": question.question,
                    "selected": answer.selected,
                    "text": answer.text,
                })
            })
            .collect()
    };
    match resolution {
        Resolution::Answered { answers, by } => json!({
            "askId": ask_id,
            "status": "answered",
            "by": match by { Responder::Person => "person", Responder::Sender => "sender" },
            "answers": answered(answers),
        }),
        Resolution::Declined { reason } => json!({
            "askId": ask_id,
            "status": "declined",
            "reason": reason,
            "message": "The person declined to answer. Decide how to go on without it, or stop.",
        }),
        Resolution::Expired {
            action: ExpireAction::Stop,
        } => json!({
            "askId": ask_id,
            "status": "expired",
            "message": "Nobody answered in time. Do not proceed with the work that depended on it.",
        }),
        Resolution::Expired {
            action: ExpireAction::ProceedWithRecommended,
        } => json!({
            "askId": ask_id,
            "status": "expired",
            "message": "Nobody answered in time; the recommended answers apply. Proceed with them.",
            "answers": answered(&recommended(row_questions)),
        }),
    }
}

/// The tool result of an Ask that was parked: its answer comes later as a message.
pub fn parked(ask_id: &str, why: &str) -> Value {
    json!({
        "askId": ask_id,
        "status": "parked",
        "message": format!("{why} The question stays open; its answer will arrive as a new message. Go on with other work that does not depend on it, or end your turn."),
    })
}
