//! `cargo xtask local-model eval`: the README's main command with the bundled model,
//! measured.
//!
//! For each weights it starts the model server on its own port (default 8095), runs the
//! release `shiitake serve` against it (the spec `serve` gives the bundled model, so the
//! small profile) over a workspace holding the files of `xtask/local-model-eval.json`,
//! and, `runs` times, opens a fresh Session and sends the cases one after another, as a
//! person would in `chat`. One warm-up Session goes first: the bound is for a warm model.
//! Each case is judged on what was committed (read from the Session's event stream):
//!
//! - `tools` empty: the run completes with text and no tool call;
//! - `tools` named: one of them is called, its result is not an error, and the run
//!   completes with an answer that mentions every one of `mentions`;
//!
//! and timed from the prompt to its run's terminal (`completes`) or to the first sign
//! of the answer (`first_answer`: streamed text, or a committed assistant message). It
//! prints one table per weights, whether each repetition passed all cases, the usage the
//! assistant messages recorded, and the Agents the directory holds afterwards (the
//! model's profile must create none).

mod http;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shiitake_local_model::{Cache, Weights, start, stop};

use crate::util::{cargo, run_checked, workspace_root};
use http::Server;

/// The port the eval servers use, away from the default 8090 a test run may hold.
pub const DEFAULT_PORT: u16 = 8095;
/// Longest wait for one case's run.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// What a case's time runs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timed {
    /// The run's terminal.
    Completes,
    /// The first streamed text or committed assistant message.
    FirstAnswer,
}

/// One prompt and what its run must do.
#[derive(Clone, Debug)]
struct Case {
    name: String,
    prompt: String,
    tools: Vec<String>,
    mentions: Vec<String>,
    timed: Timed,
    bound: Duration,
}

/// The prompt set: the workspace's files and the cases, in the order they are sent.
struct Cases {
    files: Vec<(String, String)>,
    cases: Vec<Case>,
}

fn load() -> Result<Cases, String> {
    let path: PathBuf = workspace_root().join("xtask/local-model-eval.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&value).map_err(|e| format!("{}: {e}", path.display()))
}

fn strings(value: &Value, key: &str) -> Result<Vec<String>, String> {
    value[key]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .ok_or_else(|| format!("`{key}` must be a list of strings"))
}

fn parse(value: &Value) -> Result<Cases, String> {
    let files = value["files"]
        .as_object()
        .ok_or("`files` must map file names to their text")?
        .iter()
        .map(|(name, text)| (name.clone(), text.as_str().unwrap_or_default().to_owned()))
        .collect();
    let mut cases = Vec::new();
    for case in value["cases"].as_array().ok_or("`cases` must be a list")? {
        let text = |key: &str| {
            case[key]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("a case's `{key}` must be a string"))
        };
        let timed = match text("timed")?.as_str() {
            "completes" => Timed::Completes,
            "first_answer" => Timed::FirstAnswer,
            other => {
                return Err(format!(
                    "`timed` is completes or first_answer, not `{other}`"
                ));
            }
        };
        let bound = case["bound_seconds"]
            .as_f64()
            .filter(|seconds| *seconds > 0.0)
            .ok_or("a case's `bound_seconds` must be a positive number")?;
        cases.push(Case {
            name: text("name")?,
            prompt: text("prompt")?,
            tools: strings(case, "tools")?,
            mentions: strings(case, "mentions")?,
            timed,
            bound: Duration::from_secs_f64(bound),
        });
    }
    if cases.is_empty() {
        return Err("no cases".into());
    }
    Ok(Cases { files, cases })
}

/// What one case's run committed, and when.
#[derive(Default)]
struct Record {
    outcome: Option<String>,
    diagnostic: Option<String>,
    /// The message values of the run, in order.
    messages: Vec<Value>,
    first_answer: Option<Duration>,
    /// The first streamed text of the run (after any tool call).
    first_text: Option<Duration>,
    completed: Option<Duration>,
}

