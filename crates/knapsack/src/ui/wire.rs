//! What travels between a Session's browser host and the tabs of its App: the
//! events of the stream, the claim and result bodies, and the commands a tab
//! advertises. Every shape is camelCase JSON; `docs/knapsack.md` lists them.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::limits::{MAX_COMMAND_NAME_BYTES, MAX_ERROR_MESSAGE_BYTES, MAX_ID_BYTES};

/// Why a browser id was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a browser id is 1 to {MAX_ID_BYTES} bytes of visible ASCII")]
pub struct BadId;

fn check_id(value: &str) -> Result<(), BadId> {
    let visible = value.bytes().all(|b| b.is_ascii_graphic());
    if visible && (1..=MAX_ID_BYTES).contains(&value.len()) {
        Ok(())
    } else {
        Err(BadId)
    }
}

macro_rules! browser_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates `value`: 1 to 64 bytes of visible ASCII.
            pub fn new(value: impl Into<String>) -> Result<Self, BadId> {
                let value = value.into();
                check_id(&value)?;
                Ok(Self(value))
            }

            /// A fresh id (a ULID), unique across restarts of the host.
            pub(crate) fn generate() -> Self {
                Self(ulid::Ulid::generate().to_string())
            }

            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                Self::new(value).map_err(serde::de::Error::custom)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

browser_id! {
    /// Names one events stream: one tab's connection to its Session's host.
    ConnectionId
}

browser_id! {
    /// Names one request the host sent its tabs; a claim and a result must repeat it.
    BrowserRequestId
}

/// What a run asks the App.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RequestKind {
    /// List the App's live commands (its agent projection).
    Discover,
    /// Run one command with a JSON object as its input.
    Execute {
        /// The command's name, as the App advertised it.
        command: String,
        /// Its input.
        input: Value,
    },
}

/// One request as a tab receives it: `{"requestId", "kind", "command"?, "input"?}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrowserRequest {
    /// The id to claim and answer.
    pub request_id: BrowserRequestId,
    /// What to do.
    #[serde(flatten)]
    pub kind: RequestKind,
}

/// One event of a tab's stream (the SSE event name is [`BrowserEvent::name`]).
#[derive(Clone, Debug, PartialEq)]
pub enum BrowserEvent {
    /// First event: the id this tab's claims and results must carry.
    Hello {
        /// The tab's connection.
        connection_id: ConnectionId,
    },
    /// A request; every connected tab receives it and at most one claim wins.
    Request(BrowserRequest),
    /// The host closed: the stream ends and the tab must not reconnect.
    End,
}

impl BrowserEvent {
    /// The SSE event name: `hello`, `request` or `end`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Hello { .. } => "hello",
            Self::Request(_) => "request",
            Self::End => "end",
        }
    }

    /// The SSE data: `{"connectionId"}`, the request, or `{}`.
    pub fn data(&self) -> Value {
        match self {
            Self::Hello { connection_id } => {
                serde_json::json!({ "connectionId": connection_id.as_str() })
            }
            Self::Request(request) => {
                serde_json::to_value(request).unwrap_or_else(|_| Value::Object(Default::default()))
            }
            Self::End => Value::Object(Default::default()),
        }
    }
}

/// Body of `POST .../claims`: this tab wants to run this request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimBody {
    /// The request.
    pub request_id: BrowserRequestId,
    /// The claiming tab.
    pub connection_id: ConnectionId,
}

/// Answer of an accepted claim: `{"claimed": true}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimed {
    /// Always true; a refused claim is an error status instead.
    pub claimed: bool,
}

/// Body of `POST .../results`: what running a claimed request came to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultBody {
    /// The request.
    pub request_id: BrowserRequestId,
    /// The tab that claimed it.
    pub connection_id: ConnectionId,
    /// `{"ok": <value>}` or `{"error": {"message"}}`.
    pub outcome: BrowserOutcome,
}

/// What a tab's command came to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BrowserOutcome {
    /// The command's JSON result (for `discover`, `{"commands": [...]}`).
    Ok(Value),
    /// The command threw.
    Error {
        /// What it said; cut to 4 KiB.
        message: String,
    },
}

