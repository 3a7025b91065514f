//! The tools a run would see, as an operator reads them at `GET /v1/tools`.
//!
//! Until this list, only a model saw which tools an Agent offers. The list is the one
//! a run assembles (the Agent's catalog, then what its running extensions
//! contribute, offered as the host's tool set for the model's profile says), for a
//! Session with no extension state of its own yet; the sources left out say why.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ExtensionId;

/// Which model a list is for: the host offers a small model fewer tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolProfile {
    /// A model of the full profile (the default).
    #[default]
    Full,
    /// A small model (`?profile=small`, the bundled one).
    Small,
}

/// Where a tool comes from, read from its module path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    /// The file tools (`files.*`), over the attached Computers.
    Files,
    /// A remote MCP server (`env.mcp.<server>.*`).
    Mcp,
    /// A Computer's own operations (`env.computers.<name>.*`).
    Computer,
    /// Another tool an extension contributes (`agents.create`, `question.ask`).
    Extension,
    /// Another tool of the host's catalog.
    Host,
}

/// Whether a call may run again after a crash left its outcome unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaySafety {
    /// Running it twice is harmless; a resumed run repeats it.
    Safe,
    /// It may change the world; a resumed run answers it "outcome unknown" instead.
    Unsafe,
}

/// One operation a run's model is offered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    /// The name the model calls (`files__read`, `env__mcp__notes__create_note`).
    pub name: String,
    /// The operation's dotted path (`files.read`).
    pub path: String,
    /// Where it comes from.
    pub source: ToolSource,
    /// The MCP server's or the Computer's name, for those sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The extension that contributed it, when one did (Home's `files.*` too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<ExtensionId>,
    /// Its description as the full profile reads it.
    pub description: String,
    /// Its input schema as advertised.
    pub schema: Value,
    /// Whether a resumed run may repeat it.
    pub replay: ReplaySafety,
}

/// Why a source's tools are not in the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeftOutReason {
    /// The host's tool set for this profile does not name them (`serve --tools`).
    NotOffered,
    /// The extension is stopped; an operator resumes it (`POST /v1/extensions/{id}/resume`).
    ExtensionStopped,
    /// The extension failed while contributing them (it panicked).
    ContributionFailed,
    /// The source could not be reached or refused (an MCP server's 401, a timeout).
    Unavailable,
}

/// A source, or some of its tools, a run would not see.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeftOutSource {
    /// What kind of source.
    pub source: ToolSource,
    /// Its name: the module (`agents`), the MCP server (`locked`) or the extension.
    pub name: String,
    /// The tools of it left out, by the name the model would call; empty when the
    /// whole source is out and its tools are not known.
    pub tools: Vec<String>,
    /// Why.
    pub reason: LeftOutReason,
    /// The source's own words, when it gave any (the MCP error, the stop reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What `GET /v1/tools` answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolList {
    /// The profile the list is for.
    pub profile: ToolProfile,
    /// The offered operations, in the order the model reads them.
    pub tools: Vec<ToolEntry>,
    /// What a run would not see, and why.
    pub left_out: Vec<LeftOutSource>,
}

impl ToolSource {
    /// The source of the module at the dotted `path`, and the server or Computer it
    /// names; `contributed` says an extension contributed it.
    pub fn of_path(path: &str, contributed: bool) -> (Self, Option<String>) {
        let mut parts = path.split('.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("files"), _, _) => (Self::Files, None),
            (Some("env"), Some("mcp"), Some(server)) => (Self::Mcp, Some(server.to_owned())),
            (Some("env"), Some("computers"), Some(name)) => (Self::Computer, Some(name.to_owned())),
            _ if contributed => (Self::Extension, None),
            _ => (Self::Host, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_source_is_read_from_its_path() {
        assert_eq!(
            ToolSource::of_path("files.read", true),
            (ToolSource::Files, None)
        );
        assert_eq!(
            ToolSource::of_path("env.mcp.notes.create_note", false),
            (ToolSource::Mcp, Some("notes".to_owned()))
        );
        assert_eq!(
            ToolSource::of_path("env.computers.box.run", false),
            (ToolSource::Computer, Some("box".to_owned()))
        );
        assert_eq!(
            ToolSource::of_path("agents.create", true),
            (ToolSource::Extension, None)
        );
        assert_eq!(
            ToolSource::of_path("env.mcp", false),
            (ToolSource::Host, None)
        );
    }

    #[test]
    fn a_tool_list_has_the_documented_shape() {
        let list = ToolList {
            profile: ToolProfile::Small,
            tools: vec![ToolEntry {
                name: "files__read".to_owned(),
                path: "files.read".to_owned(),
                source: ToolSource::Files,
                server: None,
                extension: Some(ExtensionId::new("shiitake-session-home").unwrap()),
                description: "Reads a file.".to_owned(),
                schema: json!({"type": "object"}),
                replay: ReplaySafety::Safe,
            }],
            left_out: vec![LeftOutSource {
                source: ToolSource::Mcp,
                name: "locked".to_owned(),
                tools: vec![],
                reason: LeftOutReason::Unavailable,
                detail: Some("refused its credential (HTTP 401)".to_owned()),
            }],
        };
        let wire = json!({
            "profile": "small",
            "tools": [{
                "name": "files__read", "path": "files.read", "source": "files",
                "extension": "shiitake-session-home", "description": "Reads a file.",
                "schema": {"type": "object"}, "replay": "safe"
            }],
            "leftOut": [{
                "source": "mcp", "name": "locked", "tools": [], "reason": "unavailable",
                "detail": "refused its credential (HTTP 401)"
            }]
        });
        assert_eq!(serde_json::to_value(&list).unwrap(), wire);
        assert_eq!(serde_json::from_value::<ToolList>(wire).unwrap(), list);
    }
}
