//! Slash commands in `chat`: the human command flows the server advertises
//! (`whistle.catalog/v1`, `GET /v1/catalogs`), run without knowing the extensions.
//!
//! `/name rest…` finds the catalog command `name`. A command with a `flow` asks the
//! server for each step (`docs/wire.md`, "Flows"); one without asks its `steps` for
//! arguments not typed. The words after the name fill the first thing asked. The
//! command then runs through `call_extension` with a fresh request id. Questions go
//! to an [`Asker`]: `inquire` prompts on a terminal, or the next typed lines when
//! stdin is a pipe (lines answer in order).
//!
//! `/answer @agent` is the footer's Answer action on a row about that Agent (a
//! sub-agent row): the flow it names, run on the child's Session ([`answer_child`]).

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use shiitake_client::{RemoteAgent, RemoteSession};
use shiitake_protocol::catalog::{
    ArgumentKind, CatalogCommand, CatalogEntry, CatalogScope, FlowStep, SessionCatalogs,
};
use shiitake_protocol::footer::FooterActionKind;
use shiitake_protocol::{
    AgentApi, AgentName, ExtensionId, ExtensionRunState, ReadOptions, SessionApi, SessionId,
};

use crate::error::CliError;
use crate::render::style::inert_line;

/// The name a footer action carries when it answers a question (`/answer @agent` runs it).
const ANSWER_ACTION: &str = "answer";

/// Most steps one flow may take before the client gives up on it.
pub const MAX_FLOW_STEPS: usize = 32;

/// A typed `/name rest`.
#[derive(Debug, PartialEq, Eq)]
pub struct Slash {
    /// The command's name, without the slash.
    pub name: String,
    /// The rest of the line, trimmed (empty when nothing followed).
    pub rest: String,
}

/// Reads `/name rest`; `None` when the line is not a slash command.
pub fn parse(line: &str) -> Option<Slash> {
    let line = line.trim().strip_prefix('/')?;
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    if name.is_empty() {
        return None;
    }
    Some(Slash {
        name: name.to_owned(),
        rest: rest.trim().to_owned(),
    })
}

/// Who answers a flow's questions.
#[async_trait]
pub trait Asker: Send {
    /// Asks `prompt` for a value of `kind`, as the call takes it (a choice's value, or
    /// several as a label list); `None` when the person gave up.
    async fn ask(&mut self, prompt: &str, kind: &ArgumentKind) -> Result<Option<String>, CliError>;
    /// Asks to go ahead with `summary`; `false` stops the command.
    async fn confirm(&mut self, summary: &str) -> Result<bool, CliError>;
    /// Shows one line of the flow's output.
    fn say(&mut self, line: &str);
}

/// What the person typed for a choice: a number picks that choice (several,
/// comma-separated, for `multiple`); anything else is kept as typed (labels or free text).
pub fn choice_value(kind: &ArgumentKind, typed: &str) -> String {
    let ArgumentKind::Choice {
        choices, multiple, ..
    } = kind
    else {
        return typed.trim().to_owned();
    };
    let picked: Option<Vec<&str>> = typed
        .split(',')
        .map(|part| {
            let n: usize = part.trim().parse().ok()?;
            choices.get(n.checked_sub(1)?).map(|c| c.value.as_str())
        })
        .collect();
    match picked {
        Some(values) if !values.is_empty() && (*multiple || values.len() == 1) => {
            shiitake_ext_question::contract::format_labels(&values)
        }
        _ => typed.trim().to_owned(),
    }
}

/// The lines that show a question and its choices.
pub fn question_lines(prompt: &str, kind: &ArgumentKind) -> Vec<String> {
    let mut lines = vec![format!("[?] {}", inert_line(prompt))];
    if let ArgumentKind::Choice {
        choices,
        multiple,
        free_text,
    } = kind
    {
        for (n, choice) in choices.iter().enumerate() {
            lines.push(format!("  {}) {}", n + 1, inert_line(&choice.label)));
        }
        let mut how = if *multiple {
            "numbers or labels, comma-separated".to_owned()
        } else {
            "a number or a label".to_owned()
        };
        if *free_text {
            how.push_str(", or your own words");
        }
        lines.push(format!("  ({how})"));
    }
    lines
}

/// The argument value for `typed` as the call expects it.
fn argument_value(kind: &ArgumentKind, typed: &str) -> Result<Value, String> {
    match kind {
        ArgumentKind::Integer => typed
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{typed:?} is not a whole number")),
        ArgumentKind::Boolean => match typed.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err(format!("{typed:?} is not yes or no")),
        },
        ArgumentKind::Text { max_bytes } => {
            if typed.len() > *max_bytes as usize {
                Err(format!("longer than {max_bytes} bytes"))
            } else {
                Ok(Value::String(typed.to_owned()))
            }
        }
        ArgumentKind::Choice { .. } => Ok(Value::String(typed.to_owned())),
    }
}

