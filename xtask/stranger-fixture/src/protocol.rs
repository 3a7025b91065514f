//! Checks of `shiitake-protocol`: wire JSON in the exact shapes of the specification.

use shiitake_protocol::{Message, SessionCommand, SessionSnapshot};

use crate::round_trip;

/// A prompt command, as a client sends it.
pub fn session_command() -> Result<(), String> {
    round_trip::<SessionCommand>(
        r#"{"type":"prompt","requestId":"r-1","text":"hello","delivery":"followUp"}"#,
    )
}

/// The snapshot of an idle Session with no history.
pub fn session_snapshot() -> Result<(), String> {
    round_trip::<SessionSnapshot>(concat!(
        r#"{"sessionId":"s-1","cursor":null,"hasMore":false,"messages":[],"terminals":[],"#,
        r#""pending":{"prompts":[],"hasMore":false},"#,
        r#""activity":{"queue":{"state":"idle"},"cancellationRequested":false,"retry":null,"#,
        r#""activeTool":null,"lastModelChoiceSequence":null},"#,
        r#""progress":null,"extensions":{}}"#,
    ))
}

/// A user message of the Pi transcript.
pub fn message() -> Result<(), String> {
    round_trip::<Message>(r#"{"role":"user","content":"hello","timestamp":1700000000000}"#)
}
