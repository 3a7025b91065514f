//! A question answered in words: how a client that has only text (an editor over ACP,
//! another agent over MCP or A2A) shows an Ask, and reads a person's reply as its
//! answer. Part of the contract: it compiles without shiitake-core.

use shiitake_protocol::SessionExtensionSlots;
use shiitake_protocol::extension::{ExtensionViewV0, view};

use crate::contract::{AnswerAsk, AskView, QuestionAnswer, QuestionContract};

/// The Asks waiting in a Session's extension slots, oldest first (none when the
/// Question extension is absent, stopped or unreadable).
pub fn waiting_asks(slots: &SessionExtensionSlots) -> Vec<AskView> {
    match view::<QuestionContract>(slots) {
        Ok(ExtensionViewV0::Running {
            value: Some(projection),
        }) => projection.asks,
        _ => Vec::new(),
    }
}

/// `ask`'s questions as one message, numbered options under each, and how to reply:
/// what a text-only client (an editor, another agent) shows a person.
pub fn ask_text(ask: &AskView) -> String {
    let mut said = String::from("\n\n");
    for (n, question) in ask.questions.iter().enumerate() {
        if ask.questions.len() > 1 {
            said.push_str(&format!("{}. ", n + 1));
        }
        said.push_str(&question.question);
        said.push('\n');
        for (k, option) in question.options.iter().enumerate() {
            said.push_str(&format!("  {}) {}\n", k + 1, option.label));
        }
    }
    said.push_str(if ask.questions.len() > 1 {
        "Reply with one line per question: an option's number or label, or your own words."
    } else {
        "Reply with an option's number or label, or your own words."
    });
    said
}

/// The answer a reply gives `ask`: one line per question (the whole reply for one
/// question); a line that is an option's number or label picks it, any other line is
/// the person's own words. `None` when there are fewer lines than questions.
pub fn answer_from_reply(ask: &AskView, reply: &str, request_id: String) -> Option<AnswerAsk> {
    let lines: Vec<&str> = if ask.questions.len() == 1 {
        vec![reply.trim()]
    } else {
        reply
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect()
    };
    if lines.len() < ask.questions.len() {
        return None;
    }
    let answers = ask
        .questions
        .iter()
        .zip(lines)
        .map(|(question, line)| {
            let picked = line
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|index| question.options.get(index))
                .or_else(|| {
                    question
                        .options
                        .iter()
                        .find(|option| option.label.eq_ignore_ascii_case(line))
                });
            match picked {
                Some(option) => QuestionAnswer {
                    selected: vec![option.label.clone()],
                    text: None,
                },
                None => QuestionAnswer {
                    selected: Vec::new(),
                    text: Some(line.to_owned()),
                },
            }
        })
        .collect();
    Some(AnswerAsk {
        ask_id: ask.ask_id.clone(),
        request_id,
        answers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(questions: serde_json::Value) -> AskView {
        serde_json::from_value(json!({"askId": "ask_1", "questions": questions,
            "createdAt": 1}))
        .unwrap()
    }

    fn one() -> AskView {
        ask(
            json!([{"header": "Store", "question": "Which database?", "options": [
            {"label": "SQLite", "description": "a file"},
            {"label": "PostgreSQL", "description": "a server"}], "multiSelect": false}]),
        )
    }

    #[test]
    fn a_question_reads_as_numbered_options() {
        let said = ask_text(&one());
        assert!(
            said.contains("Which database?\n  1) SQLite\n  2) PostgreSQL\n"),
            "{said}"
        );
        assert!(said.ends_with("Reply with an option's number or label, or your own words."));
    }

    #[test]
    fn a_reply_picks_by_number_or_label_or_is_free_text() {
        let picked = |reply: &str| {
            answer_from_reply(&one(), reply, "r".into())
                .unwrap()
                .answers
        };
        assert_eq!(picked("2")[0].selected, ["PostgreSQL"]);
        assert_eq!(picked(" sqlite ")[0].selected, ["SQLite"]);
        assert_eq!(picked("9")[0].text.as_deref(), Some("9"));
        assert_eq!(
            picked("whatever is simplest")[0].text.as_deref(),
            Some("whatever is simplest")
        );
        let two = ask(json!([
            {"header": "A", "question": "A?", "options": [{"label": "x", "description": ""}],
             "multiSelect": false},
            {"header": "B", "question": "B?", "options": [], "multiSelect": false}]));
        assert!(
            answer_from_reply(&two, "1", "r".into()).is_none(),
            "one line for two questions"
        );
        let both = answer_from_reply(&two, "1\nmy words", "r".into())
            .unwrap()
            .answers;
        assert_eq!(both[0].selected, ["x"]);
        assert_eq!(both[1].text.as_deref(), Some("my words"));
    }
}
