//! `flotilla-fuzz`: runs every fuzz target for many iterations (seeds mutated and random bytes)
//! and prints what each accepted and rejected. A panic stops the run, writes the input to
//! `--failures DIR` and exits 1.

use anyhow::Context;
use clap::Parser;
use flotilla_fuzz::{Outcome, TARGETS, mutate};
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::time::Instant;

/// Long fuzz runs of Flotilla's decoders.
#[derive(Parser, Debug)]
#[command(name = "flotilla-fuzz", version)]
struct Args {
    /// Iterations per target.
    #[arg(long, default_value_t = 100_000)]
    iterations: u64,
    /// Only this target (default: all).
    #[arg(long)]
    target: Option<String>,
    /// Random seed (runs are repeatable).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where a crashing input is written.
    #[arg(long, default_value = "fuzz-failures")]
    failures: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let mut total = 0u64;
    let started = Instant::now();
    for t in TARGETS {
        if args.target.as_deref().is_some_and(|n| n != t.name) {
            continue;
        }
        let seeds = (t.seeds)();
        let (mut accepted, mut rejected) = (0u64, 0u64);
        let begun = Instant::now();
        for i in 0..args.iterations {
            let input = if i % 4 == 0 || seeds.is_empty() {
                let n = rng.random_range(0..256);
                (0..n).map(|_| rng.random()).collect()
            } else {
                let mut input = seeds[rng.random_range(0..seeds.len())].clone();
                // Stack mutations now and then, to wander further from the seed.
                for _ in 0..rng.random_range(1..=3) {
                    input = mutate(&input, &mut rng);
                }
                input
            };
            match std::panic::catch_unwind(|| (t.run)(&input)) {
                Ok(Outcome::Accepted) => accepted += 1,
                Ok(Outcome::Rejected(_)) => rejected += 1,
                Err(_) => {
                    std::fs::create_dir_all(&args.failures)?;
                    let file = args.failures.join(format!("{}-{i}.bin", t.name));
                    std::fs::write(&file, &input)
                        .with_context(|| format!("writing {}", file.display()))?;
                    anyhow::bail!(
                        "{} panicked on iteration {i}; input in {}",
                        t.name,
                        file.display()
                    );
                }
            }
        }
        total += args.iterations;
        println!(
            "{:<26} {:>12} iterations  {:>10} accepted  {:>12} rejected  {:>8.1} s",
            t.name,
            args.iterations,
            accepted,
            rejected,
            begun.elapsed().as_secs_f64()
        );
    }
    println!(
        "{total} inputs, no panic, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
