//! `cargo xtask local-model eval`: measures the candidate weights on a fixed prompt set.
//!
//! The prompt set is `xtask/local-model-eval.json`: the system prompt and the
//! tools exactly as `shiitake serve` sends them (captured from a real request),
//! a file the tools would read, plain questions and "read the file" requests.
//! For each weights it starts the server on its own port, asks every prompt
//! `runs` times the way the product asks (`stream: false` with the tools and
//! `tool_choice: "auto"`, sampling left at the server's defaults), stops the
//! server, and prints one Markdown table row:
//!
//! - **text**: plain questions answered with non-empty text;
//! - **call**: read requests answered with a well-formed `files__read` call
//!   (arguments a JSON object whose `path` names the file);
//! - **after result**: answers that, given the call and its result, mention
//!   the file's key fact;
//! - **s/answer**: mean wall-clock seconds per answer on this machine.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shiitake_local_model::{Cache, Weights, start, stop};

use crate::util::workspace_root;

/// The port the eval servers use, away from the default 8090 a test run may hold.
pub const DEFAULT_PORT: u16 = 8095;
/// Longest wait for one answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// The prompt set.
struct Prompts {
    system_prompt: String,
    tools: Vec<Value>,
    file_path: String,
    file_content: String,
    must_mention: String,
    plain: Vec<String>,
    read: Vec<String>,
}

fn load() -> Result<Prompts, String> {
    let path: PathBuf = workspace_root().join("xtask/local-model-eval.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let text_of = |key: &str| -> Result<String, String> {
        value[key]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{}: `{key}` must be a string", path.display()))
    };
    let list_of = |key: &str| -> Result<Vec<String>, String> {
        value[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .ok_or_else(|| format!("{}: `{key}` must be a list of strings", path.display()))
    };
    Ok(Prompts {
        system_prompt: text_of("system_prompt")?,
        tools: value["tools"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("{}: `tools` must be a list", path.display()))?,
        file_path: value["file"]["path"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        file_content: value["file"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        must_mention: text_of("must_mention")?,
        plain: list_of("plain")?,
        read: list_of("read")?,
    })
}

/// Counts of successes out of tries, and time spent.
#[derive(Default)]
struct Tally {
    text: (u32, u32),
    call: (u32, u32),
    after: (u32, u32),
    answers: u32,
    seconds: f64,
    failures: Vec<String>,
}

impl Tally {
    fn row(&self, weights: Weights) -> String {
        let rate = |(ok, of): (u32, u32)| format!("{ok}/{of}");
        let mean = if self.answers == 0 {
            0.0
        } else {
            self.seconds / f64::from(self.answers)
        };
        format!(
            "| {weights} | {} | {} | {} | {mean:.1} |",
            rate(self.text),
            rate(self.call),
            rate(self.after)
        )
    }
}

/// Runs the eval for each of `candidates` and prints the table.
pub fn run(cache: &Cache, candidates: &[Weights], port: u16, runs: u32) -> Result<(), String> {
    let prompts = load()?;
    let mut rows = Vec::new();
    for &weights in candidates {
        // A server left on the port from an earlier eval may hold other weights.
        if shiitake_local_model::healthy(port) {
            return Err(format!(
                "port {port} is in use; stop what answers there or pass --port"
            ));
        }
        let url = start(cache, weights, port).map_err(|e| e.to_string())?;
        let measured = measure(&prompts, weights, port, runs);
        stop(cache).map_err(|e| e.to_string())?;
        let tally = measured?;
        for failure in &tally.failures {
            eprintln!("eval: {}: {failure}", weights.alias());
        }
        eprintln!("eval: {} at {url}: {}", weights.alias(), tally.row(weights));
        rows.push(tally.row(weights));
    }
    println!("| weights | text | call | after result | s/answer |");
    println!("| --- | --- | --- | --- | --- |");
    for row in rows {
        println!("{row}");
    }
    Ok(())
}

fn measure(prompts: &Prompts, weights: Weights, port: u16, runs: u32) -> Result<Tally, String> {
    let mut tally = Tally::default();
    let system = json!({"role": "system", "content": prompts.system_prompt});
    for _ in 0..runs {
        for question in &prompts.plain {
            let messages = vec![system.clone(), json!({"role": "user", "content": question})];
            let answer = ask(prompts, weights, port, messages, &mut tally)?;
            tally.text.1 += 1;
            if !text_of(&answer).trim().is_empty() {
                tally.text.0 += 1;
            } else {
                tally
                    .failures
                    .push(format!("no text for {question:?}: {answer}"));
            }
        }
        for request in &prompts.read {
            let messages = vec![system.clone(), json!({"role": "user", "content": request})];
            let answer = ask(prompts, weights, port, messages, &mut tally)?;
            tally.call.1 += 1;
            if well_formed_read(&answer, &prompts.file_path) {
                tally.call.0 += 1;
            } else {
                tally
                    .failures
                    .push(format!("no read call for {request:?}: {answer}"));
            }
            let messages = vec![
                system.clone(),
                json!({"role": "user", "content": request}),
                json!({"role": "assistant", "content": "", "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "files__read",
                                 "arguments": json!({"path": prompts.file_path}).to_string()}}]}),
                json!({"role": "tool", "tool_call_id": "call_1", "content": prompts.file_content}),
            ];
            let answer = ask(prompts, weights, port, messages, &mut tally)?;
            tally.after.1 += 1;
            let text = text_of(&answer).to_lowercase();
            if text.contains(&prompts.must_mention.to_lowercase()) {
                tally.after.0 += 1;
            } else {
                tally
                    .failures
                    .push(format!("after the result of {request:?}: {answer}"));
            }
        }
    }
    Ok(tally)
}

