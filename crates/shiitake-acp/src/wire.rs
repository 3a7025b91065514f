//! The bytes on stdio. Each line the editor sends is checked before the protocol's
//! crate reads it, so a client's mistake gets JSON-RPC's own answer instead of being
//! dropped or misnamed: a line that is not JSON is `-32700` (parse error, id `null`),
//! a JSON value that is not one request, notification or response is `-32600`, a line
//! longer than [`MAX_LINE_BYTES`] is `-32600` (the rest of it is skipped), and an
//! unknown method is `-32601` (a notification of one is dropped, as JSON-RPC says).
//! What passes goes to the crate unchanged. One writer puts the crate's lines and these
//! answers on stdout, a whole line at a time, so nothing but protocol reaches it.

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LinesCodec};

/// The longest line taken from the editor, in bytes (a prompt with a large pasted file
/// fits; a runaway stream does not grow memory).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The methods an editor may call here (and `_`-prefixed extension methods).
const METHODS: [&str; 10] = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/prompt",
    "session/cancel",
    "session/list",
    "session/set_mode",
    "session/set_config_option",
    "session/set_model",
];

/// What to do with one line from the editor.
#[derive(Debug, PartialEq)]
pub(crate) enum Checked {
    /// Hand it to the protocol's crate.
    Pass,
    /// Answer it with this line, and drop it.
    Answer(String),
    /// Drop it without an answer (a notification of an unknown method).
    Drop,
}

fn error(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// The rule for one line (without its newline).
pub(crate) fn check(line: &str) -> Checked {
    if line.trim().is_empty() {
        return Checked::Drop;
    }
    let Ok(value) = serde_json::from_str::<Value>(line) else {
        return Checked::Answer(error(&Value::Null, -32700, "Parse error"));
    };
    let Some(message) = value.as_object() else {
        return Checked::Answer(error(
            &Value::Null,
            -32600,
            "Invalid Request: one JSON-RPC object a line (no batches)",
        ));
    };
    let id = message.get("id").cloned();
    match message.get("method") {
        // A response to one of our requests (a permission's answer).
        None if id.is_some() => Checked::Pass,
        None => Checked::Answer(error(&Value::Null, -32600, "Invalid Request")),
        Some(Value::String(method))
            if method.starts_with('_') || METHODS.contains(&method.as_str()) =>
        {
            Checked::Pass
        }
        Some(Value::String(_)) => match id {
            Some(id) => Checked::Answer(error(&id, -32601, "Method not found")),
            None => Checked::Drop,
        },
        Some(_) => Checked::Answer(error(
            &id.unwrap_or(Value::Null),
            -32600,
            "Invalid Request: the method is not a string",
        )),
    }
}

/// One line of the editor's input: the line, or how long a line past the bound was.
enum Line {
    Whole(String),
    TooLong,
}

/// Reads lines of at most [`MAX_LINE_BYTES`] from `input`; of a longer one only that it
/// was too long (the rest of it is read and dropped). `None` at the end of input.
struct Lines<R> {
    input: tokio::io::BufReader<R>,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    async fn next(&mut self) -> std::io::Result<Option<Line>> {
        use tokio::io::AsyncBufReadExt;
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let available = self.input.fill_buf().await?;
            if available.is_empty() {
                return Ok(match (line.is_empty(), too_long) {
                    (true, false) => None,
                    (_, true) => Some(Line::TooLong),
                    (false, false) => {
                        Some(Line::Whole(String::from_utf8_lossy(&line).into_owned()))
                    }
                });
            }
            let (part, ended) = match available.iter().position(|byte| *byte == b'\n') {
                Some(at) => (&available[..at], Some(at + 1)),
                None => (available, None),
            };
            if !too_long && line.len() + part.len() <= MAX_LINE_BYTES {
                line.extend_from_slice(part);
            } else {
                too_long = true;
                line.clear();
            }
            let used = ended.unwrap_or(available.len());
            self.input.consume(used);
            if ended.is_some() {
                return Ok(Some(if too_long {
                    Line::TooLong
                } else {
                    Line::Whole(String::from_utf8_lossy(&line).into_owned())
                }));
            }
        }
    }
}

