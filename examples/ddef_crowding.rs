//! Crowded DDEF cells: the GPU's near gather on charges concentrated on a surface (sphere,
//! torus, a wavy cloth sheet) against the same count uniform in a cube, at one m. Prints,
//! per shape, the busiest cell's charges, the mean near-field sources per target |S(tau)|
//! (f64 reference, same plan), each DDEF kernel's GPU time per step (timestamp queries)
//! and the gather's time per near pair: a heavy cell that serialized its workgroup would
//! show as a gather far slower per pair than the cube's.
//!
//! `cargo run --release --example ddef_crowding -- [N] [M] [STEPS]` (default 65536 1000 3;
//! STEPS 0: the structures' bytes only, nothing stepped).

use glam::DVec3;
use msc::bench::workload;
use msc::config::{CoulombMethod, DdefConfig, DdefSamples, DdefVariant};
use msc::ddef::{DdefSolver, LatticeDdef};
use msc::gpu::{GpuSolver, HeadlessOptions};
use msc::model::{System, SystemDesc};

/// The cloud's points (in a 1 m cube about the origin) moved onto `shape`.
fn place(shape: &str, p: DVec3) -> DVec3 {
    let tau = std::f64::consts::TAU;
    let (u, v) = (p.x + 0.5, p.y + 0.5);
    match shape {
        "sphere" => {
            let z = 2.0 * u - 1.0;
            let r = (1.0 - z * z).sqrt();
            0.5 * DVec3::new(r * (tau * v).cos(), r * (tau * v).sin(), z)
        }
        "torus" => {
            let (a, b) = (tau * u, tau * v);
            let ring = 0.35 + 0.12 * b.cos();
            DVec3::new(ring * a.cos(), ring * a.sin(), 0.12 * b.sin())
        }
        "cloth" => DVec3::new(
            u - 0.5,
            v - 0.5,
            0.05 * (tau * 2.0 * u).sin() * (tau * v).cos(),
        ),
        _ => p,
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("N M STEPS: whole numbers"))
        .collect();
    let n = args.first().copied().unwrap_or(65536);
    let m = args.get(1).copied().unwrap_or(1000);
    let steps = args.get(2).copied().unwrap_or(3) as u32;
    let base = workload::ddef(n, m, 1, DdefVariant::Corrected).expect("workload");
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
    for shape in ["cube", "sphere", "torus", "cloth"] {
        let s = &base.system;
        let positions: Vec<DVec3> = s.positions().iter().map(|&p| place(shape, p)).collect();
        let system = System::new(SystemDesc {
            positions: positions.clone(),
            masses: s.masses().to_vec(),
            charges: s.charges().to_vec(),
            ..Default::default()
        })
        .expect("system");
        let config = &base.config;
        let Some(d) = config.coulomb.method.ddef() else {
            unreachable!("the DDEF workload")
        };
        let d = DdefConfig {
            samples: DdefSamples::Count(m as u32),
            ..d
        };
        let plan = DdefSolver::plan_for(d, &positions, s.charges()).expect("plan");
        let cpu = LatticeDdef::new(&plan, &positions, s.charges(), config.coulomb.softening)
            .expect("reference");
        let mut per_cell = std::collections::HashMap::new();
        for l in cpu.located() {
            *per_cell.entry(l.cell).or_insert(0u32) += 1;
        }
        let busiest = per_cell.values().copied().max().unwrap_or(0);
        let near = cpu.mean_near_count();
        let mut config = config.clone();
        config.coulomb.method = CoulombMethod::Ddef(d);
        let mut gpu = GpuSolver::headless(
            &system,
            &config,
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
