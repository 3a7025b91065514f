//! The rule and the probe, on environments given to them (never the test
//! process's own).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::TcpListener;

use super::*;

/// An environment holding exactly `vars`.
fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    move |name: &str| vars.get(name).cloned()
}

/// A loopback URL of `scheme` whose port nothing listens on.
fn dead_url(scheme: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("{scheme}://user:secret@127.0.0.1:{port}/db")
}

#[test]
fn a_present_service_runs_whether_required_or_not() {
    for required in [false, true] {
        for service in Service::ALL {
            assert_eq!(
                decide(service, required, Ok(7), "t"),
                Decision::Run(7),
                "{service} required={required}"
            );
        }
    }
}

#[test]
fn a_missing_service_that_is_required_fails_naming_it_and_how_to_provide_it() {
    let found: Result<(), Missing> = Err(Missing::new("SHIITAKE_TEST_POSTGRES_URL is not set"));
    assert_eq!(
        decide(Service::Postgres, true, found, "leases::fenced"),
        Decision::Fail(
            "PostgreSQL is required (SHIITAKE_REQUIRE_SERVICES=1) but \
             SHIITAKE_TEST_POSTGRES_URL is not set: run `cargo xtask test`, or export \
             SHIITAKE_TEST_POSTGRES_URL=$(cargo xtask postgres start | tail -1)"
                .to_owned()
        )
    );
}

#[test]
fn a_missing_service_that_is_not_required_skips_with_one_loud_line() {
    let found: Result<(), Missing> = Err(Missing::new("SHIITAKE_CHROMIUM is not set"));
    let Decision::Skip(line) = decide(Service::Chromium, false, found, "web_page") else {
        panic!("not a skip");
    };
    assert!(!line.contains('\n'), "{line}");
    assert!(
        line.starts_with("SKIPPED web_page: Chromium is missing"),
        "{line}"
    );
    for part in [
        "(SHIITAKE_CHROMIUM is not set)",
        "passes without testing anything",
        "SHIITAKE_CHROMIUM=$(cargo xtask chromium | tail -1)",
        "SHIITAKE_REQUIRE_SERVICES=1",
    ] {
        assert!(line.contains(part), "{part:?} in {line}");
    }
}

#[test]
fn every_service_names_its_variable_in_its_remedy() {
    for service in Service::ALL {
        assert!(
            service.remedy().contains(service.variable()),
            "{service}: {}",
            service.remedy()
        );
        assert!(service.remedy().contains("cargo xtask test"));
    }
}

#[test]
fn required_means_set_to_anything_but_empty_or_zero() {
    assert!(!required(&env(&[])));
    assert!(!required(&env(&[(REQUIRE_VAR, "")])));
    assert!(!required(&env(&[(REQUIRE_VAR, "0")])));
    assert!(required(&env(&[(REQUIRE_VAR, "1")])));
    assert!(required(&env(&[(REQUIRE_VAR, "yes")])));
}

#[test]
fn an_unset_or_empty_url_is_missing() {
    for value in [None, Some(String::new()), Some("  ".to_owned())] {
        assert_eq!(
            probe_url(Service::LocalModel, value),
            Err(Missing::new("SHIITAKE_TEST_LOCAL_MODEL_URL is not set"))
        );
    }
}

#[test]
fn a_url_that_answers_is_present_and_one_that_does_not_is_missing() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    assert_eq!(
        probe_url(Service::LocalModel, Some(url.clone())),
        Ok(url.clone())
    );
    drop(listener);
    let dead = dead_url("postgres");
    let missing = probe_url(Service::Postgres, Some(dead)).unwrap_err();
    assert!(
        missing
            .reason()
            .starts_with("SHIITAKE_TEST_POSTGRES_URL names 127.0.0.1:"),
        "{missing}"
    );
    assert!(
        missing.reason().contains("which does not answer"),
        "{missing}"
    );
    assert!(
        !missing.reason().contains("secret"),
        "no password in {missing}"
    );
}

#[test]
fn a_url_without_a_host_is_taken_as_it_is_and_garbage_is_missing() {
    let socket = "postgres:///shiitake?host=/var/run/postgresql".to_owned();
    assert_eq!(
        probe_url(Service::Postgres, Some(socket.clone())),
        Ok(socket)
    );
    assert_eq!(
        probe_url(Service::Postgres, Some("host=localhost dbname=x".into())),
        Err(Missing::new(
            "SHIITAKE_TEST_POSTGRES_URL is not a URL of the form scheme://host:port/…"
        ))
    );
}

#[test]
fn addresses_are_read_with_their_default_ports() {
    let tcp = |host: &str, port| {
        Some(Address::Tcp {
            host: host.to_owned(),
            port,
        })
    };
    assert_eq!(
        Address::parse("postgres://u:p@db.local/x"),
        tcp("db.local", 5432)
    );
    assert_eq!(
        Address::parse("http://127.0.0.1:8090/v1"),
        tcp("127.0.0.1", 8090)
    );
    assert_eq!(Address::parse("https://[::1]/v1"), tcp("::1", 443));
    assert_eq!(Address::parse("postgres://[::1]:54329"), tcp("::1", 54329));
    assert_eq!(Address::parse("ftp://host/x"), None);
    assert_eq!(Address::parse("http://host:notaport/"), None);
    assert_eq!(Address::parse("postgres:///db"), Some(Address::NoHost));
}

#[test]
fn the_whole_rule_on_a_given_environment() {
    let dead = dead_url("postgres");
    let required_and_dead = env(&[
        (REQUIRE_VAR, "1"),
        ("SHIITAKE_TEST_POSTGRES_URL", dead.as_str()),
    ]);
    let Decision::Fail(message) = check_url_in(Service::Postgres, &required_and_dead, "t") else {
        panic!("a dead URL must fail when required");
    };
    assert!(
        message.starts_with("PostgreSQL is required (SHIITAKE_REQUIRE_SERVICES=1) but "),
        "{message}"
    );
    let Decision::Skip(line) = check_url_in(Service::LocalModel, &env(&[]), "t") else {
        panic!("an unset URL skips when not required");
    };
    assert!(
        line.starts_with("SKIPPED t: The local model is missing"),
        "{line}"
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let present = env(&[
        (REQUIRE_VAR, "1"),
        ("SHIITAKE_TEST_LOCAL_MODEL_URL", url.as_str()),
    ]);
    assert_eq!(
        check_url_in(Service::LocalModel, &present, "t"),
        Decision::Run(url)
    );
}

#[test]
fn applying_a_run_gives_what_was_found_and_a_skip_writes_its_line_and_gives_none() {
    let mut out = Vec::new();
    assert_eq!(Decision::Run(3).apply_to(&mut out), Some(3));
    assert!(out.is_empty());
    let skip = Decision::<u8>::Skip("SKIPPED t: PostgreSQL is missing".into());
    assert_eq!(skip.apply_to(&mut out), None);
    assert_eq!(out, b"SKIPPED t: PostgreSQL is missing\n");
}

#[test]
#[should_panic(expected = "PostgreSQL is required")]
fn applying_a_failure_panics_with_its_message() {
    Decision::<()>::Fail("PostgreSQL is required (…)".into()).apply_to(&mut Vec::new());
}
