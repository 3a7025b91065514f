//! The services some tests need, and what a test does when one is missing.
//!
//! **What it owns.** One rule, written once for every test that needs
//! PostgreSQL, headless Chromium or the bundled local model ([`Service`]):
//!
//! | the service | without `SHIITAKE_REQUIRE_SERVICES` | with `SHIITAKE_REQUIRE_SERVICES=1` |
//! | --- | --- | --- |
//! | present | the test runs | the test runs |
//! | missing | one loud `SKIPPED` line on stderr; the test returns | the test fails, naming the service and how to provide it |
//!
//! A service is *missing* when its variable ([`Service::variable`]) is unset or
//! empty, or names something that does not answer: a URL whose host and port
//! refuse a TCP connection ([`probe_url`]), or a browser that is not an
//! executable file (`shiitake-chromium` looks for it and hands its finding to
//! [`Service::check`]). `cargo xtask test` and `.ci/run` set
//! [`REQUIRE_VAR`], so there a missing service fails the run instead of passing
//! tests that tested nothing.
//!
//! The skip line is written to the process's stderr directly, not with
//! `eprintln!`, which libtest captures for passing tests: a plain `cargo test`
//! shows it.
//!
//! ```no_run
//! use shiitake_test_services::Service;
//!
//! // In a test: returns (after the SKIPPED line) or panics when PostgreSQL is missing.
//! let Some(url) = Service::Postgres.url() else { return };
//! # let _ = url;
//! ```
//!
//! **What it does not own.** Starting the services (`cargo xtask postgres`,
//! `chromium`, `local-model`) or talking to them. The rule itself is a pure
//! function of what it is given ([`decide`], [`check_url_in`]), so it is tested
//! without touching the environment of the test process. This crate is test
//! support and is not published.

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Set to anything but empty or `0`, a missing service fails its tests.
pub const REQUIRE_VAR: &str = "SHIITAKE_REQUIRE_SERVICES";

/// How long a probe waits for a TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A service outside the process that some tests need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    /// A PostgreSQL server, named by `SHIITAKE_TEST_POSTGRES_URL`.
    Postgres,
    /// Headless Chromium, named by `SHIITAKE_CHROMIUM` or found on `PATH`.
    Chromium,
    /// The bundled local model's OpenAI-compatible server, named by
    /// `SHIITAKE_TEST_LOCAL_MODEL_URL`.
    LocalModel,
    /// The command sandbox: bubblewrap (`bwrap`) and `prlimit` on `PATH`, and a kernel
    /// that gives their namespaces.
    Sandbox,
    /// The protocols' official clients from PyPI (the ACP, MCP and A2A SDKs): a Python
    /// that has them, named by `SHIITAKE_CLIENTS_PYTHON`.
    Clients,
    /// Arize Phoenix from PyPI, the trace receiver of the OpenTelemetry tests: its
    /// `phoenix` command, named by `SHIITAKE_PHOENIX`.
    Phoenix,
}

impl Service {
    /// Every service.
    pub const ALL: [Self; 6] = [
        Self::Postgres,
        Self::Chromium,
        Self::LocalModel,
        Self::Sandbox,
        Self::Clients,
        Self::Phoenix,
    ];

