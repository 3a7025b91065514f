//! Hosts that serve several Agents: Agent names and the directory listing.
//!
//! A server that serves a directory addresses each Agent by name in an Agent segment
//! of every route (`/v1/agents/{agent}/sessions/...`, `docs/http.md`) and lists the
//! Agents at `GET /v1/agents` as an [`AgentList`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest Agent name, in bytes.
pub const MAX_AGENT_NAME_BYTES: usize = 64;

/// Why a name is not an Agent name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "an Agent name is 1 to {MAX_AGENT_NAME_BYTES} ASCII letters, digits, `-` or `_`, starting with a letter or digit; got {0:?}"
)]
pub struct AgentNameError(pub String);

/// An Agent's name in a directory: what people and models call it, and the Agent
/// segment of its HTTP routes. 1 to 64 ASCII letters, digits, `-` and `_`, starting
/// with a letter or a digit, so it needs no escaping in a path or a file name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentName(String);

impl AgentName {
    /// Checks `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, AgentNameError> {
        let name = name.into();
        let valid = name.len() <= MAX_AGENT_NAME_BYTES
            && name
                .as_bytes()
                .first()
                .is_some_and(u8::is_ascii_alphanumeric)
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if valid {
            Ok(Self(name))
        } else {
            Err(AgentNameError(name))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The name of a directory's default Agent unless its host chooses another.
pub const DEFAULT_AGENT_NAME: &str = "main";

impl Default for AgentName {
    /// [`DEFAULT_AGENT_NAME`], `main`.
    fn default() -> Self {
        Self(DEFAULT_AGENT_NAME.to_owned())
    }
}

impl TryFrom<String> for AgentName {
    type Error = AgentNameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<AgentName> for String {
    fn from(value: AgentName) -> Self {
        value.0
    }
}

impl fmt::Display for AgentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One Agent a server serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEntry {
    /// Its name, the Agent segment of its routes.
    pub name: AgentName,
    /// The routes without an Agent segment (`/v1/sessions`, ...) serve this one.
    pub default: bool,
}

/// What `GET /v1/agents` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentList {
    /// Every Agent, in the host's order.
    pub agents: Vec<AgentEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_at_their_bounds() {
        assert!(AgentName::new("a".repeat(MAX_AGENT_NAME_BYTES)).is_ok());
        assert!(AgentName::new("a".repeat(MAX_AGENT_NAME_BYTES + 1)).is_err());
        assert!(AgentName::new("").is_err());
        assert!(AgentName::new("-lead").is_err());
        assert!(AgentName::new("_lead").is_err());
        assert!(AgentName::new("has/slash").is_err());
        assert!(AgentName::new("dot.ted").is_err());
        assert!(AgentName::new("é").is_err());
        assert!(AgentName::new("Planner_2-b").is_ok());
        assert_eq!(
            AgentName::new(DEFAULT_AGENT_NAME).ok(),
            Some(AgentName::default())
        );
        assert!(serde_json::from_str::<AgentName>("\"no spaces\"").is_err());
        let list = AgentList {
            agents: vec![AgentEntry {
                name: AgentName::new("main").unwrap_or_else(|e| panic!("{e}")),
                default: true,
            }],
        };
        let json = serde_json::to_string(&list).unwrap_or_default();
        assert_eq!(json, r#"{"agents":[{"name":"main","default":true}]}"#);
        assert_eq!(serde_json::from_str::<AgentList>(&json).ok(), Some(list));
    }
}
