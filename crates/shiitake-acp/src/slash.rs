//! The Agent's human commands (its extensions' catalogs) as an editor's slash
//! commands: advertised with `available_commands_update`, and a prompt `/name text`
//! runs the Session-scope command `name` when it takes no argument or one (the text),
//! answering its output as the agent's message. A command that needs a conversation
//! (a server-owned flow, or several arguments) is not run: the answer says where it
//! runs (`shiitake chat`, the web page).

use agent_client_protocol::{AvailableCommand, AvailableCommandInput, UnstructuredCommandInput};
use serde_json::{Map, Value};
use shiitake_protocol::catalog::{CatalogCommand, CatalogScope, SessionCatalogs};
use shiitake_protocol::{ExtensionId, ExtensionRunState};

/// The Session-scope commands of running extensions, as an editor lists them.
pub(crate) fn available(catalogs: &SessionCatalogs) -> Vec<AvailableCommand> {
    session_commands(catalogs)
        .map(|(_, command)| {
            let available = AvailableCommand::new(command.name.clone(), command.summary.clone());
            match command.arguments.first() {
                Some(argument) if command.flow.is_none() => {
                    available.input(AvailableCommandInput::Unstructured(
                        UnstructuredCommandInput::new(argument.description.clone()),
                    ))
                }
                _ => available,
            }
        })
        .collect()
}

fn session_commands(
    catalogs: &SessionCatalogs,
) -> impl Iterator<Item = (&ExtensionId, &CatalogCommand)> {
    catalogs
        .catalogs
        .iter()
        .filter(|entry| matches!(entry.state, ExtensionRunState::Running))
        .flat_map(|entry| {
            entry
                .catalog
                .commands
                .iter()
                .filter(|command| command.scope == CatalogScope::Session)
                .map(move |command| (&entry.catalog.extension_id, command))
        })
}

/// What a prompt's `/name text` asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Slash {
    /// Call the extension's command with this input.
    Call {
        /// Whose command.
        extension: ExtensionId,
        /// The command.
        call: String,
        /// Its input.
        input: Value,
    },
    /// Not run here; the text says why.
    Refused(String),
}

/// The command a prompt names, when it starts with `/` and names one.
pub(crate) fn parse(catalogs: &SessionCatalogs, prompt: &str) -> Option<Slash> {
    let rest = prompt.trim().strip_prefix('/')?;
    let (name, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let (extension, command) = session_commands(catalogs).find(|(_, c)| c.name == name)?;
    let text = text.trim();
    if command.flow.is_some() || command.arguments.len() > 1 {
        return Some(Slash::Refused(format!(
            "/{name} asks its questions one by one; run it in `shiitake chat` or the web page"
        )));
    }
    let mut input = Map::new();
    match command.arguments.first() {
        Some(argument) if !text.is_empty() => {
            input.insert(argument.name.clone(), Value::from(text));
        }
        Some(argument) if argument.required => {
            return Some(Slash::Refused(format!(
                "/{name} needs {}: /{name} <{}>",
                argument.description, argument.name
            )));
        }
        _ => {}
    }
    Some(Slash::Call {
        extension: extension.clone(),
        call: command.call.clone(),
        input: Value::Object(input),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalogs() -> SessionCatalogs {
        serde_json::from_value(json!({"catalogs": [
            {"state": {"status": "running"}, "catalog": {"format": "whistle.catalog/v1",
             "extensionId": "home", "commands": [
                {"name": "jobs", "summary": "List jobs", "scope": "session",
                 "call": "list_jobs", "arguments": [], "steps": []},
                {"name": "home", "summary": "Choose Home", "scope": "session",
                 "call": "choose", "arguments": [{"name": "name",
                  "description": "The Computer's name", "kind": {"type": "text", "maxBytes": 64},
                  "required": true}], "steps": []},
                {"name": "goal", "summary": "Set a goal", "scope": "session",
                 "call": "goal", "arguments": [], "steps": [], "flow": "goal_flow"},
                {"name": "schedules", "summary": "Agent-wide", "scope": "agent",
                 "call": "list", "arguments": [], "steps": []}
            ]}}
        ]}))
        .unwrap()
    }

    #[test]
    fn session_commands_are_advertised_with_their_input_hint() {
        let offered: Vec<Value> = available(&catalogs())
            .iter()
            .map(|command| serde_json::to_value(command).unwrap())
            .collect();
        let names: Vec<&str> = offered.iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(names, ["jobs", "home", "goal"]);
        assert_eq!(offered[1]["input"]["hint"], "The Computer's name");
        assert!(offered[2]["input"].is_null(), "{}", offered[2]);
    }

    #[test]
    fn a_prompt_runs_a_command_with_no_argument_or_one() {
        let home = ExtensionId::new("home").unwrap();
        assert_eq!(
            parse(&catalogs(), "/jobs"),
            Some(Slash::Call {
                extension: home.clone(),
                call: "list_jobs".into(),
                input: json!({})
            })
        );
        assert_eq!(
            parse(&catalogs(), "/home  work "),
            Some(Slash::Call {
                extension: home,
                call: "choose".into(),
                input: json!({"name": "work"})
            })
        );
        assert!(matches!(
            parse(&catalogs(), "/home"),
            Some(Slash::Refused(_))
        ));
        assert!(matches!(
            parse(&catalogs(), "/goal ship"),
            Some(Slash::Refused(_))
        ));
        assert_eq!(parse(&catalogs(), "/schedules"), None, "an Agent's command");
        assert_eq!(parse(&catalogs(), "/nothing"), None);
        assert_eq!(parse(&catalogs(), "fix /jobs"), None);
    }
}
