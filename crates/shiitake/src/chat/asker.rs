//! Who answers a slash command's questions: `inquire` prompts on a terminal, the
//! next typed lines when stdin is a pipe.

use async_trait::async_trait;
use shiitake_protocol::catalog::ArgumentKind;

use super::flows::{Asker, choice_value, question_lines};
use super::input::{Event, Input};
use crate::error::CliError;
use crate::render::Printer;

/// Answers from the lines that follow, in order: a number picks a choice.
pub struct LineAsker<'a> {
    /// Where the lines come from.
    pub input: &'a mut Input,
    /// Where questions and results are printed.
    pub printer: &'a mut Printer,
}

#[async_trait]
impl Asker for LineAsker<'_> {
    async fn ask(&mut self, prompt: &str, kind: &ArgumentKind) -> Result<Option<String>, CliError> {
        for line in question_lines(prompt, kind) {
            self.printer.note(&line);
        }
        self.input.resume();
        Ok(match self.input.next().await {
            Some(Event::Line(line)) => Some(choice_value(kind, &line)),
            Some(Event::Interrupt) | None => None,
        })
    }

    async fn confirm(&mut self, summary: &str) -> Result<bool, CliError> {
        // Piped lines answer questions, not confirmations: what was piped is meant.
        self.printer.note(&format!(
            "[ok] {}",
            crate::render::style::inert_line(summary)
        ));
        Ok(true)
    }

    fn say(&mut self, line: &str) {
        self.printer.note(line);
    }
}

/// Answers with `inquire` prompts on the terminal (the line editor waits meanwhile).
pub struct TerminalAsker<'a> {
    /// Where results are printed.
    pub printer: &'a mut Printer,
}

const OTHER: &str = "Other (type an answer)";

fn prompt_blocking(
    prompt: String,
    kind: ArgumentKind,
) -> Result<Option<String>, inquire::InquireError> {
    use inquire::{Confirm, MultiSelect, Select, Text};
    match kind {
        ArgumentKind::Choice {
            choices,
            multiple,
            free_text,
        } => {
            let mut labels: Vec<String> = choices.iter().map(|c| c.label.clone()).collect();
            if free_text {
                labels.push(OTHER.into());
            }
            let value_of = |label: &str| {
                choices
                    .iter()
                    .find(|c| c.label == label)
                    .map(|c| c.value.clone())
            };
            let picked: Vec<String> = if multiple {
                MultiSelect::new(&prompt, labels).prompt()?
            } else {
                vec![Select::new(&prompt, labels).prompt()?]
            };
            if picked.iter().any(|label| label == OTHER) {
                return Text::new(&prompt).prompt().map(Some);
            }
            let values: Vec<String> = picked.iter().filter_map(|label| value_of(label)).collect();
            Ok(Some(shiitake_ext_question::contract::format_labels(
                &values,
            )))
        }
        ArgumentKind::Boolean => Confirm::new(&prompt)
            .prompt()
            .map(|yes| Some(if yes { "yes" } else { "no" }.to_owned())),
        ArgumentKind::Integer | ArgumentKind::Text { .. } => Text::new(&prompt).prompt().map(Some),
    }
}

fn gave_up(error: inquire::InquireError) -> Result<Option<String>, CliError> {
    match error {
        inquire::InquireError::OperationCanceled | inquire::InquireError::OperationInterrupted => {
            Ok(None)
        }
        other => Err(CliError::Setup(format!("prompt: {other}"))),
    }
}

#[async_trait]
impl Asker for TerminalAsker<'_> {
    async fn ask(&mut self, prompt: &str, kind: &ArgumentKind) -> Result<Option<String>, CliError> {
        let (prompt, kind) = (crate::render::style::inert_line(prompt), kind.clone());
        match tokio::task::spawn_blocking(move || prompt_blocking(prompt, kind)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => gave_up(error),
            Err(_) => Err(CliError::Setup("the prompt thread failed".into())),
        }
    }

    async fn confirm(&mut self, summary: &str) -> Result<bool, CliError> {
        let summary = crate::render::style::inert_line(summary);
        let asked = tokio::task::spawn_blocking(move || {
            inquire::Confirm::new(&summary).with_default(true).prompt()
        })
        .await;
        match asked {
            Ok(Ok(yes)) => Ok(yes),
            Ok(Err(error)) => gave_up(error).map(|_| false),
            Err(_) => Err(CliError::Setup("the prompt thread failed".into())),
        }
    }

    fn say(&mut self, line: &str) {
        self.printer.note(line);
    }
}