/// The commands `/help` lists: every catalog command, then the chat's own.
pub fn help(catalogs: &SessionCatalogs) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in &catalogs.catalogs {
        for command in &entry.catalog.commands {
            let state = match &entry.state {
                ExtensionRunState::Running => String::new(),
                ExtensionRunState::Stopped { reason } => {
                    format!(" (stopped: {})", inert_line(reason))
                }
            };
            lines.push(format!(
                "/{} — {}{state}",
                inert_line(&command.name),
                inert_line(&command.summary)
            ));
        }
    }
    lines.push("/answer @AGENT — answer the question of a sub-agent that needs you".into());
    lines.push("/steer TEXT or !TEXT — steer the running work".into());
    lines.push("/abort — stop the running work; /quit — leave".into());
    lines
}

fn find<'a>(
    catalogs: &'a SessionCatalogs,
    name: &str,
) -> Option<(&'a CatalogEntry, &'a CatalogCommand)> {
    catalogs.catalogs.iter().find_map(|entry| {
        entry
            .catalog
            .commands
            .iter()
            .find(|command| command.name == name)
            .map(|command| (entry, command))
    })
}

/// Where a command runs.
struct Target<'a> {
    agent: &'a RemoteAgent,
    session: &'a RemoteSession,
    extension: ExtensionId,
    scope: CatalogScope,
}

impl Target<'_> {
    async fn call(&self, command: &str, input: Value) -> Result<Value, CliError> {
        Ok(match self.scope {
            CatalogScope::Session => {
                self.session
                    .call_extension(&self.extension, command, input)
                    .await?
            }
            CatalogScope::Agent => {
                self.agent
                    .call_extension(&self.extension, command, input)
                    .await?
            }
        })
    }
}

fn with_request(mut input: Value, request_id: &str) -> Value {
    if let Some(object) = input.as_object_mut() {
        object.insert("requestId".into(), json!(request_id));
    }
    input
}

/// Runs `/name rest` against the server's catalogs; `request_id` makes the final call idempotent.
pub async fn run(
    agent: &RemoteAgent,
    session: &RemoteSession,
    slash: &Slash,
    asker: &mut dyn Asker,
    request_id: &str,
) -> Result<(), CliError> {
    let catalogs = agent.catalogs().await?;
    if slash.name == "help" {
        for line in help(&catalogs) {
            asker.say(&line);
        }
        return Ok(());
    }
    let Some((entry, command)) = find(&catalogs, &slash.name) else {
        asker.say(&format!(
            "[/{}] no such command here; /help lists them",
            inert_line(&slash.name)
        ));
        return Ok(());
    };
    if let ExtensionRunState::Stopped { reason } = &entry.state {
        asker.say(&format!(
            "[/{}] stopped: {}",
            command.name,
            inert_line(reason)
        ));
        return Ok(());
    }
    let target = Target {
        agent,
        session,
        extension: entry.catalog.extension_id.clone(),
        scope: command.scope,
    };
    let mut typed = (!slash.rest.is_empty()).then(|| slash.rest.clone());
    let input = match &command.flow {
        Some(flow) => match walk_flow(&target, flow, Map::new(), &mut typed, asker).await? {
            Some(input) => input,
            None => return Ok(()),
        },
        None => match collect(command, &mut typed, asker).await? {
            Some(input) => input,
            None => return Ok(()),
        },
    };
    let output = target
        .call(&command.call, with_request(input, request_id))
        .await?;
    asker.say(&format!(
        "[/{}] {}",
        command.name,
        inert_line(&output.to_string())
    ));
    Ok(())
}

/// `/answer @agent`: the Answer action of a footer row about the Agent `child` (a
/// sub-agent row), which walks the flow it names on the child's Session (in the
/// child's Agent) from its preset.
pub async fn answer_child(
    agent: &RemoteAgent,
    session: &RemoteSession,
    child: &str,
    asker: &mut dyn Asker,
    request_id: &str,
) -> Result<(), CliError> {
    let snapshot = session.read(ReadOptions::default()).await?;
    let action = snapshot.footer.into_iter().find_map(|row| {
        row.actions
            .into_iter()
            .find_map(|action| match action.kind {
                FooterActionKind::Flow {
                    extension_id,
                    flow,
                    call,
                    preset,
                    target: Some(target),
                } if action.name == ANSWER_ACTION && target.agent == child => {
                    Some((extension_id, flow, call, preset, target))
                }
                _ => None,
            })
    });
    let Some((extension, flow, call, preset, target_session)) = action else {
        asker.say(&format!(
            "[/answer] no question of @{} waits on you here (the footer lists the Agents)",
            inert_line(child)
        ));
        return Ok(());
    };
    let invalid = |what: &str, error: &dyn std::fmt::Display| {
        CliError::Setup(format!(
            "the footer's Answer action has a bad {what}: {error}"
        ))
    };
    let child_agent = agent.agent(
        AgentName::new(target_session.agent.as_str()).map_err(|error| invalid("Agent", &error))?,
    );
    let child_session = child_agent.session(
        SessionId::new(target_session.session_id.as_str())
            .map_err(|error| invalid("Session", &error))?,
    );
    let target = Target {
        agent: &child_agent,
        session: &child_session,
        extension,
        scope: CatalogScope::Session,
    };
    let preset = match preset {
        Value::Object(preset) => preset,
        _ => Map::new(),
    };
    let Some(input) = walk_flow(&target, &flow, preset, &mut None, asker).await? else {
        return Ok(());
    };
    let output = target.call(&call, with_request(input, request_id)).await?;
    asker.say(&format!(
        "[/answer @{}] {}",
        inert_line(child),
        inert_line(&output.to_string())
    ));
    Ok(())
}

