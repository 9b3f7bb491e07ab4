//! Energy terms (docs/physics.md §10). Mirrors `gpu/kernels/reductions/energy_reduce.wgsl`.
//!
//! Sums run in a fixed order (per particle or per pair row, then sequentially), so the
//! values are deterministic whatever the thread count.

use crate::config::{Config, CoulombMethod, ExternalField};
use crate::measures::Energies;
use crate::model::{Spring, State, System, COULOMB_K};
use crate::physics::point_charge;
use glam::DVec3;
use rayon::prelude::*;

/// Kinetic, elastic, Coulomb, gravity and external energies of `state`.
pub fn energies(system: &System, config: &Config, state: &State) -> Energies {
    let x = &state.x;
    let kinetic = kinetic_energy(&state.v, system.masses());
    let elastic = elastic_energy(x, system.springs());
    let coulomb = match config.coulomb.method {
        // DDEF approximates the forces only; the reported energy stays the exact pair sum.
        CoulombMethod::AllPairs | CoulombMethod::Ddef(_) => {
            coulomb_energy(x, system.charges(), config.coulomb.softening)
        }
        CoulombMethod::None => 0.0,
    };
    let gravity = gravity_energy(x, system.masses(), config.gravity);
    let external = external_energy(x, system.charges(), config, state.t);
    Energies::new(kinetic, elastic, coulomb, gravity, external)
}

/// sum 1/2 m v^2.
pub fn kinetic_energy(v: &[DVec3], m: &[f64]) -> f64 {
    v.iter()
        .zip(m)
        .map(|(v, m)| 0.5 * m * v.length_squared())
        .sum()
}

/// sum k (l - L)^2 / 2 (docs/physics.md (2.1)).
pub fn elastic_energy(x: &[DVec3], springs: &[Spring]) -> f64 {
    springs
        .iter()
        .map(|s| {
            let e = (x[s.j as usize] - x[s.i as usize]).length() - s.rest_length;
            0.5 * s.stiffness * e * e
        })
        .sum()
}

/// sum over pairs i < j of charged particles of k_c q_i q_j / sqrt(r^2 + eps^2), the
/// potential of [`super::forces::coulomb_forces`]. A coincident pair with eps = 0 is never
/// skipped: its term is infinite, so a run that brings two charges together stops as
/// diverged (scenes refuse such pairs at load: `Config::check_coulomb`).
pub fn coulomb_energy(x: &[DVec3], q: &[f64], softening: f64) -> f64 {
    let charged: Vec<(DVec3, f64)> = (0..x.len())
        .filter(|&i| q[i] != 0.0)
        .map(|i| (x[i], q[i]))
        .collect();
    let eps2 = softening * softening;
    let rows: Vec<f64> = (0..charged.len())
        .into_par_iter()
        .with_min_len(64)
        .map(|a| {
            let (xa, qa) = charged[a];
            let mut s = 0.0;
            for &(xb, qb) in &charged[a + 1..] {
                s += point_charge::potential(xa - xb, qb, eps2);
            }
            qa * s
        })
        .collect();
    COULOMB_K * rows.iter().sum::<f64>()
}

/// -sum m g . x.
pub fn gravity_energy(x: &[DVec3], m: &[f64], g: DVec3) -> f64 {
    -x.iter().zip(m).map(|(x, m)| m * g.dot(*x)).sum::<f64>()
}

/// External point charges at time `t` (k_c q_i q_e / sqrt(r^2 + eps^2)) plus a uniform
/// field's -q E . x. A swirl field has no potential and contributes 0. An external charge
/// on a charged particle with eps = 0 gives an infinite term, as in [`coulomb_energy`];
/// an external charge of 0 C contributes nothing wherever it is.
pub fn external_energy(x: &[DVec3], q: &[f64], config: &Config, t: f64) -> f64 {
    let charges: Vec<(DVec3, f64)> = config
        .external_charges
        .iter()
        .filter(|c| c.charge != 0.0)
        .map(|c| (c.position_at(t), c.charge))
        .collect();
    let eps2 = config.coulomb.softening * config.coulomb.softening;
    let uniform = match config.external_field {
        Some(ExternalField::Uniform(e)) => e,
        _ => DVec3::ZERO,
    };
    let mut total = 0.0;
    for (xi, &qi) in x.iter().zip(q) {
        if qi == 0.0 {
            continue;
        }
        let mut phi = 0.0;
        for &(xe, qe) in &charges {
            phi += point_charge::potential(*xi - xe, qe, eps2);
        }
        total += qi * (COULOMB_K * phi - uniform.dot(*xi));
    }
    total
}
