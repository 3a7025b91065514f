//! The script format of the scripted model: turns of steps, read from JSON.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shiitake_protocol::message::StopReason;

/// A list of turns, one per model call, in call order.
///
/// ```json
/// {"cycle": false, "turns": [
///   {"steps": [{"fail": {"status": 503, "retry_after_ms": 10}}]},
///   {"steps": [{"thinking": "look first"}, {"tool_call": {"name": "read", "arguments": {"path": "a"}}}]},
///   {"steps": [{"text": "Done."}]},
///   {"steps": ["echo"]}
/// ]}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The model id stamped on messages (default `scripted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Start over after the last turn instead of failing (for benchmarks).
    #[serde(default)]
    pub cycle: bool,
    /// Characters per text, thinking or argument delta, so progress is visible.
    #[serde(default = "default_chunk_chars")]
    pub chunk_chars: usize,
    /// Pause between deltas, in milliseconds (0: none).
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// The turns.
    pub turns: Vec<Turn>,
}

fn default_chunk_chars() -> usize {
    8
}

/// One model call's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// What happens, in order.
    pub steps: Vec<Step>,
    /// Overrides the stop reason (default: `toolUse` with tool calls, else `stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
}

/// One step of a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// A text block, streamed in chunks.
    Text(String),
    /// A thinking block, streamed in chunks.
    Thinking(String),
    /// A tool call; its arguments stream as JSON text in chunks.
    ToolCall(ScriptToolCall),
    /// A pause, cancellable like a provider's wait for bytes.
    DelayMs(u64),
    /// Fail before the first byte with this HTTP status (only delays may precede it).
    Fail(ScriptFailure),
    /// Cut the stream here: it ends with an `error` event keeping what came before.
    Cut(String),
    /// A text block repeating the last user message of the context.
    Echo,
}

/// A scripted tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// The call id (default `call_<call number>_<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool name.
    pub name: String,
    /// The arguments object.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// A failure before the first byte, classified like the HTTP status would be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptFailure {
    /// The HTTP status: 429 and 5xx are retryable, 4xx are not.
    pub status: u16,
    /// The error message (default: a sentence naming the status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `Retry-After` the error carries, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// A script that cannot be read or makes no sense.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The JSON does not match the script format.
    #[error("script is not valid: {0}")]
    Parse(#[from] serde_json::Error),
    /// A step is misplaced (numbers count from 1).
    #[error("script turn {turn}, step {step}: {reason}")]
    Invalid {
        /// Turn number.
        turn: usize,
        /// Step number.
        step: usize,
        /// What is wrong.
        reason: String,
    },
}

impl Script {
    /// A script with these turns and default chunking.
    pub fn new(turns: Vec<Turn>) -> Self {
        Self {
            model: None,
            cycle: false,
            chunk_chars: default_chunk_chars(),
            chunk_delay_ms: 0,
            turns,
        }
    }

    /// Repeats the turns forever instead of failing when they run out.
    #[must_use]
    pub fn cycle(mut self, cycle: bool) -> Self {
        self.cycle = cycle;
        self
    }

    /// Parses and validates a script from JSON text.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let script: Script = serde_json::from_str(text)?;
        script.validate()?;
        Ok(script)
    }

    /// Reads, parses and validates a script file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// Checks step placement: `fail` only before content and last, `cut` last.
    pub fn validate(&self) -> Result<(), ScriptError> {
        for (t, turn) in self.turns.iter().enumerate() {
            let last = turn.steps.len().saturating_sub(1);
            let mut content = false;
            for (s, step) in turn.steps.iter().enumerate() {
                let invalid = |reason: &str| ScriptError::Invalid {
                    turn: t + 1,
                    step: s + 1,
                    reason: reason.into(),
                };
                match step {
                    Step::Fail(failure) => {
                        if content || s != last {
                            return Err(invalid(
                                "`fail` must be the only step (delays may precede it)",
                            ));
                        }
                        if !(400..=599).contains(&failure.status) {
                            return Err(invalid("`fail` needs an HTTP error status (400-599)"));
                        }
                    }
                    Step::Cut(_) if s != last => {
                        return Err(invalid("`cut` must be the last step"));
                    }
                    Step::DelayMs(_) | Step::Cut(_) => {}
                    Step::Text(_) | Step::Thinking(_) | Step::ToolCall(_) | Step::Echo => {
                        content = true;
                    }
                }
            }
        }
        if self.chunk_chars == 0 {
            return Err(ScriptError::Invalid {
                turn: 0,
                step: 0,
                reason: "chunk_chars must be at least 1".into(),
            });
        }
        Ok(())
    }
}

