//! Starting, probing and stopping the server process.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::install::{self, note};
use crate::weights::Weights;
use crate::{Cache, LocalModelError, base_url};

/// How long a started server may take to answer: loading Python, llama.cpp and the
/// weights takes seconds on an idle machine and minutes on a busy 2-core one.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// Context window: the function-calling prompt lists every tool's schema.
const CONTEXT_TOKENS: &str = "4096";
/// The server with Shiitake's tool-calling chat handler (see the file's docstring).
const SERVER_SCRIPT: &str = include_str!("server.py");
/// The name the script registers its chat handler under.
const CHAT_FORMAT: &str = "shiitake-tools";
/// Bytes of prompt states the server's RAM cache keeps (states of a few prompts: a
/// Session's prompt with the tools and the one without, of a few Sessions).
const PROMPT_CACHE_BYTES: &str = "268435456";

/// Starts the server for `weights` on 127.0.0.1:`port`, or reuses the one answering there.
///
/// Installs what is missing first (minutes on a fresh machine). Returns the
/// base URL. A server on the port that serves other weights is an error, not
/// silently used.
pub fn start(cache: &Cache, weights: Weights, port: u16) -> Result<String, LocalModelError> {
    let began = Instant::now();
    let script = cache.root().join("shiitake_server.py");
    if let Some(models) = models(port) {
        if !models.contains(&format!("\"{}\"", weights.alias())) {
            return Err(LocalModelError::Unexpected(format!(
                "port {port} serves another model ({models:.200}); stop it first \
                 (cargo xtask local-model stop) or choose another port"
            )));
        }
        if fs::read_to_string(&script).ok().as_deref() == Some(SERVER_SCRIPT) {
            note(&format!("already running on port {port}"));
            return Ok(base_url(port));
        }
        // It was started from an older handler (the script is rewritten on each start):
        // answers from it would not be what this build expects.
        if !stop(cache, port)? {
            return Err(LocalModelError::Unexpected(format!(
                "port {port} serves {weights} with a handler older than this build's, and \
                 not one this cache started; stop it, then start again"
            )));
        }
        note("restarted: the running server's handler was older than this build's");
    }
    install::server(cache)?;
    let model = install::weights(cache, weights)?;
    if fs::read_to_string(&script).ok().as_deref() != Some(SERVER_SCRIPT) {
        fs::write(&script, SERVER_SCRIPT).map_err(|source| LocalModelError::Io {
            path: script.clone(),
            source,
        })?;
    }
    let log_path = cache.log_file(port);
    let log = fs::File::create(&log_path).map_err(|source| LocalModelError::Io {
        path: log_path.clone(),
        source,
    })?;
    let log_err = log.try_clone().map_err(|source| LocalModelError::Io {
        path: log_path.clone(),
        source,
    })?;
    let mut child = Command::new(cache.python())
        .arg(&script)
        .arg("--model")
        .arg(&model)
        .args([
            "--model_alias",
            weights.alias(),
            "--host",
            "127.0.0.1",
            "--port",
        ])
        .arg(port.to_string())
        .args([
            "--n_ctx",
            CONTEXT_TOKENS,
            "--n_threads",
            "2",
            "--verbose",
            "false",
        ])
        .args(["--chat_format", CHAT_FORMAT])
        // Logits of the last token only: the handler reads no others, and all of them
        // (llama-cpp-python's default) cost 800 MB and time on every prompt token.
        .args(["--logits_all", "false"])
        // Keep the KV states of earlier prompts, so a call whose prompt starts like an
        // earlier one (its system prompt and tools, its Session so far) skips that part.
        .args(["--cache", "true", "--cache_type", "ram"])
        .args(["--cache_size", PROMPT_CACHE_BYTES])
        // Queue concurrent requests instead of cutting the running one short.
        .args(["--interrupt_requests", "false"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        // Its own process group: the server outlives this call and a Ctrl-C to the caller.
        .process_group(0)
        .spawn()
        .map_err(|error| LocalModelError::Command {
            command: "python shiitake_server.py".into(),
            detail: error.to_string(),
        })?;
    let pid_file = cache.pid_file(port);
    fs::write(&pid_file, child.id().to_string()).map_err(|source| LocalModelError::Io {
        path: pid_file.clone(),
        source,
    })?;
    let deadline = Instant::now() + READY_TIMEOUT;
    while !healthy(port) {
        let failed = match child.try_wait() {
            Ok(Some(status)) => Some(format!("exited with {status} before answering")),
            _ if Instant::now() > deadline => {
                let _ignored_if_already_gone = child.kill();
                Some(format!(
                    "did not answer within {} s",
                    READY_TIMEOUT.as_secs()
                ))
            }
            _ => None,
        };
        if let Some(what) = failed {
            return Err(LocalModelError::NotReady {
                what,
                tail: log_tail(&log_path),
                log: log_path,
            });
        }
        sleep(Duration::from_millis(200));
    }
    note(&format!(
        "{weights} ready on port {port} (pid {}) after {:.1} s; log {}",
        child.id(),
        began.elapsed().as_secs_f64(),
        log_path.display()
    ));
    Ok(base_url(port))
}

/// Stops the server that `start` recorded for `port`, if it still runs; true when one
/// was stopped.
pub fn stop(cache: &Cache, port: u16) -> Result<bool, LocalModelError> {
    let pid_file = cache.recorded_pid_file(port);
    let Ok(text) = fs::read_to_string(&pid_file) else {
        note("no server was started (no pid file)");
        return Ok(false);
    };
    let pid: u32 = text
        .trim()
        .parse()
        .map_err(|_| LocalModelError::Unexpected(format!("bad pid file: `{}`", text.trim())))?;
    // Only signal the process if it still is our server: pids get reused.
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let ours = String::from_utf8_lossy(&cmdline).contains("shiitake_server.py")
        || String::from_utf8_lossy(&cmdline).contains("llama_cpp.server");
    if ours {
        signal(pid, "TERM")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            sleep(Duration::from_millis(100));
        }
        if Path::new(&format!("/proc/{pid}")).exists() {
            signal(pid, "KILL")?;
        }
        note(&format!("stopped pid {pid}"));
    } else {
        note(&format!("pid {pid} is no longer the model server"));
    }
    fs::remove_file(&pid_file).map_err(|source| LocalModelError::Io {
        path: pid_file,
        source,
    })?;
    Ok(ours)
}

fn signal(pid: u32, name: &str) -> Result<(), LocalModelError> {
    let status = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .map_err(|error| LocalModelError::Command {
            command: format!("kill -{name} {pid}"),
            detail: error.to_string(),
        })?;
    if status.success() || !Path::new(&format!("/proc/{pid}")).exists() {
        Ok(())
    } else {
        Err(LocalModelError::Command {
            command: format!("kill -{name} {pid}"),
            detail: status.to_string(),
        })
    }
}

/// True when `GET /v1/models` on 127.0.0.1:`port` answers 200 within two seconds.
pub fn healthy(port: u16) -> bool {
    models(port).is_some()
}

/// The body of `GET /v1/models` when it answers 200 within two seconds.
fn models(port: u16) -> Option<String> {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2)).ok()?;
    let timeout = Some(Duration::from_secs(2));
    stream.set_read_timeout(timeout).ok()?;
    stream.set_write_timeout(timeout).ok()?;
    let request = format!("GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    // HTTP/1.0: the server closes the connection after the body.
    let _short_reads_are_judged_below = stream.take(1 << 20).read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response);
    let ok = response.starts_with("HTTP/1.") && response.get(9..12) == Some("200");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned());
    if ok { body } else { None }
}

fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-shot HTTP server on 127.0.0.1 that answers `reply` to the first request.
    fn answer_once(reply: &'static str) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        port
    }

    #[test]
    fn the_models_route_is_read_and_other_answers_are_not_healthy() {
        let port = answer_once(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"data\":[{\"id\":\"smollm2\"}]}",
        );
        assert_eq!(
            models(port).as_deref(),
            Some("{\"data\":[{\"id\":\"smollm2\"}]}")
        );
        let port = answer_once("HTTP/1.1 404 Not Found\r\n\r\n{}");
        assert!(!healthy(port));
    }

    #[test]
    fn a_server_from_an_older_handler_that_this_cache_did_not_start_is_refused() {
        let port = answer_once("HTTP/1.1 200 OK\r\n\r\n{\"data\":[{\"id\":\"smollm2\"}]}");
        let dir = std::env::temp_dir().join(format!("shiitake-local-model-stale-{port}"));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        fs::write(dir.join("shiitake_server.py"), "# an older handler\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let error = start(&Cache::at(&dir), Weights::SmolLm2, port).err();
        let _ = fs::remove_dir_all(&dir);
        assert!(
            matches!(&error, Some(LocalModelError::Unexpected(message)) if message.contains("older")),
            "{error:?}"
        );
    }

    #[test]
    fn another_model_on_the_port_is_refused() {
        let port = answer_once("HTTP/1.1 200 OK\r\n\r\n{\"data\":[{\"id\":\"gemma3\"}]}");
        let cache = Cache::at(std::env::temp_dir().join("shiitake-local-model-unused"));
        let error = start(&cache, Weights::SmolLm2, port).err();
        assert!(
            matches!(&error, Some(LocalModelError::Unexpected(message)) if message.contains("another model")),
            "{error:?}"
        );
    }
}
