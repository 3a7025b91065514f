//! Where things are: the data directory, the server URL and the token.

use std::path::PathBuf;

use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_protocol::AgentName;

use crate::error::CliError;

/// Default port of the Local host's HTTP server: where `serve` listens and client
/// commands look unless `--port` or `--url` say otherwise.
pub const DEFAULT_PORT: u16 = 8717;

/// Global options every command shares.
#[derive(Debug)]
pub struct Context {
    data_dir: Option<PathBuf>,
    url: Option<String>,
    token: Option<String>,
    agent: Option<String>,
}

impl Context {
    /// The options as given on the command line or in the environment.
    pub fn new(
        data_dir: Option<PathBuf>,
        url: Option<String>,
        token: Option<String>,
        agent: Option<String>,
    ) -> Self {
        Self {
            data_dir,
            url,
            token,
            agent,
        }
    }

    /// Whether `--url` (or `SHIITAKE_URL`) names the server.
    pub fn url_given(&self) -> bool {
        self.url.is_some()
    }

    /// `--token` / `SHIITAKE_TOKEN`, when given.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// `--data-dir`, else `<platform data dir>/shiitake`.
    pub fn data_dir(&self) -> Result<PathBuf, CliError> {
        if let Some(dir) = &self.data_dir {
            return Ok(dir.clone());
        }
        dirs::data_dir()
            .map(|dir| dir.join("shiitake"))
            .ok_or_else(|| {
                CliError::Setup(
                    "no platform data directory is known here; pass --data-dir".to_owned(),
                )
            })
    }

    /// A client of the server, with the token from `--token` or the data directory.
    pub fn agent(&self) -> Result<RemoteAgent, CliError> {
        let url = self
            .url
            .clone()
            .unwrap_or_else(|| format!("http://127.0.0.1:{DEFAULT_PORT}"));
        let token = match &self.token {
            Some(token) => token.clone(),
            None => {
                let path = shiitake_server::token_path(&self.data_dir()?);
                std::fs::read_to_string(&path)
                    .map_err(|error| {
                        CliError::Setup(format!(
                            "cannot read the token at {} ({error}): start `shiitake serve` \
                             with the same --data-dir first, or pass --token",
                            path.display()
                        ))
                    })?
                    .trim()
                    .to_owned()
            }
        };
        let mut options = ClientOptions::new(url).with_token(token);
        if self.agent.is_some() {
            options = options.with_agent(self.agent_name()?);
        }
        RemoteAgent::new(options).map_err(|error| CliError::Setup(error.to_string()))
    }

    /// `--agent` / `SHIITAKE_AGENT`, else `main`: one meaning for every command. `serve`
    /// serves it as the default Agent (on a Hub, the operator's default tenant); the
    /// client commands address it (`/v1/agents/NAME/…`) when it is given, and the
    /// server's default Agent otherwise.
    pub fn agent_name(&self) -> Result<AgentName, CliError> {
        match &self.agent {
            Some(agent) => AgentName::new(agent.as_str())
                .map_err(|error| CliError::Setup(format!("--agent: {error}"))),
            None => Ok(AgentName::default()),
        }
    }
}
