//! The bounds of an Ask and of an answer, checked before anything is stored.

use crate::contract::{
    AskInput, MAX_ANSWER_TEXT_CHARS, MAX_DESCRIPTION_CHARS, MAX_EXPIRE_MINUTES, MAX_HEADER_CHARS,
    MAX_LABEL_CHARS, MAX_OPTIONS, MAX_QUESTION_CHARS, MAX_QUESTIONS, MAX_REASON_CHARS,
    MIN_EXPIRE_MINUTES, Question, QuestionAnswer,
};

/// Why an Ask or an answer was refused; the text is told to the model or the person.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

fn refuse(message: impl Into<String>) -> Refused {
    Refused(message.into())
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

fn bounded_text(what: &str, text: &str, max: usize) -> Result<(), Refused> {
    if text.trim().is_empty() {
        return Err(refuse(format!("{what} is empty")));
    }
    if chars(text) > max {
        return Err(refuse(format!(
            "{what} has {} characters, more than {max}",
            chars(text)
        )));
    }
    if text.chars().any(|c| c.is_control() && c != '\n') {
        return Err(refuse(format!("{what} holds a control character")));
    }
    Ok(())
}

/// Checks every bound of `question.ask`'s input.
pub fn ask_input(input: &AskInput) -> Result<(), Refused> {
    let count = input.questions.len();
    if count == 0 || count > MAX_QUESTIONS {
        return Err(refuse(format!(
            "an Ask holds 1 to {MAX_QUESTIONS} questions, not {count}"
        )));
    }
    for (index, question) in input.questions.iter().enumerate() {
        let n = index + 1;
        bounded_text(
            &format!("the header of question {n}"),
            &question.header,
            MAX_HEADER_CHARS,
        )?;
        if question.header.contains('\n') {
            return Err(refuse(format!(
                "the header of question {n} holds a line break"
            )));
        }
        bounded_text(
            &format!("question {n}"),
            &question.question,
            MAX_QUESTION_CHARS,
        )?;
        let options = question.options.len();
        if options == 0 || options > MAX_OPTIONS {
            return Err(refuse(format!(
                "question {n} offers 1 to {MAX_OPTIONS} options, not {options}"
            )));
        }
        for (o, option) in question.options.iter().enumerate() {
            let what = format!("option {} of question {n}", o + 1);
            bounded_text(
                &format!("the label of {what}"),
                &option.label,
                MAX_LABEL_CHARS,
            )?;
            if option.label.contains('\n') {
                return Err(refuse(format!("the label of {what} holds a line break")));
            }
            if let Some(description) = &option.description {
                bounded_text(
                    &format!("the description of {what}"),
                    description,
                    MAX_DESCRIPTION_CHARS,
                )?;
            }
            if question.options[..o]
                .iter()
                .any(|other| other.label == option.label)
            {
                return Err(refuse(format!(
                    "question {n} offers the label {:?} twice",
                    option.label
                )));
            }
        }
    }
    if let Some(expire) = &input.on_expire
        && !(MIN_EXPIRE_MINUTES..=MAX_EXPIRE_MINUTES).contains(&expire.after_minutes)
    {
        return Err(refuse(format!(
            "onExpire.afterMinutes is {MIN_EXPIRE_MINUTES} to {MAX_EXPIRE_MINUTES}, not {}",
            expire.after_minutes
        )));
    }
    Ok(())
}

/// Checks that every question is answered with offered labels or non-empty free text.
pub fn answers(questions: &[Question], answers: &[QuestionAnswer]) -> Result<(), Refused> {
    if answers.len() != questions.len() {
        return Err(refuse(format!(
            "the Ask has {} questions; {} answers were given",
            questions.len(),
            answers.len()
        )));
    }
    for (index, (question, answer)) in questions.iter().zip(answers).enumerate() {
        let n = index + 1;
        let text = answer.text.as_deref().map(str::trim).unwrap_or_default();
        if answer.selected.is_empty() && text.is_empty() {
            return Err(refuse(format!(
                "question {n} ({}) needs an offered label or non-empty text",
                question.header
            )));
        }
        if let Some(text) = &answer.text
            && chars(text) > MAX_ANSWER_TEXT_CHARS
        {
            return Err(refuse(format!(
                "the text answering question {n} has {} characters, more than {MAX_ANSWER_TEXT_CHARS}",
                chars(text)
            )));
        }
        if !question.multi_select && answer.selected.len() > 1 {
            return Err(refuse(format!(
                "question {n} ({}) takes one label, not {}",
                question.header,
                answer.selected.len()
            )));
        }
        for label in &answer.selected {
            if !question.options.iter().any(|option| &option.label == label) {
                return Err(refuse(format!(
                    "question {n} ({}) offers no label {label:?}",
                    question.header
                )));
            }
        }
        for (s, label) in answer.selected.iter().enumerate() {
            if answer.selected[..s].contains(label) {
                return Err(refuse(format!(
                    "question {n} names the label {label:?} twice"
                )));
            }
        }
    }
    Ok(())
}

/// Checks a decline's reason.
pub fn reason(reason: Option<&str>) -> Result<(), Refused> {
    match reason {
        Some(reason) if chars(reason) > MAX_REASON_CHARS => Err(refuse(format!(
            "the reason has {} characters, more than {MAX_REASON_CHARS}",
            chars(reason)
        ))),
        _ => Ok(()),
    }
}
