//! Requests as they travel between processes: what a stand-in writes for the
//! owner in another process, and the answer that owner writes back.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_protocol::{
    Accepted, CancelResult, CommandOutcome, Cursor, ExtensionId, ForkedSession, ModelPreference,
    PromptDelivery, PromptText, ReadOptions, RequestId, SessionCommand, SessionFrame,
    ShiitakeError, SubscribeOptions,
};

use crate::extension::{Origin, Sender};
use crate::owner::Request;

/// A request as it travels to the owner in another process.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum Forwarded {
    /// A Session command.
    Command {
        command: SessionCommand,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender: Option<Sender>,
    },
    /// A bounded snapshot.
    Read { options: ReadOptions },
    /// The frames after a cursor, and the cursor of the Session's head.
    Replay { options: SubscribeOptions },
    /// The model preference.
    Preference,
    /// Persist a model preference.
    SetPreference { preference: ModelPreference },
    /// A Session-scope extension command.
    ExtensionCall {
        extension_id: ExtensionId,
        command: String,
        input: Value,
    },
    /// A prompt an extension admitted from outside the Session.
    Admit {
        request_id: RequestId,
        text: PromptText,
        delivery: PromptDelivery,
        origin: Origin,
    },
}

impl Forwarded {
    /// The forwardable form of a request; `None` for requests only an owner in this
    /// process can serve (host transactions carry a closure, timers fire where the
    /// owner is, runner messages belong to a local run).
    pub(crate) fn of(request: &Request) -> Option<Self> {
        Some(match request {
            Request::Command(command, sender, _) => Forwarded::Command {
                command: command.clone(),
                sender: sender.clone(),
            },
            Request::Read(options, _) | Request::Watch(options, _) => Forwarded::Read {
                options: options.clone(),
            },
            Request::Subscribe(options, _) | Request::Replay(options, _) => Forwarded::Replay {
                options: options.clone(),
            },
            Request::Preference(_) => Forwarded::Preference,
            Request::SetPreference(preference, _) => Forwarded::SetPreference {
                preference: preference.clone(),
            },
            Request::ExtensionCall(extension_id, command, input, _) => Forwarded::ExtensionCall {
                extension_id: extension_id.clone(),
                command: command.clone(),
                input: input.clone(),
            },
            Request::Admit {
                request_id,
                text,
                delivery,
                origin,
                ..
            } => Forwarded::Admit {
                request_id: request_id.clone(),
                text: text.clone(),
                delivery: *delivery,
                origin: origin.clone(),
            },
            Request::ExtensionTx { .. }
            | Request::FireTimer(..)
            | Request::Republish(_)
            | Request::Stop(_)
            | Request::Run(..)
            | Request::Drain
            | Request::LeaseLost(_) => return None,
        })
    }
}

/// [`CommandOutcome`] as a forwarded answer carries it.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "camelCase")]
pub(crate) enum Outcome {
    Accepted(Accepted),
    Cancel(CancelResult),
    Forked(ForkedSession),
    Done,
}

impl From<CommandOutcome> for Outcome {
    fn from(outcome: CommandOutcome) -> Self {
        match outcome {
            CommandOutcome::Accepted(accepted) => Outcome::Accepted(accepted),
            CommandOutcome::Cancel(result) => Outcome::Cancel(result),
            CommandOutcome::Forked(forked) => Outcome::Forked(forked),
            CommandOutcome::Done => Outcome::Done,
        }
    }
}

impl From<Outcome> for CommandOutcome {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Accepted(accepted) => CommandOutcome::Accepted(accepted),
            Outcome::Cancel(result) => CommandOutcome::Cancel(result),
            Outcome::Forked(forked) => CommandOutcome::Forked(forked),
            Outcome::Done => CommandOutcome::Done,
        }
    }
}

/// Frames after a cursor and the cursor of the head they reach.
#[derive(Serialize, Deserialize)]
pub(crate) struct Replayed {
    pub(crate) frames: Vec<SessionFrame>,
    pub(crate) head: Option<Cursor>,
}

/// An answer as stored: `{"ok": value}` or `{"error": ShiitakeError}`.
pub(crate) fn encode<T: Serialize>(result: Result<T, ShiitakeError>) -> Value {
    match result.and_then(|value| {
        serde_json::to_value(value).map_err(|error| ShiitakeError::internal(error.to_string()))
    }) {
        Ok(value) => json!({ "ok": value }),
        Err(error) => json!({ "error": error }),
    }
}

pub(crate) fn decode<T: DeserializeOwned>(answer: Value) -> Result<T, ShiitakeError> {
    let bad = |error: serde_json::Error| {
        ShiitakeError::internal(format!("a forwarded answer does not decode: {error}"))
    };
    match answer {
        Value::Object(mut fields) => match (fields.remove("ok"), fields.remove("error")) {
            (Some(value), _) => serde_json::from_value(value).map_err(bad),
            (None, Some(error)) => Err(serde_json::from_value(error).map_err(bad)?),
            (None, None) => Err(ShiitakeError::internal("a forwarded answer is empty")),
        },
        _ => Err(ShiitakeError::internal(
            "a forwarded answer is not an object",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip_through_their_stored_form() {
        let ok: Result<Option<u32>, ShiitakeError> = decode(encode(Ok(Some(7u32))));
        assert_eq!(ok.unwrap(), Some(7));
        let error = ShiitakeError::conflict("request id used for another prompt");
        let failed: Result<u32, ShiitakeError> = decode(encode::<u32>(Err(error.clone())));
        assert_eq!(failed.unwrap_err(), error);
        let garbage: Result<u32, ShiitakeError> = decode(json!([1, 2]));
        assert_eq!(
            garbage.unwrap_err().code,
            shiitake_protocol::ErrorCode::Internal
        );
    }

    #[test]
    fn a_forwarded_command_keeps_its_payload() {
        let command = SessionCommand::Prompt {
            request_id: RequestId::new("r-1").unwrap(),
            text: PromptText::new("hello").unwrap(),
            delivery: PromptDelivery::Steer,
        };
        let forwarded = Forwarded::Command {
            command: command.clone(),
            sender: None,
        };
        let value = serde_json::to_value(&forwarded).unwrap();
        match serde_json::from_value::<Forwarded>(value).unwrap() {
            Forwarded::Command {
                command: back,
                sender,
            } => {
                assert_eq!(back, command);
                assert_eq!(sender, None);
            }
            other => panic!("decoded as {other:?}"),
        }
    }
}
