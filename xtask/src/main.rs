//! Workspace automation, run as `cargo xtask <command>`.
//!
//! Each command is a module with one `run` function; this file only dispatches.

mod bench;
mod chromium;
mod clients;
mod debian;
mod dictionary;
mod eval;
mod fuzz;
mod local_model;
mod pack;
mod postgres;
mod sandbox;
mod soak;
mod stranger;
mod test;
mod util;
mod web_vendor;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  bench        run the benchmarks and print their ratios (see docs/benchmarks.md)
  chromium     find or install headless Chromium for the browser tests; prints its path
  clients      make the Python environment of the protocols' official clients (PyPI); prints its python
  phoenix      make the Python environment of Arize Phoenix, the trace receiver of the OpenTelemetry tests (PyPI); prints its phoenix
  sandbox      find or install bubblewrap for the sandboxed command tests; prints its path
  dictionary   remake the zstd dictionary messages are packed against (--check compares)
  pack         package every publishable crate and check each package's file list
  soak         rounds of load, SIGKILL and restart against the release binary (--rounds N)
  fuzz         run each fuzz target for a bounded time (--seconds N, default 60)
  stranger     build a consumer outside the workspace against the packaged crates only
  local-model  build (or reuse) and start the local OpenAI-compatible model server; eval measures it
  postgres     start or stop a throwaway PostgreSQL on a loopback port (for the tests)
  test         start what the tests need, then run every test of the workspace
  web-vendor   rebuild the web page's vendored Markdown parser with npm (--check compares)";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    let rest: Vec<String> = args.collect();
    let result = match command.as_deref() {
        Some("bench") => bench::run(&rest),
        Some("chromium") => chromium::run(&rest),
        Some("clients") => clients::run(&rest),
        Some("phoenix") => clients::run_phoenix(&rest),
        Some("sandbox") => sandbox::run(&rest),
        Some("dictionary") => dictionary::run(&rest),
        Some("pack") => pack::run(&rest).map(|_| ()),
        Some("stranger") => stranger::run(&rest),
        Some("local-model") => local_model::run(&rest),
        Some("postgres") => postgres::run(&rest),
        Some("test") => test::run(&rest),
        Some("soak") => soak::run(&rest),
        Some("fuzz") => fuzz::run(&rest),
        Some("web-vendor") => web_vendor::run(&rest),
        Some("-h" | "--help" | "help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
