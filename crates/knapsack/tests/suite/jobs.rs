//! Background jobs (`LocalCommands::start_job`), with real processes: the call answers
//! at once, output is read from a cursor (and what the ring dropped is counted), a kill
//! ends the whole job, each Session sees its own jobs only, and the table's bounds
//! refuse a job past them while every job in the way runs, at the bound and one past.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use knapsack::exec::{
    CommandLimits, CommandLine, ExecError, ExecRequest, Exit, JobId, JobLimits, LocalCommands,
    Stopped,
};

fn shell(line: &str) -> ExecRequest {
    ExecRequest {
        command: CommandLine::Shell(line.to_owned()),
        cwd: None,
        timeout: None,
    }
}

/// Reads `job` until its output holds `wanted` (at most 10 s); the output and cursor.
async fn read_until(commands: &LocalCommands, job: &JobId, wanted: &str) -> (String, u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    let mut cursor = 0;
    loop {
        let output = commands.job_output(job, "session-a", Some(cursor)).unwrap();
        seen.push_str(&output.output);
        cursor = output.cursor;
        if seen.contains(wanted) {
            return (seen, cursor);
        }
        assert!(
            Instant::now() < deadline,
            "never saw {wanted:?}, only {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_job_answers_at_once_and_its_output_is_read_from_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let commands = LocalCommands::new(dir.path(), CommandLimits::default()).unwrap();
    let started = Instant::now();
    let job = commands
        .start_job(
            &shell("echo first; echo err >&2; sleep 0.3; echo second; exit 4"),
            "session-a",
        )
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(250));
    assert!(job.running);
    assert_eq!(
        job.command,
        "echo first; echo err >&2; sleep 0.3; echo second; exit 4"
    );
    let (seen, cursor) = read_until(&commands, &job.job, "first\n").await;
    assert!(!seen.contains("second"), "{seen:?}");
    let (rest, _) = read_until(&commands, &job.job, "second\n").await;
    // Read from the cursor: only what came after.
    let later = commands
        .job_output(&job.job, "session-a", Some(cursor))
        .unwrap();
    assert!(!later.output.contains("first"), "{later:?}");
    assert!(rest.contains("err\n"), "both streams: {rest:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let ended = loop {
        let listed = commands.list_jobs("session-a");
        if !listed[0].running {
            break listed[0].clone();
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(ended.exit, Some(Exit::Code(4)));
    assert_eq!(ended.stopped, None);
}

#[tokio::test]
async fn a_kill_ends_the_job_and_another_session_cannot_see_it() {
    let dir = tempfile::tempdir().unwrap();
    let commands = LocalCommands::new(dir.path(), CommandLimits::default()).unwrap();
    let job = commands
        .start_job(&shell("trap '' TERM; echo up; sleep 100"), "session-a")
        .unwrap();
    read_until(&commands, &job.job, "up\n").await;
    assert_eq!(
        commands
            .job_output(&job.job, "session-b", None)
            .unwrap_err(),
        ExecError::NoSuchJob {
            job: job.job.clone()
        }
    );
    assert!(commands.list_jobs("session-b").is_empty());
    assert_eq!(
        commands.kill_job(&job.job, "session-b").await.unwrap_err(),
        ExecError::NoSuchJob {
            job: job.job.clone()
        }
    );
    let started = Instant::now();
    let killed = commands.kill_job(&job.job, "session-a").await.unwrap();
    assert!(!killed.running, "{killed:?}");
    assert_eq!(killed.stopped, Some(Stopped::Cancelled));
    assert_eq!(killed.exit, Some(Exit::Signal(9)), "it ignored SIGTERM");
    assert!(started.elapsed() < Duration::from_secs(6));
    let unknown = JobId::new("job-000000-999");
    assert_eq!(
        commands
            .job_output(&unknown, "session-a", None)
            .unwrap_err(),
        ExecError::NoSuchJob { job: unknown }
    );
}

#[tokio::test]
async fn the_ring_keeps_the_latest_output_and_counts_what_it_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let limits = CommandLimits {
        jobs: JobLimits {
            ring_bytes: 1000,
            ..JobLimits::default()
        },
        output_bytes: 600,
        ..CommandLimits::default()
    };
    let commands = LocalCommands::new(dir.path(), limits).unwrap();
    let job = commands
        .start_job(
            &shell("head -c 5000 /dev/zero | tr '\\0' a; echo; echo end"),
            "session-a",
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while commands.list_jobs("session-a")[0].running {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = commands.job_output(&job.job, "session-a", Some(0)).unwrap();
    assert_eq!(first.summary.output_bytes, 5005);
    assert_eq!(
        first.skipped_bytes, 4005,
        "only the last 1000 bytes are kept"
    );
    assert_eq!(first.output.len(), 600, "one read is bounded");
    let second = commands
        .job_output(&job.job, "session-a", Some(first.cursor))
        .unwrap();
    assert_eq!(second.skipped_bytes, 0);
    assert!(second.output.ends_with("a\nend\n"), "{second:?}");
    assert_eq!(second.cursor, 5005);
}

#[tokio::test]
async fn the_job_bounds_hold_at_their_edge_and_one_past() {
    let dir = tempfile::tempdir().unwrap();
    let limits = CommandLimits {
        jobs: JobLimits {
            per_owner: 2,
            per_computer: 3,
            ..JobLimits::default()
        },
        ..CommandLimits::default()
    };
    let commands = LocalCommands::new(dir.path(), limits).unwrap();
    let a1 = commands.start_job(&shell("sleep 100"), "a").unwrap();
    commands.start_job(&shell("sleep 100"), "a").unwrap();
    assert_eq!(
        commands.start_job(&shell("sleep 100"), "a").unwrap_err(),
        ExecError::TooManyJobs {
            limit: 2,
            scope: "this Session"
        }
    );
    commands.start_job(&shell("sleep 100"), "b").unwrap();
    assert_eq!(
        commands.start_job(&shell("sleep 100"), "b").unwrap_err(),
        ExecError::TooManyJobs {
            limit: 3,
            scope: "this Computer"
        }
    );
    // A finished job gives its place to the next one.
    commands.kill_job(&a1.job, "a").await.unwrap();
    let b2 = commands.start_job(&shell("sleep 100"), "b").unwrap();
    let prefix = a1.job.as_str().strip_suffix("-1").unwrap();
    assert!(prefix.starts_with("job-"), "{prefix}");
    assert_eq!(b2.job.as_str(), format!("{prefix}-4"));
    let listed: Vec<String> = commands
        .list_jobs("a")
        .into_iter()
        .map(|job| job.job.to_string())
        .collect();
    assert_eq!(listed, [format!("{prefix}-2")]);
    // Another life of the host draws another prefix: its ids never name these jobs.
    let again = LocalCommands::new(dir.path(), CommandLimits::default()).unwrap();
    let other = again.start_job(&shell("true"), "a").unwrap();
    assert_ne!(other.job.as_str(), a1.job.as_str());
}
