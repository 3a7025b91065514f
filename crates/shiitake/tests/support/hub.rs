//! `serve --database postgres://` children for the Hub's tests: started on a free
//! port with a short heartbeat, their stderr in a file, killed when dropped; and raw
//! HTTP requests to them with any bearer token (or none), so a test sees the exact
//! status a caller gets.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::binary;

/// The operator's token every Hub child of these tests is started with.
pub const TOKEN: &str = "serve-hub-token-0123456789abcdef";

/// A `serve` child, its address, and where its stderr goes.
pub struct Served {
    pub child: Child,
    pub url: String,
    pub log: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) && self.child.kill().is_ok() {
            drop(self.child.wait());
        }
    }
}

/// `serve` on `database` with the data directory `dir/name` and the operator's default
/// Agent `agent`, without a model, a workspace or a heartbeat: the caller adds them.
pub fn command(dir: &Path, name: &str, database: &str, agent: &str) -> Command {
    let mut command = Command::new(binary());
    command
        .args(["serve", "--port", "0"])
        .arg("--data-dir")
        .arg(dir.join(name))
        .args(["--database", database, "--agent", agent])
        .env_remove("SHIITAKE_DATABASE")
        .env_remove("SHIITAKE_AGENT")
        .env_remove("SHIITAKE_MODEL")
        .env("SHIITAKE_TOKEN", TOKEN);
    command
}

/// `serve` on `database` with the data directory `dir/name`, the operator's default
/// Agent `agent`, no model, `dir` as the workspace, and `extra` flags.
pub fn serve(dir: &Path, name: &str, database: &str, agent: &str, extra: &[&str]) -> Command {
    let mut command = command(dir, name, database, agent);
    command
        .args(["--model", "none"])
        .arg("--workspace")
        .arg(dir)
        .args(extra);
    command
}

/// Starts a Hub child with a 200 ms heartbeat and waits for its address.
pub fn start(dir: &Path, name: &str, database: &str, agent: &str) -> Served {
    start_with(dir, name, database, agent, &[])
}

/// [`start`] with `extra` flags.
pub fn start_with(dir: &Path, name: &str, database: &str, agent: &str, extra: &[&str]) -> Served {
    let flags: Vec<&str> = ["--heartbeat", "200ms"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    spawn(
        serve(dir, name, database, agent, &flags),
        &dir.join(format!("{name}.log")),
    )
}

/// Spawns `command` with its stderr in `log` and waits for the address it prints.
pub fn spawn(mut command: Command, log: &Path) -> Served {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Some(url) = line.strip_prefix("shiitake: listening on ")
                && tx.send(url.to_owned()).is_err()
            {
                return;
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            panic!(
                "serve printed no address; its log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        });
    Served {
        child,
        url,
        log: log.to_path_buf(),
    }
}

/// Creates `tenant` through `served` with the operator's token: its first token.
pub fn create_tenant(served: &Served, tenant: &str) -> String {
    let body = serde_json::json!({ "name": tenant }).to_string();
    let (status, answer) = served.request("POST", "/v1/hub/tenants", &body);
    assert_eq!(status, 201, "{answer}");
    let issued: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(issued["tenant"], tenant, "{answer}");
    issued["token"].as_str().unwrap().to_owned()
}

impl Served {
    /// One request with the operator's token: its status and body.
    pub fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        self.request_as(Some(TOKEN), method, path, body)
    }

    /// One request with `token` (or no `Authorization` header): its status and body.
    pub fn request_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: &str,
    ) -> (u16, String) {
        let authorization = token
            .map(|token| format!("Authorization: Bearer {token}\r\n"))
            .unwrap_or_default();
        self.raw(method, path, &authorization, body)
    }

    /// One request with `headers` (each line ending in `\r\n`; a `Host:` among them
    /// replaces this process's own, as a load balancer in front would send it): its
    /// status, and its head and body.
    pub fn raw(&self, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
        let (status, _, body) = self.exchange(method, path, headers, body);
        (status, body)
    }

    /// As [`Served::raw`], with the response's head too.
    pub fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &str,
        body: &str,
    ) -> (u16, String, String) {
        let address = self.address();
        let host = if headers.to_ascii_lowercase().contains("host:") {
            String::new()
        } else {
            format!("Host: {address}\r\n")
        };
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\n{host}{headers}\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        (
            head.split(' ').nth(1).unwrap().parse().unwrap(),
            head.to_owned(),
            body.to_owned(),
        )
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned()
    }
}

