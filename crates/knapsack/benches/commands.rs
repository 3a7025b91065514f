//! What a Computer's command costs (`knapsack::exec`), as ratios measured in one run:
//!
//! - **Start and end**: `true` through `LocalCommands` plain and in the sandbox
//!   (prlimit + bubblewrap), against `std::process::Command` spawning `true` directly
//!   (the baseline). The sandbox's overhead is given as a ratio and in milliseconds.
//! - **Output throughput**: a command writing 100 MiB (`head -c`) through `exec`
//!   (every byte read, 64 KiB of each stream kept), plain and in the sandbox, against
//!   the same command writing to `/dev/null` (the baseline).
//!
//! `cargo bench -p knapsack --bench commands` (also run by `cargo xtask bench`). Without
//! bubblewrap the sandbox rows say so and are left out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use knapsack::exec::{
    CommandLimits, CommandLine, ExecRequest, LocalCommands, Sandbox, SandboxPolicy,
};
use tokio_util::sync::CancellationToken;

const STARTS: usize = 60;
const FLOOD_ROUNDS: usize = 5;
const FLOOD_BYTES: u64 = 100 << 20;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn request(command: CommandLine) -> ExecRequest {
    ExecRequest {
        command,
        cwd: None,
        timeout: Some(Duration::from_secs(120)),
    }
}

async fn exec_median(commands: &LocalCommands, command: &CommandLine, rounds: usize) -> Duration {
    let cancel = CancellationToken::new();
    let request = request(command.clone());
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let output = commands.exec(&request, &cancel).await.unwrap();
        samples.push(started.elapsed());
        assert_eq!(output.exit, knapsack::exec::Exit::Code(0), "{output:?}");
    }
    median(samples)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let plain = LocalCommands::new(dir.path(), CommandLimits::default()).unwrap();
    let sandboxed = match Sandbox::detect(SandboxPolicy::default()) {
        Ok(sandbox) => Some(
            LocalCommands::new(dir.path(), CommandLimits::default())
                .unwrap()
                .with_sandbox(sandbox),
        ),
        Err(error) => {
            println!("sandbox: not measured ({error})");
            None
        }
    };

    // Start and end of `true`.
    let mut direct = Vec::with_capacity(STARTS);
    for _ in 0..STARTS {
        let started = Instant::now();
        let status = std::process::Command::new("true").status().unwrap();
        direct.push(started.elapsed());
        assert!(status.success());
    }
    let direct = median(direct);
    let truth = CommandLine::Argv(vec!["true".to_owned()]);
    let through_plain = exec_median(&plain, &truth, STARTS).await;
    println!("commands: `true`, median of {STARTS}");
    println!("  std::process::Command (baseline)  {:8.2} ms", ms(direct));
    println!(
        "  LocalCommands, plain              {:8.2} ms  {:5.2}x",
        ms(through_plain),
        through_plain.as_secs_f64() / direct.as_secs_f64()
    );
    if let Some(sandboxed) = &sandboxed {
        let through_sandbox = exec_median(sandboxed, &truth, STARTS).await;
        println!(
            "  LocalCommands, sandboxed          {:8.2} ms  {:5.2}x  (+{:.2} ms over plain)",
            ms(through_sandbox),
            through_sandbox.as_secs_f64() / direct.as_secs_f64(),
            ms(through_sandbox) - ms(through_plain)
        );
    }

    // 100 MiB of output.
    let to_null = CommandLine::Shell(format!("head -c {FLOOD_BYTES} /dev/zero > /dev/null"));
    let flood = CommandLine::Shell(format!("head -c {FLOOD_BYTES} /dev/zero"));
    let baseline = exec_median(&plain, &to_null, FLOOD_ROUNDS).await;
    let mib = (FLOOD_BYTES >> 20) as f64;
    let rate = |took: Duration| mib / took.as_secs_f64();
    println!("commands: {mib} MiB written, median of {FLOOD_ROUNDS}");
    println!(
        "  to /dev/null (baseline)           {:8.1} ms  {:7.0} MiB/s",
        ms(baseline),
        rate(baseline)
    );
    let read_plain = exec_median(&plain, &flood, FLOOD_ROUNDS).await;
    println!(
        "  read by exec, plain               {:8.1} ms  {:7.0} MiB/s  {:5.2}x",
        ms(read_plain),
        rate(read_plain),
        read_plain.as_secs_f64() / baseline.as_secs_f64()
    );
    if let Some(sandboxed) = &sandboxed {
        let read_sandboxed = exec_median(sandboxed, &flood, FLOOD_ROUNDS).await;
        println!(
            "  read by exec, sandboxed           {:8.1} ms  {:7.0} MiB/s  {:5.2}x",
            ms(read_sandboxed),
            rate(read_sandboxed),
            read_sandboxed.as_secs_f64() / baseline.as_secs_f64()
        );
    }
}