/// Whether `record` did what `case` asks; `Err` says what it did instead.
fn judge(case: &Case, record: &Record) -> Result<(), String> {
    if record.outcome.as_deref() != Some("completed") {
        return Err(format!(
            "the run ended {:?} ({:?})",
            record.outcome, record.diagnostic
        ));
    }
    let assistants: Vec<&Value> = record
        .messages
        .iter()
        .filter(|message| message["role"] == "assistant")
        .collect();
    let calls: Vec<&str> = assistants
        .iter()
        .flat_map(|message| message["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "toolCall")
        .filter_map(|block| block["name"].as_str())
        .collect();
    let answer: String = assistants
        .last()
        .and_then(|message| message["content"].as_array())
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect();
    if answer.trim().is_empty() {
        return Err(format!("no text in the last answer; calls {calls:?}"));
    }
    if case.tools.is_empty() {
        return match calls.as_slice() {
            [] => Ok(()),
            called => Err(format!("called {called:?}")),
        };
    }
    let Some(called) = calls
        .iter()
        .find(|name| case.tools.iter().any(|t| t == *name))
    else {
        return Err(format!("called {calls:?}, none of {:?}", case.tools));
    };
    let succeeded = record.messages.iter().any(|message| {
        message["role"] == "toolResult"
            && message["toolName"] == *called
            && message["isError"] == false
    });
    if !succeeded {
        return Err(format!("{called} failed"));
    }
    let lower = answer.to_lowercase();
    let missing: Vec<&String> = case
        .mentions
        .iter()
        .filter(|word| !lower.contains(&word.to_lowercase()))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the answer does not mention {missing:?}: {answer:.200}"
        ))
    }
}

/// A running `shiitake serve`, killed when dropped.
struct Serve {
    child: Child,
    server: Server,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _already_gone_is_fine = self.child.kill();
        let _reaped = self.child.wait();
    }
}

/// Builds the release binary (the README's `cargo run --release`) and returns its path.
fn release_binary() -> Result<PathBuf, String> {
    let root = workspace_root();
    run_checked(Command::new(cargo()).current_dir(&root).args([
        "build",
        "--release",
        "-p",
        "shiitake",
    ]))?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target.join("release/shiitake"))
}

/// Starts `serve` on a free port with `spec` over `workspace`, its data in `data`.
fn serve(binary: &Path, spec: &str, workspace: &Path, data: &Path) -> Result<Serve, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("a free port: {e}"))?;
    let mut child = Command::new(binary)
        .args(["serve", "--port", &port.to_string(), "--model", spec])
        .arg("--data-dir")
        .arg(data)
        .arg("--workspace")
        .arg(workspace)
        .env_remove("SHIITAKE_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let stdout = child.stdout.take().ok_or("serve has no stdout")?;
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let listening = lines.by_ref().map_while(Result::ok).any(|line| {
        eprintln!("eval: {line}");
        line.starts_with("shiitake: listening on")
    });
    // Keep reading its output so a full pipe never blocks it.
    std::thread::spawn(move || lines.for_each(drop));
    let token = std::fs::read_to_string(data.join("token")).map_err(|e| format!("token: {e}"))?;
    let serve = Serve {
        child,
        server: Server {
            port,
            token: Some(token.trim().to_owned()),
        },
    };
    if listening {
        Ok(serve)
    } else {
        Err("serve exited before it listened".into())
    }
}

