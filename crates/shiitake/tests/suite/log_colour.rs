//! Logs sent to a file or a pipe carry no ANSI colour codes; colour is for a terminal
//! (or when `CLICOLOR_FORCE` asks for it), as with the rest of the CLI's output.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};

use crate::support::{binary, free_port};

/// What a client command logs at `debug` on a piped stderr, with `env` set.
fn piped_log(env: &[(&str, &str)]) -> String {
    let output = Command::new(binary())
        .args(["sessions", "--token", "not-checked"])
        .arg("--url")
        .arg(format!("http://127.0.0.1:{}", free_port()))
        .env("SHIITAKE_LOG", "debug")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let plain = piped_log(&[]);
    assert!(plain.contains("DEBUG"), "a debug line was logged: {plain}");
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    // Asked for, colour does reach the log: the check above could fail.
    let forced = piped_log(&[("CLICOLOR_FORCE", "1")]);
    assert!(forced.contains("\u{1b}["), "{forced:?}");
}
