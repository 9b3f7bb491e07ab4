//! Where one GPU adjoint gradient's time goes, per phase: forward steps that keep nothing
//! (the first run of two-level checkpointing), forward steps that keep their starts (the
//! recomputed segments) and reversed steps, each timed over a block of steps ended by a
//! read-back, in turn for `--rounds` rounds (the machine may be shared). The scene is
//! `msc bench`'s cloth of N particles with per-spring stiffness cotangents, as in
//! `msc bench --workload adjoint`.
//!
//!     cargo run --release --example adjoint_phases [N] [STEPS] [ROUNDS]
//!
//! N particles (default 65536), STEPS per block (default 15, the two-level segment of a
//! 200-step horizon), ROUNDS (default 3). Prints ms per step of each phase, median and
//! range over the rounds.

use msc::bench::workload;
use msc::gpu::{AdjointSetup, GpuAdjoint, HeadlessOptions};
use std::time::Instant;

fn arg(k: usize, default: u64) -> u64 {
    std::env::args()
        .nth(k)
        .map_or(default, |a| match a.parse() {
            Ok(v) if v > 0 => v,
            _ => {
                eprintln!(
                    "adjoint_phases: argument {k} must be a positive whole number, got '{a}'"
                );
                std::process::exit(2);
            }
        })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, steps, rounds) = (arg(1, 65536), arg(2, 15), arg(3, 3));
    let built = workload::cloth(n as usize, 20, 0.0)?;
    let setup = AdjointSetup {
        stiffnesses: true,
        frames: 1,
        scale: 1.0 / n as f64,
        ..AdjointSetup::default()
    };
    let options = HeadlessOptions {
        allow_software: true,
    };
    let mut gpu = GpuAdjoint::headless(&built.system, &built.config, &setup, &options)?;
    let adapter = gpu.solver().adapter().map(|a| a.name.clone());
    let target = built.system.positions().to_vec();
    // Warm-up: one block of each phase (first dispatches compile and page in).
    gpu.advance(steps, true)?;
    gpu.seed(0, &target)?;
    for _ in 0..steps {
        gpu.reverse()?;
    }
    gpu.state()?;
    let mut times: [Vec<f64>; 3] = Default::default();
    for _ in 0..rounds {
        let t = Instant::now();
        gpu.advance(steps, false)?;
        gpu.state()?;
        times[0].push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        gpu.advance(steps, true)?;
        gpu.state()?;
        times[1].push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        for _ in 0..steps {
            gpu.reverse()?;
        }
        gpu.state()?;
        times[2].push(t.elapsed().as_secs_f64());
    }
    println!(
        "{} particles, {} springs, {steps} steps per block, {rounds} rounds, adapter {}",
        built.system.len(),
        built.system.springs().len(),
        adapter.as_deref().unwrap_or("?")
    );
    for (name, v) in ["forward", "forward, kept", "reverse"]
        .iter()
        .zip(&mut times)
    {
        v.sort_by(f64::total_cmp);
        let ms = |s: f64| 1e3 * s / steps as f64;
        println!(
            "{name:<14} {:>9.2} ms/step  [{:.2}-{:.2}]",
            ms(v[v.len() / 2]),
            ms(v[0]),
            ms(v[v.len() - 1])
        );
    }
    Ok(())
}