/// The text of `choices[0].message.content`.
fn text_of(answer: &Value) -> &str {
    answer["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
}

/// Whether the first tool call is `files__read` with a JSON object naming `path`.
fn well_formed_read(answer: &Value, path: &str) -> bool {
    let call = &answer["choices"][0]["message"]["tool_calls"][0]["function"];
    if call["name"] != "files__read" {
        return false;
    }
    let arguments = match &call["arguments"] {
        Value::String(text) => serde_json::from_str::<Value>(text).unwrap_or(Value::Null),
        other => other.clone(),
    };
    arguments["path"]
        .as_str()
        .is_some_and(|named| named.trim_start_matches("./") == path)
}

/// One non-streamed request, as the product sends it with tools; the answer's JSON.
fn ask(
    prompts: &Prompts,
    weights: Weights,
    port: u16,
    messages: Vec<Value>,
    tally: &mut Tally,
) -> Result<Value, String> {
    let body = json!({
        "model": weights.alias(),
        "messages": messages,
        "stream": false,
        "tools": prompts.tools,
        "tool_choice": "auto",
    });
    let began = Instant::now();
    let answer = post(port, "/v1/chat/completions", &body)?;
    tally.seconds += began.elapsed().as_secs_f64();
    tally.answers += 1;
    Ok(answer)
}

/// A JSON POST over HTTP/1.0 (the server closes the connection after the body).
fn post(port: u16, path: &str, body: &Value) -> Result<Value, String> {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| format!("read: {e}"))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP head in {response:.200}"))?;
    if head.get(9..12) != Some("200") {
        return Err(format!("{head:.100}: {body:.300}"));
    }
    serde_json::from_str(body).map_err(|e| format!("answer is not JSON ({e}): {body:.300}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(function: Value) -> Value {
        json!({"choices": [{"message": {"content": null, "tool_calls": [{"function": function}]}}]})
    }

    #[test]
    fn a_read_call_is_well_formed_only_with_the_name_and_path() {
        let good = answer(json!({"name": "files__read", "arguments": "{\"path\": \"notes.txt\"}"}));
        assert!(well_formed_read(&good, "notes.txt"));
        let dotted = answer(json!({"name": "files__read", "arguments": {"path": "./notes.txt"}}));
        assert!(well_formed_read(&dotted, "notes.txt"));
        for bad in [
            answer(json!({"name": "files__list", "arguments": "{\"path\": \"notes.txt\"}"})),
            answer(json!({"name": "files__read", "arguments": "{\"path\": \"other.txt\"}"})),
            answer(json!({"name": "files__read", "arguments": "{\"path\": "})),
            answer(json!({"name": "files__read", "arguments": "[\"notes.txt\"]"})),
            json!({"choices": [{"message": {"content": "notes.txt says hi"}}]}),
        ] {
            assert!(!well_formed_read(&bad, "notes.txt"), "{bad}");
        }
    }

    #[test]
    fn the_committed_prompt_set_loads() {
        let prompts = load().unwrap_or_else(|e| panic!("{e}"));
        assert!(!prompts.plain.is_empty() && !prompts.read.is_empty());
        assert!(prompts.file_content.contains(&prompts.must_mention));
        let names: Vec<&str> = prompts
            .tools
            .iter()
            .filter_map(|tool| tool["function"]["name"].as_str())
            .collect();
        assert!(names.contains(&"files__read"), "{names:?}");
    }
}