/// `shiitake <args>` against `served` with the operator's token (a client data
/// directory under `dir`, no colour): its stdout; fails the test when it fails.
pub fn operator_cli(served: &Served, dir: &Path, args: &[&str]) -> String {
    let output = Command::new(binary())
        .args(args)
        .args(["--url", &served.url, "--token", TOKEN])
        .arg("--data-dir")
        .arg(dir.join("client"))
        .env("NO_COLOR", "1")
        .env_remove("SHIITAKE_AGENT")
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A database of the test's own on the server of `url` (created empty), as a URL.
///
/// A Hub process serves every tenant of its database and adopts the work of any
/// process that dies or drains there: tests sharing one database would take over each
/// other's tenants and count each other's takeovers.
pub fn fresh_database(url: &str) -> String {
    use sqlx::Connection;
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let name = format!("hub_test_{}_{n}", std::process::id());
    // On a thread of its own: an async test calls this from inside its runtime.
    let (server, created) = (url.to_owned(), name.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&server).await.unwrap();
            for statement in [
                format!("DROP DATABASE IF EXISTS {created}"),
                format!("CREATE DATABASE {created}"),
            ] {
                sqlx::query(&statement).execute(&mut conn).await.unwrap();
            }
            conn.close().await.unwrap();
        });
    })
    .join()
    .unwrap();
    // The URL's path names the database: replace it, keeping any query.
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(base, query)| (base, Some(query)));
    let (server, _database) = base
        .rsplit_once('/')
        .filter(|(server, _)| server.contains("://") && !server.ends_with('/'))
        .unwrap_or((base, ""));
    match query {
        Some(query) => format!("{server}/{name}?{query}"),
        None => format!("{server}/{name}"),
    }
}

/// A fresh database of the test's own ([`fresh_database`]) on the test server, or
/// `None` after the `SKIPPED` line when there is none (a failure instead when
/// `SHIITAKE_REQUIRE_SERVICES=1`).
pub fn test_database() -> Option<String> {
    shiitake_test_services::Service::Postgres
        .url()
        .map(|url| fresh_database(&url))
}

/// `body` as JSON; the test fails naming it when it is not.
pub fn json_of(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {body}"))
}

/// A new Session of `token`'s caller through `served`, with one follow-up prompt
/// `text` (request ids derived from `request`): the Session's id.
pub fn session_with_prompt(served: &Served, token: &str, request: &str, text: &str) -> String {
    let create = serde_json::json!({ "requestId": request }).to_string();
    let (status, body) = served.request_as(Some(token), "POST", "/v1/sessions", &create);
    assert_eq!(status, 200, "{body}");
    let session = json_of(&body)["sessionId"].as_str().unwrap().to_owned();
    let prompt = serde_json::json!({"type": "prompt", "requestId": format!("{request}-p"),
        "text": text, "delivery": "followUp"});
    let path = format!("/v1/sessions/{session}/commands");
    let (status, body) = served.request_as(Some(token), "POST", &path, &prompt.to_string());
    assert_eq!(status, 200, "{body}");
    session
}

/// The folder of a Hub test of processes playing one scripted model: the data
/// directories and logs, and `root/`, where each tenant's Computer folder is made.
pub struct ScriptedHub {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    database: String,
    operator: String,
    model: String,
}

impl ScriptedHub {
    /// The folder for processes on `database` whose operator's Agent is `operator`,
    /// playing `turns`.
    pub fn new(database: &str, operator: &str, turns: &serde_json::Value) -> Self {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("root");
        std::fs::create_dir(&root).unwrap();
        let model = super::script(dir.path(), turns);
        Self {
            dir,
            root,
            database: database.to_owned(),
            operator: operator.to_owned(),
            model,
        }
    }

    /// A process named `name` (its data directory and log), with a 200 ms heartbeat.
    pub fn process(&self, name: &str) -> Served {
        let mut command = command(self.dir.path(), name, &self.database, &self.operator);
        command
            .args(["--model", &self.model, "--heartbeat", "200ms"])
            .arg("--workspace")
            .arg(&self.root);
        spawn(command, &self.dir.path().join(format!("{name}.log")))
    }
}

/// Names no other test run uses, for a Hub test of `prefix`: the operator's Agent, a
/// tenant, and another tenant.
pub fn tenant_names(prefix: &str) -> (String, String, String) {
    let run = std::process::id();
    (
        format!("op{prefix}-{run}"),
        format!("{prefix}t-{run}"),
        format!("{prefix}o-{run}"),
    )
}
