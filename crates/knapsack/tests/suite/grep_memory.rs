//! `grep` memory does not grow with the longest line: a workspace with a 100 MiB
//! single-line file is searched in a child process whose peak resident memory is read
//! before and after, and the long file is reported as skipped.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::Command;

use knapsack::limits::{GREP_BUFFER_LIMIT_BYTES, GREP_SEARCHERS_MAX};
use knapsack::{Files, GrepInput, GrepMatch, GrepOutput, LocalFiles, SkipReason, SkippedFile};

/// Where the child finds the workspace; unset, the child test does nothing.
const DIR_VARIABLE: &str = "KNAPSACK_GREP_MEMORY_DIR";
/// The line the child prints its figures on.
const REPORT: &str = "grep-memory-report ";
const MIB: usize = 1024 * 1024;

/// Writes `needle`, then `len` bytes of `x`, then a newline, a MiB at a time.
fn write_long_line(path: &Path, len: usize) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    file.write_all(b"needle ").unwrap();
    let chunk = vec![b'x'; MIB];
    for _ in 0..len / MIB {
        file.write_all(&chunk).unwrap();
    }
    file.write_all(b"\n").unwrap();
    file.flush().unwrap();
}

/// The process's peak resident set (`VmHWM`), in bytes.
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .unwrap();
    let kib: usize = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

#[test]
fn grep_over_a_100_mib_line_stays_within_its_memory_bound_and_skips_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write_long_line(&dir.path().join("bundle.min.js"), 100 * MIB);
    std::fs::write(dir.path().join("notes.txt"), "a needle here\n").unwrap();

    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::grep_memory::child_greps_and_reports_its_peak_memory",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_VARIABLE, dir.path())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    let report: serde_json::Value = printed
        .lines()
        // The harness prints the test's name on the same line, before the report.
        .find_map(|line| line.split_once(REPORT).map(|(_, json)| json))
        .map(|json| serde_json::from_str(json).unwrap())
        .unwrap_or_else(|| panic!("the child printed no report: {printed}"));

    let output: GrepOutput = serde_json::from_value(report["output"].clone()).unwrap();
    assert_eq!(
        output,
        GrepOutput {
            matches: vec![GrepMatch {
                path: "notes.txt".to_owned(),
                line: 1,
                text: "a needle here".to_owned(),
            }],
            truncated: false,
            skipped: vec![SkippedFile {
                path: "bundle.min.js".to_owned(),
                reason: SkipReason::LineTooLong,
            }],
        }
    );
    // The documented bound: one buffer per searcher. The slack covers the runtime's
    // threads and the walk; the unbounded searcher grew by more than the line (100 MiB).
    let searchers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(GREP_SEARCHERS_MAX);
    let bound = searchers * GREP_BUFFER_LIMIT_BYTES + 16 * MIB;
    let grown = report["grownBytes"].as_u64().unwrap();
    println!(
        "grep over a 100 MiB line: peak RSS grew by {:.1} MiB (bound {:.1} MiB)",
        grown as f64 / MIB as f64,
        bound as f64 / MIB as f64
    );
    assert!(
        grown < bound as u64,
        "peak RSS grew by {grown} bytes, more than {bound}"
    );
}

/// Runs in the child of the test above: greps its workspace and prints what it found
/// and how much the peak resident memory grew meanwhile.
#[test]
#[ignore = "run in a child process by grep_over_a_100_mib_line_stays_within_its_memory_bound_and_skips_the_file"]
fn child_greps_and_reports_its_peak_memory() {
    let Some(dir) = std::env::var_os(DIR_VARIABLE) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let files = LocalFiles::new(&dir).unwrap();
    let before = peak_rss();
    let output = runtime
        .block_on(files.grep(GrepInput {
            pattern: "needle".to_owned(),
            path: ".".to_owned(),
            glob: None,
            case_insensitive: false,
        }))
        .unwrap();
    let grown = peak_rss().saturating_sub(before);
    let report = serde_json::json!({ "output": output, "grownBytes": grown });
    println!("{REPORT}{report}");
}