/// Reads the editor's lines from `input`, hands those that pass to `crate_input` and
/// sends the answers to the others to `answers`; ends at the editor's end of input.
pub(crate) async fn filter(
    input: impl AsyncRead + Unpin,
    mut crate_input: impl AsyncWrite + Unpin,
    answers: mpsc::UnboundedSender<String>,
) {
    let mut lines = Lines {
        input: tokio::io::BufReader::new(input),
    };
    loop {
        let checked = match lines.next().await {
            Ok(None) => return,
            Ok(Some(Line::Whole(line))) => match check(line.trim_end_matches('\r')) {
                Checked::Pass => {
                    let mut bytes = line.into_bytes();
                    bytes.push(b'\n');
                    if crate_input.write_all(&bytes).await.is_err() {
                        return;
                    }
                    continue;
                }
                other => other,
            },
            Ok(Some(Line::TooLong)) => Checked::Answer(error(
                &Value::Null,
                -32600,
                &format!("Invalid Request: a line longer than {MAX_LINE_BYTES} bytes"),
            )),
            Err(error) => {
                tracing::warn!(%error, "the editor's input failed");
                return;
            }
        };
        if let Checked::Answer(answer) = checked
            && answers.send(answer).is_err()
        {
            return;
        }
    }
}

/// Writes whole lines to `output`: the crate's (read from `crate_output`) and the
/// filter's answers, until both end.
pub(crate) async fn writer(
    crate_output: impl AsyncRead + Unpin,
    mut answers: mpsc::UnboundedReceiver<String>,
    output: impl AsyncWrite + Unpin,
) {
    let mut from_crate = FramedRead::new(crate_output, LinesCodec::new());
    let mut out = tokio_util::codec::FramedWrite::new(output, LinesCodec::new());
    let (mut crate_open, mut answers_open) = (true, true);
    while crate_open || answers_open {
        let line = tokio::select! {
            line = from_crate.next(), if crate_open => match line {
                Some(Ok(line)) => line,
                _ => {
                    crate_open = false;
                    continue;
                }
            },
            answer = answers.recv(), if answers_open => match answer {
                Some(answer) => answer,
                None => {
                    answers_open = false;
                    continue;
                }
            },
        };
        if out.send(line).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match check(line) {
            Checked::Answer(answer) => serde_json::from_str(&answer).unwrap(),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn what_is_not_a_known_call_is_answered_with_its_code() {
        assert_eq!(answer("not json")["error"]["code"], -32700);
        assert_eq!(answer("not json")["id"], Value::Null);
        assert_eq!(answer("[1, 2]")["error"]["code"], -32600);
        assert_eq!(answer(r#"{"jsonrpc":"2.0"}"#)["error"]["code"], -32600);
        let unknown = answer(r#"{"jsonrpc":"2.0","id":7,"method":"no/such"}"#);
        assert_eq!(unknown["error"]["code"], -32601);
        assert_eq!(unknown["id"], 7);
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":"a","method":5}"#)["id"],
            "a"
        );
        assert_eq!(
            check(r#"{"jsonrpc":"2.0","method":"no/such"}"#),
            Checked::Drop
        );
        assert_eq!(check(""), Checked::Drop);
    }

    #[test]
    fn calls_responses_and_extension_methods_pass() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"_zed/x","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
        ] {
            assert_eq!(check(line), Checked::Pass, "{line}");
        }
    }

    #[tokio::test]
    async fn a_line_at_the_bound_is_read_and_one_past_it_refused() {
        let call = |pad: usize| {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"p\":\"{}\"}}}}",
                "x".repeat(pad)
            )
        };
        let frame = call(0).len();
        let at_bound = call(MAX_LINE_BYTES - frame);
        assert_eq!(at_bound.len(), MAX_LINE_BYTES);
        let input = format!("{at_bound}\n");
        let (crate_input, mut crate_read) = tokio::io::duplex(1 << 16);
        let (answers, mut answered) = mpsc::unbounded_channel();
        let filtering = tokio::spawn(filter(
            std::io::Cursor::new(input.into_bytes()),
            crate_input,
            answers,
        ));
        let mut passed = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut crate_read, &mut passed)
            .await
            .unwrap();
        filtering.await.unwrap();
        assert_eq!(passed.len(), MAX_LINE_BYTES + 1, "the line and its newline");
        assert!(answered.recv().await.is_none());

        let long = "x".repeat(MAX_LINE_BYTES + 1);
        let input = format!("{long}\n{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}}\n");
        let (crate_input, mut crate_read) = tokio::io::duplex(1 << 16);
        let (answers, mut answered) = mpsc::unbounded_channel();
        let filtering = tokio::spawn(filter(
            std::io::Cursor::new(input.into_bytes()),
            crate_input,
            answers,
        ));
        let mut passed = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut crate_read, &mut passed)
            .await
            .unwrap();
        filtering.await.unwrap();
        assert_eq!(
            passed,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n"
        );
        let refused: Value = serde_json::from_str(&answered.recv().await.unwrap()).unwrap();
        assert_eq!(refused["error"]["code"], -32600);
        assert!(answered.recv().await.is_none());
    }
}
