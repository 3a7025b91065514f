//! The `requestState` of an input-required result: which run, waiting on what. The
//! client echoes it back with its answer. It is not sealed, because it grants
//! nothing: the run is looked up in the caller's own Agent again, and the answer goes
//! in only if that very Ask or approval still waits there; a forged state reaches
//! only what the caller could name with the `answer` tool.

use serde::{Deserialize, Serialize};
use shiitake_protocol::{CommandId, SessionId};

/// A run waiting on one Ask or approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Waiting {
    pub session_id: SessionId,
    pub command_id: CommandId,
    /// The Ask's or the approval's id.
    pub needed: String,
    /// The deadline of the call that started the wait, as seconds it had left.
    pub timeout_seconds: u64,
}

/// Longest state accepted back, in bytes.
const MAX_STATE_BYTES: usize = 2048;

impl Waiting {
    /// The opaque text the client echoes.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a state the client echoed.
    pub fn decode(state: &str) -> Result<Self, String> {
        if state.len() > MAX_STATE_BYTES {
            return Err("requestState is longer than any this server writes".to_owned());
        }
        serde_json::from_str(state)
            .map_err(|_| "requestState is not one this server wrote".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_reads_back_as_written_and_anything_else_is_refused() {
        let waiting = Waiting {
            session_id: SessionId::new("ses_1").unwrap(),
            command_id: CommandId::new("cmd_1").unwrap(),
            needed: "ask_1".into(),
            timeout_seconds: 240,
        };
        assert_eq!(Waiting::decode(&waiting.encode()).unwrap(), waiting);
        assert!(Waiting::decode("not json").is_err());
        assert!(Waiting::decode("{\"x\":1}").is_err());
        assert!(Waiting::decode(&"A".repeat(MAX_STATE_BYTES + 1)).is_err());
    }
}