/// One command of the App, as `ui.discover` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiCommand {
    /// What `ui.execute` names: 1 to 128 bytes.
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its input, when the App gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
}

/// The result of `discover`: `{"commands": [...]}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Discovered {
    /// The App's live commands.
    pub commands: Vec<UiCommand>,
}

/// `text` cut on a character boundary to at most [`MAX_ERROR_MESSAGE_BYTES`].
pub(crate) fn bounded_message(text: &str) -> String {
    if text.len() <= MAX_ERROR_MESSAGE_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_ERROR_MESSAGE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Whether `name` is a command name the host will pass on: 1 to 128 bytes.
pub(crate) fn valid_command_name(name: &str) -> bool {
    (1..=MAX_COMMAND_NAME_BYTES).contains(&name.len())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn ids_are_1_to_64_visible_ascii_bytes() {
        for len in [1, 64] {
            assert!(ConnectionId::new("c".repeat(len)).is_ok(), "{len}");
        }
        for bad in [
            String::new(),
            "c".repeat(65),
            "a b".to_owned(),
            "é".to_owned(),
        ] {
            assert_eq!(ConnectionId::new(bad.clone()), Err(BadId), "{bad:?}");
        }
        let decoded: Result<BrowserRequestId, _> = serde_json::from_value(json!("x".repeat(65)));
        assert!(decoded.is_err());
    }

    #[test]
    fn a_request_event_is_flat_camel_case_json() {
        let request = BrowserRequest {
            request_id: BrowserRequestId::new("r1").unwrap(),
            kind: RequestKind::Execute {
                command: "add_note".into(),
                input: json!({ "text": "hi" }),
            },
        };
        let event = BrowserEvent::Request(request.clone());
        assert_eq!(event.name(), "request");
        assert_eq!(
            event.data(),
            json!({ "requestId": "r1", "kind": "execute", "command": "add_note", "input": { "text": "hi" } })
        );
        let back: BrowserRequest = serde_json::from_value(event.data()).unwrap();
        assert_eq!(back, request);
        let discover = BrowserEvent::Request(BrowserRequest {
            request_id: BrowserRequestId::new("r2").unwrap(),
            kind: RequestKind::Discover,
        });
        assert_eq!(
            discover.data(),
            json!({ "requestId": "r2", "kind": "discover" })
        );
        assert_eq!(BrowserEvent::End.data(), json!({}));
    }

    #[test]
    fn outcomes_decode_from_the_two_documented_shapes_only() {
        let ok: ResultBody = serde_json::from_value(
            json!({ "requestId": "r", "connectionId": "c", "outcome": { "ok": { "n": 1 } } }),
        )
        .unwrap();
        assert_eq!(ok.outcome, BrowserOutcome::Ok(json!({ "n": 1 })));
        let error: ResultBody = serde_json::from_value(
            json!({ "requestId": "r", "connectionId": "c", "outcome": { "error": { "message": "no" } } }),
        )
        .unwrap();
        assert_eq!(
            error.outcome,
            BrowserOutcome::Error {
                message: "no".into()
            }
        );
        for bad in [
            json!({ "requestId": "r", "connectionId": "c", "outcome": { "maybe": 1 } }),
            json!({ "requestId": "r", "connectionId": "c" }),
            json!({ "requestId": "r", "connectionId": "c", "outcome": { "ok": 1 }, "extra": 1 }),
        ] {
            assert!(
                serde_json::from_value::<ResultBody>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn messages_are_cut_on_a_character_boundary() {
        let exact = "a".repeat(MAX_ERROR_MESSAGE_BYTES);
        assert_eq!(bounded_message(&exact), exact);
        let long = format!("{}é", "a".repeat(MAX_ERROR_MESSAGE_BYTES - 1));
        assert_eq!(
            bounded_message(&long),
            "a".repeat(MAX_ERROR_MESSAGE_BYTES - 1)
        );
    }
}
