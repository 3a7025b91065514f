//! Times one `LocalFiles::grep` over a tree, for the comparison with `rg` in
//! `docs/benchmarks.md`: `cargo run --release -p knapsack --example grep_bench -- ROOT PATTERN`.

use std::time::Instant;

use knapsack::{Files, GrepInput, LocalFiles};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args.next().ok_or("usage: grep_bench ROOT PATTERN [RUNS]")?;
    let pattern = args.next().ok_or("usage: grep_bench ROOT PATTERN [RUNS]")?;
    let runs: usize = args.next().map_or(Ok(5), |r| r.parse())?;
    let files = LocalFiles::new(&root)?;
    let mut best = f64::MAX;
    for _ in 0..runs {
        let started = Instant::now();
        let output = files
            .grep(GrepInput {
                pattern: pattern.clone(),
                path: ".".into(),
                glob: None,
                case_insensitive: false,
            })
            .await?;
        let seconds = started.elapsed().as_secs_f64();
        best = best.min(seconds);
        println!(
            "{seconds:.3}s matches={} truncated={}",
            output.matches.len(),
            output.truncated
        );
    }
    println!("best {best:.3}s");
    Ok(())
}