    /// The service's name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Postgres => "PostgreSQL",
            Self::Chromium => "Chromium",
            Self::LocalModel => "The local model",
            Self::Sandbox => "The command sandbox (bubblewrap)",
            Self::Clients => "The protocols' official clients (PyPI)",
            Self::Phoenix => "Arize Phoenix, the trace receiver (PyPI)",
        }
    }

    /// The environment variable that names the service.
    pub const fn variable(self) -> &'static str {
        match self {
            Self::Postgres => "SHIITAKE_TEST_POSTGRES_URL",
            Self::Chromium => "SHIITAKE_CHROMIUM",
            Self::LocalModel => "SHIITAKE_TEST_LOCAL_MODEL_URL",
            // Found on the search path, as the host finds it.
            Self::Sandbox => "PATH",
            Self::Clients => "SHIITAKE_CLIENTS_PYTHON",
            Self::Phoenix => "SHIITAKE_PHOENIX",
        }
    }

    /// How to provide the service, for messages.
    pub const fn remedy(self) -> &'static str {
        match self {
            Self::Postgres => {
                "run `cargo xtask test`, or export \
                 SHIITAKE_TEST_POSTGRES_URL=$(cargo xtask postgres start | tail -1)"
            }
            Self::Chromium => {
                "run `cargo xtask test`, or export \
                 SHIITAKE_CHROMIUM=$(cargo xtask chromium | tail -1)"
            }
            Self::LocalModel => {
                "run `cargo xtask test`, or export \
                 SHIITAKE_TEST_LOCAL_MODEL_URL=$(cargo xtask local-model start | tail -1)"
            }
            Self::Sandbox => {
                "run `cargo xtask test` (it installs Debian's `bubblewrap`), or \
                 `apt-get install bubblewrap` so that `bwrap` is on PATH"
            }
            Self::Clients => {
                "run `cargo xtask test`, or export \
                 SHIITAKE_CLIENTS_PYTHON=$(cargo xtask clients | tail -1)"
            }
            Self::Phoenix => {
                "run `cargo xtask test`, or export \
                 SHIITAKE_PHOENIX=$(cargo xtask phoenix | tail -1)"
            }
        }
    }

    /// The URL the service's variable names, when it answers; otherwise the
    /// `SKIPPED` line and `None`, or a panic when [`REQUIRE_VAR`] is set.
    ///
    /// Reads the process environment. For PostgreSQL and the local model.
    #[track_caller]
    pub fn url(self) -> Option<String> {
        check_url_in(self, &process_env, &current_test()).apply()
    }

    /// The Python of the protocols' official clients, when
    /// [`Service::Clients`]' variable names one that runs; otherwise the `SKIPPED` line
    /// and `None`, or a panic when [`REQUIRE_VAR`] is set.
    #[track_caller]
    pub fn clients_python() -> Option<std::path::PathBuf> {
        Self::Clients.named_file()
    }

    /// Phoenix's `phoenix` command, when [`Service::Phoenix`]' variable names one;
    /// otherwise the `SKIPPED` line and `None`, or a panic when [`REQUIRE_VAR`] is set.
    #[track_caller]
    pub fn phoenix() -> Option<std::path::PathBuf> {
        Self::Phoenix.named_file()
    }

    /// The file this service's variable names, when it is one.
    #[track_caller]
    fn named_file(self) -> Option<std::path::PathBuf> {
        let found = match process_env(self.variable()) {
            Some(file) if std::path::Path::new(&file).is_file() => {
                Ok(std::path::PathBuf::from(file))
            }
            Some(file) => Err(Missing::new(format!(
                "{} names {file}, which is not a file",
                self.variable()
            ))),
            None => Err(Missing::new(format!("{} is not set", self.variable()))),
        };
        self.check(found)
    }

    /// Applies the rule to what a caller's own probe `found` (the browser a
    /// search found, for example), with [`REQUIRE_VAR`] read from the process
    /// environment and the current test named in messages.
    #[track_caller]
    pub fn check<T>(self, found: Result<T, Missing>) -> Option<T> {
        self.check_for(&current_test(), found)
    }

    /// [`Service::check`], naming `test` in messages.
    #[track_caller]
    pub fn check_for<T>(self, test: &str, found: Result<T, Missing>) -> Option<T> {
        decide(self, required(&process_env), found, test).apply()
    }
}