/// Sends `case` to `session` and records its run from the Session's event stream.
fn send(server: &Server, session: &str, case: &Case, request: &str) -> Result<Record, String> {
    // Subscribed before the prompt, so no frame of its run is missed.
    let (events, _open) = server.events(&format!("/v1/sessions/{session}/events"))?;
    let began = Instant::now();
    let accepted = server.json(
        "POST",
        &format!("/v1/sessions/{session}/commands"),
        Some(
            &json!({"type": "prompt", "requestId": request, "text": case.prompt,
                     "delivery": "followUp"}),
        ),
    )?;
    let command = accepted["commandId"]
        .as_str()
        .ok_or_else(|| format!("no commandId in {accepted}"))?
        .to_owned();
    let mut record = Record::default();
    while record.outcome.is_none() {
        let event = events
            .recv_timeout(RUN_TIMEOUT.saturating_sub(began.elapsed()))
            .map_err(|_| format!("{}: no terminal within {RUN_TIMEOUT:?}", case.name))?;
        let Ok(frame) = serde_json::from_str::<Value>(&event.data) else {
            continue;
        };
        let since = event.at.saturating_duration_since(began);
        match event.name.as_str() {
            "progress" => {
                let ours = frame["activity"]["queue"]["commandId"] == command.as_str();
                if ours
                    && frame["progress"]["text"]
                        .as_str()
                        .is_some_and(|t| !t.is_empty())
                {
                    record.first_answer.get_or_insert(since);
                    record.first_text.get_or_insert(since);
                }
            }
            "update" => {
                for message in frame["messages"].as_array().into_iter().flatten() {
                    if message["commandId"] != command.as_str() {
                        continue;
                    }
                    if message["value"]["role"] == "assistant" {
                        record.first_answer.get_or_insert(since);
                    }
                    record.messages.push(message["value"].clone());
                }
                for terminal in frame["terminals"].as_array().into_iter().flatten() {
                    if terminal["commandId"] == command.as_str() {
                        record.outcome = terminal["outcome"].as_str().map(str::to_owned);
                        record.diagnostic = terminal["diagnostic"].as_str().map(str::to_owned);
                        record.completed = Some(since);
                    }
                }
            }
            "error" | "end" => {
                return Err(format!("{}: the stream ended: {}", case.name, event.data));
            }
            _ => {}
        }
    }
    Ok(record)
}

/// The measurements of one weights.
#[derive(Default)]
struct Tally {
    /// Per case: (passed, within its bound, seconds) of each repetition.
    cases: Vec<Vec<(bool, bool, f64)>>,
    /// Per case: seconds to the first streamed text of each repetition that had one.
    first_text: Vec<Vec<f64>>,
    /// Repetitions in which every case passed (and in which every case also kept its bound).
    all_passed: u32,
    all_within: u32,
    runs: u32,
    /// Assistant messages, and those with usage counted.
    assistants: u32,
    counted: u32,
    /// Prompt tokens, and of them those read from the server's cache, per case.
    prompt_tokens: Vec<(u64, u64)>,
    failures: Vec<String>,
}

impl Tally {
    fn add_usage(&mut self, at: usize, messages: &[Value]) {
        for message in messages.iter().filter(|m| m["role"] == "assistant") {
            self.assistants += 1;
            let usage = &message["usage"];
            if usage["source"] == "unknown" {
                continue;
            }
            self.counted += 1;
            let count = |key: &str| usage[key].as_u64().unwrap_or(0);
            let entry = &mut self.prompt_tokens[at];
            entry.0 += count("input") + count("cacheRead");
            entry.1 += count("cacheRead");
        }
    }
}

