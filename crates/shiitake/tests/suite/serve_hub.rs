//! `serve --database postgres://` as its operator runs it: `--lease-ttl` and
//! `--heartbeat` checked before anything starts, `shiitake hub nodes` listing every
//! process, SIGTERM draining one cleanly (it leaves the list, and says nothing
//! about its listener as its pool closes), and the Hub's metrics following a
//! Session from a process killed with SIGKILL to the one that takes it over.
//!
//! Reads `SHIITAKE_TEST_POSTGRES_URL`; without it, or when it does not answer, the
//! PostgreSQL test prints one `SKIPPED` line, or fails when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::hub::{Served, operator_cli, serve, start, start_with, test_database};

#[test]
fn lease_and_heartbeat_out_of_bounds_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    for (database, flags, says) in [
        (
            "sqlite:x.db",
            vec!["--lease-ttl", "10s"],
            "apply to a PostgreSQL database",
        ),
        (
            "postgres://nobody@127.0.0.1:1/none",
            vec!["--heartbeat", "6s"],
            "half the lease",
        ),
        (
            "postgres://nobody@127.0.0.1:1/none",
            vec!["--lease-ttl", "499ms"],
            "outside 500 ms",
        ),
        (
            "postgres://nobody@127.0.0.1:1/none",
            vec!["--heartbeat", "1.5s"],
            "whole number",
        ),
    ] {
        let output = serve(dir.path(), "refused", database, "default", &flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flags:?} started: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(
            !dir.path().join("refused").join("token").exists(),
            "a refused start created the token"
        );
    }
}

#[test]
fn the_operator_lists_the_processes_and_a_sigterm_drains_one() {
    let Some(database) = test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let agent = format!("hub-{}", std::process::id());
    let mut first = start(dir.path(), "a", &database, &agent);
    let second = start(dir.path(), "b", &database, &agent);

    // The list holds one row per (tenant, process) of the whole database, which
    // other tests share: this test's tenant has one row per process.
    let of_tenant = |listed: &str| -> Vec<String> {
        listed
            .lines()
            .filter(|line| line.split_whitespace().nth(1) == Some(agent.as_str()))
            .map(str::to_owned)
            .collect()
    };
    let listed = operator_cli(&second, dir.path(), &["hub", "nodes"]);
    assert!(listed.starts_with("holder"), "{listed}");
    let rows = of_tenant(&listed);
    assert_eq!(rows.len(), 2, "two processes of {agent}:\n{listed}");
    for line in &rows {
        assert!(line.contains("serving"), "{listed}");
    }

    let status = Command::new("kill")
        .args(["-TERM", &first.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(exited) = first.child.try_wait().unwrap() {
            break exited;
        }
        assert!(Instant::now() < deadline, "serve did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exited.success(), "{exited}");
    let log = std::fs::read_to_string(&first.log).unwrap();
    assert!(
        !log.contains("listener failed") && !log.contains("WARN"),
        "the drained process complained:\n{log}"
    );
    let listed = operator_cli(&second, dir.path(), &["hub", "nodes"]);
    assert_eq!(
        of_tenant(&listed).len(),
        1,
        "the drained process left:\n{listed}"
    );
}

/// The value of the unlabelled sample `name` in `served`'s scrape (0 when absent).
fn metric(served: &Served, name: &str) -> f64 {
    let (status, scrape) = served.request("GET", "/metrics", "");
    assert_eq!(status, 200, "{scrape}");
    scrape
        .lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .map_or(0.0, |value| value.trim().parse().unwrap())
}

#[test]
fn the_hub_metrics_follow_a_session_from_a_killed_process_to_its_new_owner() {
    let Some(database) = test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let agent = format!("hub-metrics-{}", std::process::id());
    let mut first = start_with(dir.path(), "a", &database, &agent, &["--metrics"]);
    let second = start_with(dir.path(), "b", &database, &agent, &["--metrics"]);

    // A Session created and read through the first process is held there.
    let (status, created) = first.request("POST", "/v1/sessions", r#"{"requestId":"m-1"}"#);
    assert_eq!(status, 200, "{created}");
    let session: serde_json::Value = serde_json::from_str(&created).unwrap();
    let session = session["sessionId"].as_str().unwrap().to_owned();
    let (status, _) = first.request("GET", &format!("/v1/sessions/{session}/snapshot"), "");
    assert_eq!(status, 200);
    assert_eq!(metric(&first, "shiitake_hub_leases_held"), 1.0);
    assert_eq!(metric(&second, "shiitake_hub_leases_held"), 0.0);
    assert_eq!(metric(&second, "shiitake_hub_takeovers_total"), 0.0);

    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    // The survivor's heartbeat (200 ms) frees the dead process's lease; the next
    // request for the Session makes it the owner.
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(&second, "shiitake_hub_takeovers_total") < 1.0 {
        assert!(
            Instant::now() < deadline,
            "no takeover counted on the survivor"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _) = second.request("GET", &format!("/v1/sessions/{session}/snapshot"), "");
    assert_eq!(status, 200);
    assert_eq!(metric(&second, "shiitake_hub_takeovers_total"), 1.0);
    assert_eq!(metric(&second, "shiitake_hub_leases_held"), 1.0);
    assert_eq!(metric(&second, "shiitake_hub_fenced_commits_total"), 0.0);
}