impl std::fmt::Display for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a service is missing, in words that finish "… because": `SHIITAKE_TEST_POSTGRES_URL
/// is not set`, or `… names 127.0.0.1:1, which does not answer (Connection refused)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing(String);

impl Missing {
    /// A reason in words.
    pub fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }

    /// The reason.
    pub fn reason(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a test does about one service.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision<T> {
    /// The service is there: run, with what was found.
    Run(T),
    /// The service is missing and not required: print this line and return.
    Skip(String),
    /// The service is missing and required: fail with this message.
    Fail(String),
}

impl<T> Decision<T> {
    /// Carries the decision out: `Some` to run; `None` after writing the skip
    /// line to stderr (directly, so libtest does not capture it); a panic with
    /// the message when the service was required.
    #[track_caller]
    pub fn apply(self) -> Option<T> {
        self.apply_to(&mut std::io::stderr())
    }

    /// [`Decision::apply`], writing the skip line to `out`.
    #[track_caller]
    pub fn apply_to(self, out: &mut dyn Write) -> Option<T> {
        match self {
            Self::Run(found) => Some(found),
            Self::Skip(line) => {
                // A skip that cannot say so fails rather than pass silently.
                if let Err(error) = writeln!(out, "{line}") {
                    panic!("cannot write the skip line ({error}): {line}");
                }
                None
            }
            Self::Fail(message) => panic!("{message}"),
        }
    }
}

/// The rule: present runs; missing skips loudly, or fails when `required`.
/// `test` names the test in the messages.
pub fn decide<T>(
    service: Service,
    required: bool,
    found: Result<T, Missing>,
    test: &str,
) -> Decision<T> {
    match found {
        Ok(found) => Decision::Run(found),
        Err(missing) if required => Decision::Fail(format!(
            "{service} is required ({REQUIRE_VAR}=1) but {missing}: {}",
            service.remedy()
        )),
        Err(missing) => Decision::Skip(format!(
            "SKIPPED {test}: {service} is missing ({missing}), so this test passes without \
             testing anything; to run it: {}; with {REQUIRE_VAR}=1 it fails instead",
            service.remedy()
        )),
    }
}

/// Whether the environment `env` asks for missing services to fail:
/// [`REQUIRE_VAR`] set to anything but empty or `0`.
pub fn required(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env(REQUIRE_VAR).is_some_and(|value| !matches!(value.trim(), "" | "0"))
}

/// The rule for a service named by a URL, in the environment `env`: reads the
/// service's variable and [`REQUIRE_VAR`], probes the URL ([`probe_url`]) and
/// decides ([`decide`]).
pub fn check_url_in(
    service: Service,
    env: &dyn Fn(&str) -> Option<String>,
    test: &str,
) -> Decision<String> {
    let found = probe_url(service, env(service.variable()));
    decide(service, required(env), found, test)
}

/// The URL `value` of `service`'s variable when it is set and answers: a TCP
/// connection to its host and port succeeds (the scheme's port when it names
/// none: 5432 for `postgres`, 80 for `http`, 443 for `https`). A URL without a
/// host (PostgreSQL over a Unix socket) cannot be probed and is taken as it is.
/// Messages show the host and port only, never the whole URL, which may hold a
/// password.
pub fn probe_url(service: Service, value: Option<String>) -> Result<String, Missing> {
    let variable = service.variable();
    let Some(url) = value.filter(|url| !url.trim().is_empty()) else {
        return Err(Missing::new(format!("{variable} is not set")));
    };
    let Some(address) = Address::parse(&url) else {
        return Err(Missing::new(format!(
            "{variable} is not a URL of the form scheme://host:port/…"
        )));
    };
    let Address::Tcp { host, port } = address else {
        return Ok(url);
    };
    match answers(&host, port) {
        Ok(()) => Ok(url),
        Err(error) => Err(Missing::new(format!(
            "{variable} names {host}:{port}, which does not answer ({error})"
        ))),
    }
}

/// Where a URL points.
#[derive(Debug, PartialEq, Eq)]
enum Address {
    /// A host and port to connect to.
    Tcp { host: String, port: u16 },
    /// No host in the URL: a Unix socket or a driver default.
    NoHost,
}

impl Address {
    /// `scheme://[user[:password]@]host[:port][/path][?query]`, with `[v6]` hosts.
    fn parse(url: &str) -> Option<Self> {
        let (scheme, rest) = url.trim().split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host_port = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host_port)| host_port);
        if host_port.is_empty() {
            return Some(Self::NoHost);
        }
        let (host, port) = match host_port.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']')?;
                (host, after.strip_prefix(':'))
            }
            None => match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            },
        };
        let port = match port {
            Some(port) => port.parse().ok()?,
            None => default_port(scheme)?,
        };
        if host.is_empty() {
            return None;
        }
        Some(Self::Tcp {
            host: host.to_owned(),
            port,
        })
    }
}

/// The port a scheme implies when a URL names none.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme.to_ascii_lowercase().as_str() {
        "postgres" | "postgresql" => Some(5432),
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// Whether a TCP connection to `host:port` succeeds (any of its addresses).
fn answers(host: &str, port: u16) -> std::io::Result<()> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for address in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// The process environment as [`required`] and [`check_url_in`] read it.
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The running test's name: libtest names each test's thread after it.
fn current_test() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => "a test".to_owned(),
    }
}

#[cfg(test)]
mod tests;
