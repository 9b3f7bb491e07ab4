//! Crowded DDEF cells: the GPU's near gather on charges concentrated on a surface (sphere,
//! torus, a wavy cloth sheet: `msc bench --cloud`'s shapes) against the same count uniform
//! in a cube, at one m. Prints, per shape, the busiest cell's charges, the mean near-field
//! sources per target |S(tau)| (f64 reference, same plan), each DDEF kernel's GPU time
//! per step (timestamp queries) and the gather's time per near pair: a heavy cell that
//! serialized its workgroup would show as a gather far slower per pair than the cube's.
//!
//! `cargo run --release --example ddef_crowding -- [N] [M] [STEPS]` (default 65536 1000 3;
//! STEPS 0: the structures' bytes only, nothing stepped).

use msc::bench::{workload, Cloud};
use msc::config::DdefVariant;
use msc::ddef::DdefSolver;
use msc::gpu::{GpuSolver, HeadlessOptions};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("N M STEPS: whole numbers"))
        .collect();
    let n = args.first().copied().unwrap_or(65536);
    let m = args.get(1).copied().unwrap_or(1000);
    let steps = args.get(2).copied().unwrap_or(3) as u32;
    println!(
        "{:<7} {:>7} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>12}",
        "shape",
        "n",
        "max cell",
        "mean |S|",
        "MB (max)",
        "far ms",
        "gather ms",
        "ddef ms",
        "step ms",
        "gather ns/pair"
    );
    for cloud in Cloud::ALL {
        let shape = cloud.name();
        let built = workload::ddef(n, m, 1, DdefVariant::Corrected, cloud).expect("workload");
        let (system, config) = (&built.system, &built.config);
        let positions = system.positions();
        let Some(d) = config.coulomb.method.ddef() else {
            unreachable!("the DDEF workload")
        };
        let cpu =
            DdefSolver::reference_for(d, positions, system.charges(), config.coulomb.softening)
                .expect("reference");
        let busiest = cpu.busiest_cell();
        let near = cpu.mean_near_count();
        let mut gpu = GpuSolver::headless(
            system,
            config,
            &HeadlessOptions {
                allow_software: true,
            },
        )
        .expect("GPU solver");
        let (bytes, largest) = gpu.ddef_structure_bytes().expect("DDEF structures");
        let mb = format!("{:.1} ({:.1})", bytes as f64 * 1e-6, largest as f64 * 1e-6);
        if steps == 0 {
            println!("{shape:<7} {n:>7} {busiest:>9} {near:>10.0} {mb:>9}");
            continue;
        }
        let times = gpu.profile(steps).expect("profile (timestamp queries)");
        let per_step = |pred: &dyn Fn(&str) -> bool| {
            times
                .iter()
                .filter(|t| pred(t.kernel))
                .map(|t| t.seconds)
                .sum::<f64>()
                * 1e3
                / f64::from(steps)
        };
        let far = per_step(&|k| k.starts_with("ddef_far"));
        let gather = per_step(&|k| k == "ddef_gather");
        let ddef = per_step(&|k| k.starts_with("ddef_"));
        let all = per_step(&|_| true);
        println!(
            "{shape:<7} {n:>7} {busiest:>9} {near:>10.0} {mb:>9} {far:>9.1} {gather:>9.1} {ddef:>9.1} {all:>10.1} {:>12.3}",
            gather * 1e6 / (n as f64 * near)
        );
    }
}
