//! Forces and their Jacobians (DESIGN section 1). Mirrors `spring_assemble.wgsl`,
//! `coulomb_tiled.wgsl`, and `external_forces.wgsl` (with `external_force` in
//! `gpu/shader/physics.wgsl`).
//!
//! Conventions: d = x_j - x_i, l = |d|, n = d / l; every per-spring quantity is "on i"
//! and enters particle j with the opposite sign (the CSR `sign`). A degenerate spring
//! (l = 0) has no axis: n = 0, its force is zero and its blocks drop the axis terms.

use crate::config::Config;
use crate::model::{Adjacency, Spring, COULOMB_K};
use crate::physics::{point_charge, spring};
use glam::{DMat3, DVec3};
use rayon::prelude::*;

/// Rows per rayon task for per-particle and per-spring loops; smaller inputs run inline.
pub(crate) const PAR_CHUNK: usize = 1024;

/// Runs `kernel(i, &mut out[i])` for every i: sequentially for short slices, else in
/// parallel chunks of at least [`PAR_CHUNK`] (each element is written once, so the result
/// does not depend on the split).
pub(crate) fn for_each_indexed<T: Send>(
    out: &mut [T],
    kernel: impl Fn((usize, &mut T)) + Sync + Send,
) {
    if out.len() <= PAR_CHUNK {
        out.iter_mut().enumerate().for_each(kernel);
    } else {
        out.par_iter_mut()
            .enumerate()
            .with_min_len(PAR_CHUNK)
            .for_each(kernel);
    }
}

/// Unit axis n = (x_j - x_i) / l and the length l; n = 0 when l = 0.
#[inline]
pub fn spring_axis(xi: DVec3, xj: DVec3) -> (DVec3, f64) {
    let d = xj - xi;
    let l = d.length();
    if l > 0.0 {
        (d / l, l)
    } else {
        (DVec3::ZERO, 0.0)
    }
}

/// n n^T, exactly symmetric (n_a n_b and n_b n_a are the same product).
#[inline]
pub fn outer(n: DVec3) -> DMat3 {
    DMat3::from_cols(n * n.x, n * n.y, n * n.z)
}

/// Elastic force on particle i: k (l - L) n, n = (x_j - x_i) / l (seed 002 eq. 4).
pub fn spring_elastic_force(xi: DVec3, xj: DVec3, s: &Spring) -> DVec3 {
    let (n, l) = spring_axis(xi, xj);
    n * (s.stiffness * (l - s.rest_length))
}

/// Elastic plus damping force on i: k (l - L) n + c ((v_j - v_i) . n) n (seed 003).
pub fn spring_force(xi: DVec3, xj: DVec3, vi: DVec3, vj: DVec3, s: &Spring) -> DVec3 {
    let (n, l) = spring_axis(xi, xj);
    n * (s.stiffness * (l - s.rest_length) + s.damping * (vj - vi).dot(n))
}

/// S_k = d f_i / d x_i = -k [n n^T + (1 - L/l)(I - n n^T)] (seed 003; seed 000 eq. 46),
/// unclamped: indefinite for a compressed spring.
pub fn spring_stiffness_block(xi: DVec3, xj: DVec3, s: &Spring) -> DMat3 {
    let (n, l) = spring_axis(xi, xj);
    let nn = outer(n);
    let g = spring::transverse_factor(l, s.rest_length);
    (nn + (DMat3::IDENTITY - nn) * g) * (-s.stiffness)
}

/// d f_i / d v_i = -c n n^T (seed 003).
pub fn spring_damping_block(xi: DVec3, xj: DVec3, s: &Spring) -> DMat3 {
    let (n, _) = spring_axis(xi, xj);
    outer(n) * (-s.damping)
}

/// W_k = h^2 k [n n^T + max(0, 1 - L/l)(I - n n^T)] + h c n n^T: the clamped, symmetric
/// positive semi-definite block of A = M - h D - h^2 K (DESIGN section 2).
pub fn spring_w_block(xi: DVec3, xj: DVec3, s: &Spring, h: f64) -> DMat3 {
    let (n, l) = spring_axis(xi, xj);
    let nn = outer(n);
    // The clamp keeps A SPD for compressed springs; it is not applied to the force.
    let g = spring::transverse_factor(l, s.rest_length).max(0.0);
    let kh2 = h * h * s.stiffness;
    nn * (kh2 + h * s.damping) + (DMat3::IDENTITY - nn) * (kh2 * g)
}

/// Per-spring kernel of the IMEX step (`spring_assemble`): the elastic force on i and the
/// block W_k (packed), both at the positions `x` (seed 000 eq. 46, DESIGN section 2).
pub fn spring_assemble(
    x: &[DVec3],
    springs: &[Spring],
    h: f64,
    force_out: &mut [DVec3],
    block_out: &mut [super::operator::PackedBlock],
) {
    assert_eq!(force_out.len(), springs.len(), "spring_assemble: force_out");
    assert_eq!(block_out.len(), springs.len(), "spring_assemble: block_out");
    let kernel = |(k, (f, w)): (usize, (&mut DVec3, &mut super::operator::PackedBlock))| {
        let s = &springs[k];
        let (xi, xj) = (x[s.i as usize], x[s.j as usize]);
        *f = spring_elastic_force(xi, xj, s);
        *w = super::operator::pack(&spring_w_block(xi, xj, s, h));
    };
    if springs.len() <= PAR_CHUNK {
        force_out
            .iter_mut()
            .zip(block_out.iter_mut())
            .enumerate()
            .for_each(kernel);
    } else {
        force_out
            .par_iter_mut()
            .zip(block_out.par_iter_mut())
            .enumerate()
            .with_min_len(PAR_CHUNK)
            .for_each(kernel);
    }
}