/// Walks a server-owned flow from the arguments `collected` so far to the input of
/// its call; `None` when it stopped.
async fn walk_flow(
    target: &Target<'_>,
    flow: &str,
    mut collected: Map<String, Value>,
    typed: &mut Option<String>,
    asker: &mut dyn Asker,
) -> Result<Option<Value>, CliError> {
    for _ in 0..MAX_FLOW_STEPS {
        let step: FlowStep =
            serde_json::from_value(target.call(flow, Value::Object(collected.clone())).await?)
                .map_err(|error| CliError::Setup(format!("the flow `{flow}` answered: {error}")))?;
        match step {
            FlowStep::Ask {
                argument,
                prompt,
                kind,
            } => {
                let answer = match typed.take() {
                    Some(text) => choice_value(&kind, &text),
                    None => match asker.ask(&prompt, &kind).await? {
                        Some(text) => text,
                        None => return Ok(None),
                    },
                };
                collected.insert(argument, Value::String(answer));
            }
            FlowStep::Confirm { summary, input } => {
                return Ok(asker.confirm(&summary).await?.then_some(input));
            }
            FlowStep::Unavailable { message } => {
                asker.say(&format!("[!] {}", inert_line(&message)));
                return Ok(None);
            }
        }
    }
    asker.say(&format!(
        "[!] the flow `{flow}` took more than {MAX_FLOW_STEPS} steps"
    ));
    Ok(None)
}

/// Collects a command's arguments from what was typed and its steps.
async fn collect(
    command: &CatalogCommand,
    typed: &mut Option<String>,
    asker: &mut dyn Asker,
) -> Result<Option<Value>, CliError> {
    let mut input = Map::new();
    for argument in &command.arguments {
        let asked = command
            .steps
            .iter()
            .find(|step| step.argument == argument.name);
        let text = match (typed.take(), asked) {
            (Some(text), _) => choice_value(&argument.kind, &text),
            (None, Some(step)) => match asker.ask(&step.prompt, &argument.kind).await? {
                Some(text) => text,
                None => return Ok(None),
            },
            (None, None) => continue,
        };
        if text.trim().is_empty() && !argument.required {
            continue;
        }
        match argument_value(&argument.kind, &text) {
            Ok(value) => {
                input.insert(argument.name.clone(), value);
            }
            Err(problem) => {
                asker.say(&format!("[!] {}: {problem}", argument.name));
                return Ok(None);
            }
        }
    }
    Ok(Some(Value::Object(input)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shiitake_protocol::catalog::CatalogChoice;

    fn choice(multiple: bool) -> ArgumentKind {
        ArgumentKind::Choice {
            choices: ["SQLite", "Red, green", "PostgreSQL"]
                .iter()
                .map(|label| CatalogChoice {
                    label: (*label).into(),
                    value: (*label).into(),
                })
                .collect(),
            multiple,
            free_text: true,
        }
    }

    #[test]
    fn slash_lines_name_a_command_and_its_words() {
        assert_eq!(
            parse("/goal  ship the release "),
            Some(Slash {
                name: "goal".into(),
                rest: "ship the release".into()
            })
        );
        assert_eq!(parse("/answer").unwrap().rest, "");
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("/"), None);
    }

    #[test]
    fn numbers_pick_choices_and_words_stay_words() {
        assert_eq!(choice_value(&choice(false), "3"), "PostgreSQL");
        assert_eq!(
            choice_value(&choice(true), "1, 2"),
            "SQLite, \"Red, green\""
        );
        assert_eq!(
            choice_value(&choice(false), "1,2"),
            "1,2",
            "one choice only"
        );
        assert_eq!(
            choice_value(&choice(false), "9"),
            "9",
            "out of range is text"
        );
        assert_eq!(choice_value(&choice(false), " my own "), "my own");
    }

    #[test]
    fn arguments_take_their_kind() {
        assert_eq!(
            argument_value(&ArgumentKind::Integer, " 7 ").unwrap(),
            json!(7)
        );
        assert!(argument_value(&ArgumentKind::Integer, "seven").is_err());
        assert_eq!(
            argument_value(&ArgumentKind::Boolean, "Yes").unwrap(),
            json!(true)
        );
        let text = ArgumentKind::Text { max_bytes: 4 };
        assert_eq!(argument_value(&text, "four").unwrap(), json!("four"));
        assert!(
            argument_value(&text, "fives").is_err(),
            "one byte past the bound"
        );
    }
}