impl Turn {
    /// A turn made of these steps.
    pub fn new(steps: Vec<Step>) -> Self {
        Self {
            steps,
            stop_reason: None,
        }
    }

    /// A turn that answers with text.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![Step::Text(text.into())])
    }

    /// A turn that calls one tool.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::new(vec![Step::tool_call(name, arguments)])
    }

    /// A turn that fails before the first byte with `status`.
    pub fn fail(status: u16) -> Self {
        Self::new(vec![Step::Fail(ScriptFailure {
            status,
            message: None,
            retry_after_ms: None,
        })])
    }

    /// A turn that repeats the last user message.
    pub fn echo() -> Self {
        Self::new(vec![Step::Echo])
    }
}

impl Step {
    /// A tool call step; non-object arguments become `{}`.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        let arguments = match arguments {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Step::ToolCall(ScriptToolCall {
            id: None,
            name: name.into(),
            arguments,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let script = Script::from_json(
            r#"{"cycle": false, "turns": [
              {"steps": [{"fail": {"status": 503, "retry_after_ms": 10}}]},
              {"steps": [{"thinking": "look first"}, {"tool_call": {"name": "read", "arguments": {"path": "a"}}}]},
              {"steps": [{"text": "Done."}, {"delay_ms": 5}, {"cut": "connection reset"}]},
              {"steps": ["echo"], "stop_reason": "length"}
            ]}"#,
        )
        .unwrap();
        assert_eq!(script.turns.len(), 4);
        assert_eq!(
            script.turns[3],
            Turn {
                steps: vec![Step::Echo],
                stop_reason: Some(StopReason::Length)
            }
        );
        let again = Script::from_json(&serde_json::to_string(&script).unwrap()).unwrap();
        assert_eq!(again, script);
    }

    #[test]
    fn misplaced_steps_are_refused() {
        let late_fail = r#"{"turns": [{"steps": [{"text": "a"}, {"fail": {"status": 503}}]}]}"#;
        assert!(matches!(
            Script::from_json(late_fail),
            Err(ScriptError::Invalid {
                turn: 1,
                step: 2,
                ..
            })
        ));
        let early_cut = r#"{"turns": [{"steps": [{"cut": "x"}, {"text": "a"}]}]}"#;
        assert!(matches!(
            Script::from_json(early_cut),
            Err(ScriptError::Invalid {
                turn: 1,
                step: 1,
                ..
            })
        ));
        let typo = r#"{"turns": [{"steps": [{"txt": "a"}]}]}"#;
        assert!(matches!(
            Script::from_json(typo),
            Err(ScriptError::Parse(_))
        ));
    }

    #[test]
    fn fail_status_must_be_400_to_599() {
        let fail = |status: u16| Script::new(vec![Turn::fail(status)]).validate();
        for status in [399, 600] {
            assert!(
                matches!(
                    fail(status),
                    Err(ScriptError::Invalid { turn: 1, step: 1, ref reason })
                        if reason == "`fail` needs an HTTP error status (400-599)"
                ),
                "{status}"
            );
        }
        for status in [400, 599] {
            assert!(fail(status).is_ok(), "{status}");
        }
    }

    #[test]
    fn chunk_chars_must_be_at_least_1() {
        let chunked = |chunk_chars: usize| {
            Script {
                chunk_chars,
                ..Script::new(vec![Turn::text("a")])
            }
            .validate()
        };
        assert!(matches!(
            chunked(0),
            Err(ScriptError::Invalid { turn: 0, step: 0, ref reason })
                if reason == "chunk_chars must be at least 1"
        ));
        assert!(chunked(1).is_ok());
    }
}