/// Per-spring elastic plus damping force on i (explicit integrators).
pub fn spring_forces(x: &[DVec3], v: &[DVec3], springs: &[Spring], force_out: &mut [DVec3]) {
    assert_eq!(force_out.len(), springs.len(), "spring_forces: force_out");
    let kernel = |(k, f): (usize, &mut DVec3)| {
        let s = &springs[k];
        let (i, j) = (s.i as usize, s.j as usize);
        *f = spring_force(x[i], x[j], v[i], v[j], s);
    };
    for_each_indexed(force_out, kernel);
}

/// Per-particle gather of per-spring forces over the CSR rows, in row order:
/// out_i = sum_{e in row i} sign_e f_{spring_e} (scatter-free, DESIGN section 6).
pub fn gather_spring_forces(adjacency: &Adjacency, spring_force: &[DVec3], out: &mut [DVec3]) {
    let kernel = |(i, o): (usize, &mut DVec3)| {
        let mut acc = DVec3::ZERO;
        for e in adjacency.row(i) {
            let f = spring_force[e.spring as usize];
            acc += if e.sign > 0 { f } else { -f };
        }
        *o = acc;
    };
    for_each_indexed(out, kernel);
}

/// All-pairs Coulomb force on every particle (the paper's eq. 8), with softening.
pub fn coulomb_forces(x: &[DVec3], q: &[f64], softening: f64) -> Vec<DVec3> {
    let mut out = vec![DVec3::ZERO; x.len()];
    coulomb_forces_into(x, q, softening, &mut out);
    out
}

/// [`coulomb_forces`] into a caller's buffer (`coulomb_tiled`): per target i,
/// f_i = k_c q_i sum_{j != i, q_j != 0} q_j (x_i - x_j) / (r^2 + eps^2)^(3/2).
/// Uncharged particles receive zero; the self pair never enters. A coincident distinct
/// pair with eps = 0 makes both forces non-finite (DESIGN: a divergence, never a silent
/// zero). Each pair is evaluated once and applied to both charges, vectorized over
/// structure-of-arrays sources in an order fixed by the charge count ([`crate::coulomb`]).
pub fn coulomb_forces_into(x: &[DVec3], q: &[f64], softening: f64, out: &mut [DVec3]) {
    thread_local! {
        // The source arrays, kept between calls: no allocation per step.
        static SOURCES: std::cell::RefCell<crate::coulomb::Sources> = Default::default();
    }
    SOURCES.with_borrow_mut(|src| crate::coulomb::forces_into(x, q, softening, src, out));
}

/// External point charges at time `t` and the external field, on every particle.
pub fn external_forces(x: &[DVec3], q: &[f64], config: &Config, t: f64) -> Vec<DVec3> {
    let mut out = vec![DVec3::ZERO; x.len()];
    external_forces_into(x, q, config, t, &mut out);
    out
}

/// [`external_forces`] into a caller's buffer: k_c q_i sum_e q_e (x_i - x_e(t)) /
/// (r^2 + eps^2)^(3/2) + q_i E(x_i), with the run's Coulomb softening eps. These act
/// whatever the Coulomb method is (`none` switches off only the internal all-pairs sum).
pub fn external_forces_into(x: &[DVec3], q: &[f64], config: &Config, t: f64, out: &mut [DVec3]) {
    assert_eq!(q.len(), x.len(), "external_forces: charges");
    assert_eq!(out.len(), x.len(), "external_forces: out");
    // A 0 C external charge exerts nothing, even on a particle it sits on.
    let charges: Vec<(DVec3, f64)> = config
        .external_charges
        .iter()
        .filter(|c| c.charge != 0.0)
        .map(|c| (c.position_at(t), c.charge))
        .collect();
    let eps2 = config.coulomb.softening * config.coulomb.softening;
    let field = config.external_field;
    let kernel = |(i, f): (usize, &mut DVec3)| {
        let qi = q[i];
        if qi == 0.0 {
            *f = DVec3::ZERO;
            return;
        }
        let xi = x[i];
        let mut e = DVec3::ZERO;
        for &(xe, qe) in &charges {
            e += point_charge::field(xi - xe, qe, eps2);
        }
        e *= COULOMB_K;
        if let Some(fld) = field {
            e += fld.at(xi);
        }
        *f = e * qi;
    };
    for_each_indexed(out, kernel);
}

/// Coulomb (when enabled) plus external forces at (x, t): the explicit, position-only part
/// of the force that every integrator evaluates (`coulomb_tiled` + the external part of `rhs`).
/// DDEF keeps a grid between steps, so `CpuSimulation` adds its forces itself; here
/// `CoulombMethod::Ddef` contributes only the external part.
pub fn field_forces_into(
    x: &[DVec3],
    q: &[f64],
    config: &Config,
    t: f64,
    coulomb_scratch: &mut Vec<DVec3>,
    out: &mut [DVec3],
) {
    external_forces_into(x, q, config, t, out);
    if config.coulomb.method == crate::config::CoulombMethod::AllPairs {
        coulomb_scratch.resize(x.len(), DVec3::ZERO);
        coulomb_forces_into(x, q, config.coulomb.softening, coulomb_scratch);
        for (o, c) in out.iter_mut().zip(coulomb_scratch.iter()) {
            *o = *c + *o;
        }
    }
}