fn seconds(value: f64) -> String {
    format!("{value:.2}")
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn report(weights: Weights, cases: &Cases, tally: &Tally, agents: &str) {
    println!("\n{weights}: {} repetitions\n", tally.runs);
    println!(
        "| case | timed to | passed | within bound | median s | max s | bound | first text, median s | prompt tokens from cache |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (at, case) in cases.cases.iter().enumerate() {
        let rows = &tally.cases[at];
        let passed = rows.iter().filter(|(ok, _, _)| *ok).count();
        let within = rows.iter().filter(|(_, within, _)| *within).count();
        let times: Vec<f64> = rows.iter().map(|(_, _, s)| *s).collect();
        let max = times.iter().copied().fold(0.0, f64::max);
        let timed = match case.timed {
            Timed::Completes => "completed",
            Timed::FirstAnswer => "first answer",
        };
        let (prompt, cached) = tally.prompt_tokens[at];
        let share = if prompt == 0 {
            "unknown".to_owned()
        } else {
            format!("{:.0}% of {prompt}", 100.0 * cached as f64 / prompt as f64)
        };
        println!(
            "| {} | {timed} | {passed}/{} | {within}/{} | {} | {} | ≤ {} s | {} | {share} |",
            case.name,
            rows.len(),
            rows.len(),
            seconds(median(times)),
            seconds(max),
            case.bound.as_secs_f64(),
            seconds(median(tally.first_text[at].clone())),
        );
    }
    println!(
        "\nall cases passed in {}/{} repetitions, and kept their bounds in {}/{}; usage \
         counted on {}/{} assistant messages; Agents afterwards: {agents}",
        tally.all_passed, tally.runs, tally.all_within, tally.runs, tally.counted, tally.assistants
    );
}

/// Runs the eval for each of `candidates` with `binary` (else the release build) and
/// prints the tables.
pub fn run(
    cache: &Cache,
    candidates: &[Weights],
    port: u16,
    runs: u32,
    binary: Option<PathBuf>,
) -> Result<(), String> {
    let cases = load()?;
    let binary = match binary {
        Some(binary) => binary,
        None => release_binary()?,
    };
    for &weights in candidates {
        // A server left on the port from an earlier eval may hold other weights.
        if shiitake_local_model::healthy(port) {
            return Err(format!(
                "port {port} is in use; stop what answers there or pass --port"
            ));
        }
        let url = start(cache, weights, port).map_err(|e| e.to_string())?;
        let measured = measure(&binary, &cases, weights, &url, runs);
        stop(cache, port).map_err(|e| e.to_string())?;
        let (tally, agents) = measured?;
        for failure in &tally.failures {
            eprintln!("eval: {}: {failure}", weights.alias());
        }
        report(weights, &cases, &tally, &agents);
    }
    Ok(())
}

fn measure(
    binary: &Path,
    cases: &Cases,
    weights: Weights,
    url: &str,
    runs: u32,
) -> Result<(Tally, String), String> {
    let scratch = std::env::temp_dir().join(format!("shiitake-eval-{}", std::process::id()));
    let workspace = scratch.join("workspace");
    std::fs::create_dir_all(&workspace).map_err(|e| format!("{}: {e}", workspace.display()))?;
    for (name, text) in &cases.files {
        std::fs::write(workspace.join(name), text).map_err(|e| format!("{name}: {e}"))?;
    }
    let spec = shiitake_local_model::spec(url, weights);
    let serve = serve(binary, &spec, &workspace, &scratch.join("data"))?;
    let server = &serve.server;
    let mut tally = Tally {
        cases: vec![Vec::new(); cases.cases.len()],
        first_text: vec![Vec::new(); cases.cases.len()],
        prompt_tokens: vec![(0, 0); cases.cases.len()],
        ..Tally::default()
    };
    // Run 0 warms the model up (its prompt cache and the page cache); it is not counted.
    for run in 0..=runs {
        let session = server.json(
            "POST",
            "/v1/sessions",
            Some(&json!({"requestId": format!("eval-session-{run}")})),
        )?;
        let session = session["sessionId"]
            .as_str()
            .ok_or_else(|| format!("no sessionId in {session}"))?
            .to_owned();
        let (mut passed, mut within) = (true, true);
        for (at, case) in cases.cases.iter().enumerate() {
            let record = send(server, &session, case, &format!("eval-{run}-{at}"))?;
            if run == 0 {
                continue;
            }
            let verdict = judge(case, &record);
            let time = match case.timed {
                Timed::Completes => record.completed,
                Timed::FirstAnswer => record.first_answer,
            };
            let kept = time.is_some_and(|time| time <= case.bound);
            let seconds = time.unwrap_or(RUN_TIMEOUT).as_secs_f64();
            eprintln!(
                "eval: {} run {run} {}: {} in {seconds:.2} s",
                weights.alias(),
                case.name,
                if verdict.is_ok() { "passed" } else { "failed" }
            );
            if let Err(why) = &verdict {
                tally
                    .failures
                    .push(format!("run {run}, {}: {why}", case.name));
            }
            passed &= verdict.is_ok();
            within &= kept;
            tally.cases[at].push((verdict.is_ok(), kept, seconds));
            if let Some(first) = record.first_text {
                tally.first_text[at].push(first.as_secs_f64());
            }
            tally.add_usage(at, &record.messages);
        }
        if run > 0 {
            tally.runs += 1;
            tally.all_passed += u32::from(passed);
            tally.all_within += u32::from(passed && within);
        }
    }
    let agents = server.json("GET", "/v1/agents", None)?;
    let names: Vec<&str> = agents["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|agent| agent["name"].as_str())
        .collect();
    drop(serve);
    let _scratch_cleanup_is_optional = std::fs::remove_dir_all(&scratch);
    Ok((tally, names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(tools: &[&str], mentions: &[&str]) -> Case {
        Case {
            name: "c".into(),
            prompt: "p".into(),
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            mentions: mentions.iter().map(|m| (*m).to_owned()).collect(),
            timed: Timed::Completes,
            bound: Duration::from_secs(1),
        }
    }

    fn record(messages: Vec<Value>) -> Record {
        Record {
            outcome: Some("completed".into()),
            messages,
            ..Record::default()
        }
    }

    fn text(text: &str) -> Value {
        json!({"role": "assistant", "content": [{"type": "text", "text": text}]})
    }

    fn call(name: &str) -> Value {
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": name,
               "arguments": {}}]})
    }

    fn result(name: &str, is_error: bool) -> Value {
        json!({"role": "toolResult", "toolName": name, "isError": is_error, "content": []})
    }

    #[test]
    fn a_greeting_passes_with_text_and_no_call() {
        let greeting = case(&[], &[]);
        assert_eq!(judge(&greeting, &record(vec![text("Hi there.")])), Ok(()));
        let called = record(vec![
            call("agents__create"),
            result("agents__create", false),
            text("ok"),
        ]);
        assert!(judge(&greeting, &called).is_err());
        assert!(judge(&greeting, &record(vec![text("  ")])).is_err());
        let failed = Record {
            outcome: Some("failed".into()),
            ..record(vec![text("Hi")])
        };
        assert!(judge(&greeting, &failed).is_err());
    }

    #[test]
    fn a_tool_case_needs_the_call_its_result_and_the_mentions() {
        let read = case(&["files__read"], &["Tuesday"]);
        let good = record(vec![
            call("files__read"),
            result("files__read", false),
            text("The launch is on tuesday."),
        ]);
        assert_eq!(judge(&read, &good), Ok(()));
        let wrong_tool = record(vec![
            call("files__list"),
            result("files__list", false),
            text("Tuesday"),
        ]);
        assert!(judge(&read, &wrong_tool).is_err());
        let failed_tool = record(vec![
            call("files__read"),
            result("files__read", true),
            text("Tuesday"),
        ]);
        assert!(judge(&read, &failed_tool).is_err());
        let unmentioned = record(vec![
            call("files__read"),
            result("files__read", false),
            text("Monday"),
        ]);
        assert!(judge(&read, &unmentioned).is_err());
    }

    #[test]
    fn the_committed_cases_load() {
        let cases = load().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cases.cases.len(), 3);
        assert!(cases.cases[0].tools.is_empty());
        for case in &cases.cases[1..] {
            assert!(
                !case.tools.is_empty() && !case.mentions.is_empty(),
                "{case:?}"
            );
        }
        for mention in &cases.cases[1].mentions {
            assert!(
                cases
                    .files
                    .iter()
                    .any(|(_, text)| text.contains(mention.as_str())),
                "{mention}"
            );
        }
        assert!(parse(&json!({"files": {}, "cases": []})).is_err());
        assert!(
            parse(
                &json!({"files": {}, "cases": [{"name": "n", "prompt": "p", "tools": [],
                "mentions": [], "timed": "soon", "bound_seconds": 1}]})
            )
            .is_err()
        );
    }
}
