//! `cargo xtask fuzz [--seconds N] [TARGET...]`: each fuzz target for a bounded time.
//!
//! With cargo-fuzz installed (`.ci/run` installs it from crates.io), each target of
//! `crates/shiitake-fuzz` runs under libFuzzer for N seconds (default 60) from its
//! seed corpus in `crates/shiitake-fuzz/corpus/<target>/`; a crash fails the command
//! and leaves its input under `crates/shiitake-fuzz/artifacts/`. It runs on the
//! machine's one (stable) toolchain: `RUSTC_BOOTSTRAP=1` lets rustc take the `-Z`
//! flags cargo-fuzz passes, and without a sanitizer (`-s none`; the targets are safe
//! Rust, so libFuzzer's coverage and panics are what find bugs) no nightly runtime is
//! needed. Without cargo-fuzz, the targets run as the bounded proptest smoke tests
//! (`cargo test -p shiitake-fuzz`), and the command says so.

use std::process::Command;

use crate::util::{cargo, run_checked, workspace_root};

/// The targets, as `crates/shiitake-fuzz/Cargo.toml` names its binaries.
const TARGETS: [&str; 5] = [
    "patch_grammar",
    "command_decoder",
    "sse_frames",
    "schema_subset",
    "path_resolution",
];

fn has_cargo_fuzz() -> bool {
    Command::new(cargo())
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Parses the flags and runs the targets.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut seconds = 60u32;
    let mut chosen = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--seconds" {
            seconds = args
                .next()
                .and_then(|value| value.parse().ok())
                .filter(|&n| n > 0)
                .ok_or("fuzz: --seconds takes a positive number")?;
        } else if TARGETS.contains(&arg.as_str()) {
            chosen.push(arg.as_str());
        } else {
            return Err(format!(
                "fuzz: unknown target `{arg}`; the targets are {}",
                TARGETS.join(", ")
            ));
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.to_vec();
    }
    let root = workspace_root();
    let fuzz_dir = root.join("crates/shiitake-fuzz");
    if !has_cargo_fuzz() {
        eprintln!(
            "fuzz: cargo-fuzz is not installed (`cargo install cargo-fuzz --locked`); running \
             the targets as bounded smoke tests"
        );
        return run_checked(Command::new(cargo()).current_dir(&root).args([
            "test",
            "-p",
            "shiitake-fuzz",
        ]));
    }
    for target in chosen {
        eprintln!("fuzz: {target} for {seconds} s");
        // libFuzzer writes new inputs into the first corpus directory; keep the checked-in
        // seeds read-only by giving it a scratch directory first.
        let scratch = std::env::temp_dir().join(format!("shiitake-fuzz-{target}"));
        std::fs::create_dir_all(&scratch)
            .map_err(|error| format!("fuzz: {}: {error}", scratch.display()))?;
        run_checked(
            Command::new(cargo())
                .current_dir(&root)
                .env("RUSTC_BOOTSTRAP", "1")
                .args(["fuzz", "run", "--sanitizer", "none", "--fuzz-dir"])
                .arg(&fuzz_dir)
                .args(["--features", "libfuzzer", target])
                .arg(&scratch)
                .arg(fuzz_dir.join("corpus").join(target))
                .arg("--")
                .arg(format!("-max_total_time={seconds}")),
        )?;
    }
    Ok(())
}
