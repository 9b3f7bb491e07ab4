//! Writes one `msc bench` workload as JSON for the peer benchmarks (`benches/peers/`):
//! the inputs (positions, charges, masses, pins, springs with their CSR rows, constants)
//! and the f64 CPU reference's answers (Coulomb forces at t = 0, positions after one
//! step), so every peer runs the very same workload and is checked against the oracle.
//!
//! `cargo run --release --example peer_workload -- coulomb|cloth N [SWEEPS] > workload.json`

use msc::bench::workload;
use msc::cpu::CpuSimulation;
use msc::model::COULOMB_K;
use serde_json::json;

fn flat(v: &[glam::DVec3]) -> Vec<f64> {
    v.iter().flat_map(|p| p.to_array()).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: peer_workload coulomb|cloth N [SWEEPS]";
    let (Some(kind), Some(n)) = (args.first(), args.get(1).and_then(|s| s.parse().ok())) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let sweeps = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let built = match kind.as_str() {
        "coulomb" => workload::coulomb(n),
        "cloth" => workload::cloth(n, sweeps, 0.0),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let built = built.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1);
    });
    let (system, config) = (&built.system, &built.config);
    let x0 = system.positions();
    let forces = msc::cpu::forces::coulomb_forces(x0, system.charges(), config.coulomb.softening);
    let mut sim = CpuSimulation::new(system, config).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1);
    });
    sim.step_once();
    let adj = &sim.operator().adjacency;
    let springs = system.springs();
    let out = json!({
        "workload": kind,
        "n": system.len(),
        "dt": config.dt,
        "softening": config.coulomb.softening,
        "coulomb_k": COULOMB_K,
        "gravity": config.gravity.to_array(),
        "sweeps": config.solver.iterations,
        "omega": config.solver.omega,
        "x": flat(x0),
        "q": system.charges(),
        "m": system.masses(),
        "pinned": system.pinned(),
        "spring_i": springs.iter().map(|s| s.i).collect::<Vec<_>>(),
        "spring_j": springs.iter().map(|s| s.j).collect::<Vec<_>>(),
        "stiffness": springs.iter().map(|s| s.stiffness).collect::<Vec<_>>(),
        "rest_length": springs.iter().map(|s| s.rest_length).collect::<Vec<_>>(),
        "damping": springs.iter().map(|s| s.damping).collect::<Vec<_>>(),
        "csr_offsets": adj.offsets,
        "csr_spring": adj.entries.iter().map(|e| e.spring).collect::<Vec<_>>(),
        "csr_other": adj.entries.iter().map(|e| e.other).collect::<Vec<_>>(),
        "csr_sign": adj.entries.iter().map(|e| e.sign).collect::<Vec<_>>(),
        "reference_forces": flat(&forces),
        "reference_x1": flat(&sim.current().x),
    });
    println!("{out}");
}
