//! A Hub of three `serve --database postgres://` processes hosting three tenants, as
//! an operator runs it: tenants created with the operator's token, each tenant
//! driving its Sessions through every process with its own token, another tenant's
//! Sessions answered `not_found` over HTTP and SSE with nothing changed, a web login
//! minted on one process working on another and after both restart, and a rotated
//! token refused on every process within a second.
//!
//! Reads `SHIITAKE_TEST_POSTGRES_URL`; without it, or when it does not answer, the
//! test prints one `SKIPPED` line, or fails when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::binary;
use crate::support::hub::{
    Served, TOKEN, create_tenant, json_of, operator_cli, session_with_prompt, start, test_database,
};

/// The address a load balancer in front of the processes would send as `Host`, so
/// the cookie's name (which follows the port of `Host`) is the same on every process.
const BALANCER: &str = "hub.test:8443";

/// The Session's snapshot through `served` as `token`'s caller: status and body.
fn snapshot(served: &Served, token: &str, session: &str) -> (u16, String) {
    served.request_as(
        Some(token),
        "GET",
        &format!("/v1/sessions/{session}/snapshot"),
        "",
    )
}

/// Waits until `served` answers `token` with `status` on `GET /v1/sessions`; how long.
fn until_status(served: &Served, token: &str, status: u16, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let (got, _) = served.request_as(Some(token), "GET", "/v1/sessions", "");
        if got == status {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{} still answered {got}, not {status}, after {within:?}",
            served.url
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop(served: &mut Served) {
    let status = Command::new("kill")
        .args(["-TERM", &served.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while served.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "serve did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cookie_headers(cookie: &str) -> String {
    format!("Host: {BALANCER}\r\nCookie: {cookie}\r\n")
}

/// Mints a web login link on `served` with `token` and opens it on `opener` (as the
/// balancer would route it): the cookie it sets, `name=value`.
fn log_in(served: &Served, opener: &Served, token: &str) -> String {
    let (status, body) = served.request_as(Some(token), "POST", "/v1/web/login-links", "");
    assert_eq!(status, 200, "{body}");
    let path = json_of(&body)["path"].as_str().unwrap().to_owned();
    let (status, head, body) = opener.exchange("GET", &path, &format!("Host: {BALANCER}\r\n"), "");
    assert_eq!(status, 303, "{head}\n{body}");
    let set_cookie = head
        .lines()
        .find_map(|line| line.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("no cookie set:\n{head}"));
    set_cookie.split(';').next().unwrap().to_owned()
}

#[test]
fn three_processes_host_three_tenants_apart() {
    let Some(database) = test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = std::process::id();
    let operator = format!("op-{run}");
    let mut processes: Vec<Served> = ["a", "b", "c"]
        .iter()
        .map(|name| start(dir.path(), name, &database, &operator))
        .collect();
    let tenants: Vec<String> = ["acme", "globex", "initech"]
        .iter()
        .map(|name| format!("{name}-{run}"))
        .collect();
    let tokens: Vec<String> = tenants
        .iter()
        .enumerate()
        .map(|(at, tenant)| create_tenant(&processes[at % 3], tenant))
        .collect();

    // Each tenant drives a Session through every process, and reads each one
    // through every process.
    let mut sessions: Vec<Vec<String>> = Vec::new();
    for (tenant, token) in tenants.iter().zip(&tokens) {
        let of_tenant: Vec<String> = processes
            .iter()
            .enumerate()
            .map(|(at, served)| {
                let request = format!("{tenant}-{at}");
                session_with_prompt(served, token, &request, &format!("hello from {request}"))
            })
            .collect();
        for session in &of_tenant {
            for served in &processes {
                let (status, body) = snapshot(served, token, session);
                assert_eq!(
                    status, 200,
                    "{tenant} reads {session} on {}: {body}",
                    served.url
                );
                assert!(body.contains("hello from"), "{body}");
            }
        }
        let (status, body) = processes[2].request_as(Some(token), "GET", "/v1/agents", "");
        assert_eq!(status, 200, "{body}");
        let agents = json_of(&body)["agents"].clone();
        assert_eq!(agents, json!([{"name": tenant, "default": true}]), "{body}");
        sessions.push(of_tenant);
    }

    // The client commands work as against a Local host: with the tenant's token, and
    // with the operator's token and `SHIITAKE_AGENT` naming the tenant.
    let cli = |token: &str, agent: Option<&str>, args: &[&str]| -> String {
        let mut command = Command::new(binary());
        command
            .args(args)
            .args(["--url", &processes[1].url, "--token", token])
            .arg("--data-dir")
            .arg(dir.path().join("client"))
            .env("NO_COLOR", "1")
            .env_remove("SHIITAKE_AGENT");
        if let Some(agent) = agent {
            command.env("SHIITAKE_AGENT", agent);
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let listed = cli(&tokens[0], None, &["agents"]);
    assert_eq!(
        listed.split_whitespace().collect::<Vec<_>>(),
        [tenants[0].as_str(), "(default)"]
    );
    for (token, agent) in [
        (tokens[0].as_str(), None),
        (TOKEN, Some(tenants[0].as_str())),
    ] {
        let listed = cli(token, agent, &["sessions"]);
        for session in &sessions[0] {
            assert!(listed.contains(session.as_str()), "{listed}");
        }
        assert!(!listed.contains(sessions[1][0].as_str()), "{listed}");
    }

    // Another tenant's Sessions are not there, over HTTP and SSE, on every process,
    // and nothing of them changes.
    let victim = &sessions[0][0];
    let (_, before) = processes[0].request("GET", &format!("/v1/sessions/{victim}/snapshot"), "");
    for served in &processes {
        for (method, path, body) in [
            (
                "GET",
                format!("/v1/sessions/{victim}/snapshot"),
                String::new(),
            ),
            (
                "GET",
                format!("/v1/sessions/{victim}/events"),
                String::new(),
            ),
            ("GET", format!("/v1/sessions/{victim}/watch"), String::new()),
            (
                "POST",
                format!("/v1/sessions/{victim}/commands"),
                json!({"type": "prompt", "requestId": "intruder", "text": "leak", "delivery": "followUp"}).to_string(),
            ),
            (
                "GET",
                format!("/v1/agents/{}/sessions", tenants[0]),
                String::new(),
            ),
            ("GET", "/v1/hub/tenants".to_owned(), String::new()),
        ] {
            let (status, answer) = served.request_as(Some(&tokens[1]), method, &path, &body);
            assert_eq!(status, 404, "{method} {path} on {}: {answer}", served.url);
            assert_eq!(json_of(&answer)["code"], "not_found", "{answer}");
        }
        // Deleting is idempotent: another tenant's Session is answered exactly as one
        // that never existed, and stays.
        let (status, answer) = served.request_as(
            Some(&tokens[1]),
            "DELETE",
            &format!("/v1/sessions/{victim}"),
            "",
        );
        assert_eq!((status, answer.as_str()), (200, r#"{"deleted":false}"#));
        let (status, listed) = served.request_as(Some(&tokens[1]), "GET", "/v1/sessions", "");
        assert_eq!(status, 200);
        assert!(!listed.contains(victim.as_str()), "{listed}");
    }
    let (_, after) = processes[1].request("GET", &format!("/v1/sessions/{victim}/snapshot"), "");
    let messages = |snapshot: &str| json_of(snapshot)["messages"].clone();
    assert_eq!(
        messages(&before),
        messages(&after),
        "the victim's Session changed"
    );
    assert!(!after.contains("leak"), "{after}");

    // A login minted on the first process opens on the third, reaches its tenant's
    // Sessions and not another's, and outlives a restart of both.
    let cookie = log_in(&processes[0], &processes[2], &tokens[0]);
    let (status, listed) = processes[2].raw("GET", "/v1/sessions", &cookie_headers(&cookie), "");
    assert_eq!(status, 200, "{listed}");
    assert!(listed.contains(victim.as_str()), "{listed}");
    let other = &sessions[1][0];
    let (status, _) = processes[2].raw(
        "GET",
        &format!("/v1/sessions/{other}/snapshot"),
        &cookie_headers(&cookie),
        "",
    );
    assert_eq!(status, 404);
    for at in [0, 2] {
        stop(&mut processes[at]);
        let name = ["a", "b", "c"][at];
        processes[at] = start(dir.path(), name, &database, &operator);
    }
    for at in [0, 2] {
        let (status, listed) =
            processes[at].raw("GET", "/v1/sessions", &cookie_headers(&cookie), "");
        assert_eq!(status, 200, "after the restart, on {at}: {listed}");
    }
    // Logging out on one process ends the login on every other.
    let logout = format!(
        "{}X-Shiitake-CSRF: 1\r\nOrigin: http://{BALANCER}\r\n",
        cookie_headers(&cookie)
    );
    let (status, _) = processes[1].raw("POST", "/logout", &logout, "");
    assert_eq!(status, 204);
    for served in &processes {
        let (status, _) = served.raw("GET", "/v1/sessions", &cookie_headers(&cookie), "");
        assert_eq!(
            status, 401,
            "a logged-out cookie still works on {}",
            served.url
        );
    }

    // Rotation: the old token is refused on every process within a second; the
    // new one works everywhere.
    for served in &processes {
        until_status(served, &tokens[2], 200, Duration::from_secs(5));
    }
    let (status, body) = processes[1].request(
        "POST",
        &format!("/v1/hub/tenants/{}/tokens", tenants[2]),
        r#"{"revokeOthers":true}"#,
    );
    assert_eq!(status, 201, "{body}");
    let rotated = json_of(&body)["token"].as_str().unwrap().to_owned();
    let rotated_at = Instant::now();
    for served in &processes {
        until_status(served, &tokens[2], 401, Duration::from_secs(5));
    }
    let cut_within = rotated_at.elapsed();
    eprintln!("the rotated token was refused on all 3 processes within {cut_within:?}");
    assert!(
        cut_within < Duration::from_secs(1),
        "the old token still worked somewhere {cut_within:?} after the rotation"
    );
    for served in &processes {
        let (status, body) = snapshot(served, &rotated, &sessions[2][0]);
        assert_eq!(status, 200, "{body}");
    }
    let listed = operator_cli(&processes[0], dir.path(), &["hub", "tenant", "list"]);
    for tenant in &tenants {
        assert!(listed.contains(tenant.as_str()), "{listed}");
    }
}
