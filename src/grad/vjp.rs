//! Vector-Jacobian products (the adjoint's transposed kernels): given a cotangent w of a
//! force or of a product A v, its cotangent with respect to positions, velocities and
//! parameters. Where the Jacobian is symmetric (the elastic stiffness block, the Hessian
//! of the Coulomb and point-charge potentials, the damping block in v) the tangent code
//! of [`super::jvp`] is applied to w as is; the pieces here are the ones whose transpose
//! differs: the damping force's position derivative, the derivative of w^T W_k u in the
//! spring's direction, the external field's gradient, and the parameter cotangents
//! (one writer per spring; the per-charge sum in one all-pairs pass).

// Per-particle loops index several arrays by particle, as the kernels do.
#![allow(clippy::needless_range_loop)]

use super::cotangent::Cotangent;
use super::jvp::{field_forces_jvp_parts, spring_elastic_jvp};
use super::params::Direction;
use crate::config::{Config, CoulombMethod};
use crate::cpu::forces::spring_axis;
use crate::ddef::{Evaluation, LatticeDdef};
use crate::model::{Spring, COULOMB_K};
use crate::physics::point_charge::unit_field_and_jvp;
use crate::physics::spring::transverse_factor_and_derivative;
use glam::DVec3;

/// The cotangent of one spring's force [k (l - L) + c (u . n)] n on i (u = v_j - v_i):
/// w . df = dd_bar . dd + du_bar . du + k_bar dk for dd = dx_j - dx_i, du = dv_j - dv_i.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpringBar {
    pub dd: DVec3,
    pub du: DVec3,
    pub k: f64,
}

/// The transpose of [`super::jvp::spring_force_jvp`] for a cotangent `w` of the force on
/// i: the elastic block is symmetric (its jvp applied to w); the damping force's position
/// derivative c [(u . dn) n + (u . n) dn], dn = (I - n n^T) dd / l, transposes to
/// c [(w . n) (I - n n^T) u + (u . n) (I - n n^T) w] / l; in v, c (w . n) n; in k,
/// (w . n)(l - L). A degenerate spring keeps only k g dd, symmetric.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn spring_force_vjp(
    xi: DVec3,
    xj: DVec3,
    vi: DVec3,
    vj: DVec3,
    s: &Spring,
    w: DVec3,
) -> SpringBar {
    let elastic = spring_elastic_jvp(xi, xj, s, w, 0.0);
    let (n, l) = spring_axis(xi, xj);
    if l == 0.0 {
        return SpringBar {
            dd: elastic,
            du: DVec3::ZERO,
            k: 0.0,
        };
    }
    let u = vj - vi;
    let (wn, un) = (w.dot(n), u.dot(n));
    let perp = |a: DVec3| a - n * a.dot(n);
    SpringBar {
        dd: elastic + (perp(u) * wn + perp(w) * un) * (s.damping / l),
        du: n * (s.damping * wn),
        k: wn * (l - s.rest_length),
    }
}

/// The gradient of a^T W_k b in the spring's direction d = x_j - x_i and in k, the
/// transpose of [`super::jvp::w_block_jvp`]. W = alpha n n^T + beta (I - n n^T),
/// alpha = h^2 k + h c, beta = h^2 k max(0, 1 - L/l):
/// a^T W b = (alpha - beta)(a . n)(b . n) + beta (a . b), so
/// d/dd = h^2 k g'(l) [a . b - (a . n)(b . n)] n + (alpha - beta)/l (I - n n^T)[a (b . n) + b (a . n)]
/// and d/dk = h^2 [(a . n)(b . n) + g (a . b - (a . n)(b . n))]. The clamp's kink takes
/// the side it is evaluated on, as the jvp does. Returns (d/dd, d/dk).
#[inline]
pub fn w_block_vjp(xi: DVec3, xj: DVec3, s: &Spring, h: f64, a: DVec3, b: DVec3) -> (DVec3, f64) {
    let (n, l) = spring_axis(xi, xj);
    let (g, dg_dl) = transverse_factor_and_derivative(l, s.rest_length);
    let (g, dg_dl) = if g > 0.0 { (g, dg_dl) } else { (0.0, 0.0) };
    let h2 = h * h;
    if l == 0.0 {
        // No axis: W = h^2 k g I, constant in x.
        return (DVec3::ZERO, h2 * g * a.dot(b));
    }
    let alpha = h2 * s.stiffness + h * s.damping;
    let beta = h2 * s.stiffness * g;
    let (an, bn, ab) = (a.dot(n), b.dot(n), a.dot(b));
    let transverse = ab - an * bn;
    let mixed = a * bn + b * an;
    let dd = n * (h2 * s.stiffness * dg_dl * transverse)
        + (mixed - n * mixed.dot(n)) * ((alpha - beta) / l);
    (dd, h2 * (an * bn + g * transverse))
}

/// (d f_field / dx)^T w at (x, t) into `out`: the internal Coulomb and point-charge
/// terms are the Hessian of a potential, so their jvp with dx = w serves; the external
/// field's gradient is not symmetric and is transposed per particle, q_i (grad E)^T w_i.
/// With DDEF, `ddef` is the step's evaluation at x (its structure frozen), whose field is
/// not a potential's gradient: its own transpose ([`LatticeDdef::forces_vjp`]).
pub fn field_forces_vjp(
    x: &[DVec3],
    q: &[f64],
    config: &Config,
    t: f64,
    w: &[DVec3],
    ddef: Option<&LatticeDdef>,
    out: &mut [DVec3],
) {
    let none = Direction::default();
    field_forces_jvp_parts(x, q, config, t, w, &none, false, None, out);
    if let Some(fld) = config.external_field {
        for i in 0..x.len() {
            if q[i] != 0.0 {
                out[i] += fld.vjp(x[i], w[i]) * q[i];
            }
        }
    }
    if let (Some(l), Some(d)) = (ddef, config.coulomb.method.ddef()) {
        l.forces_vjp(Evaluation::Ddef(d.variant), w, out, None);
    }
}

/// Adds the cotangents of the field forces' parameters for a cotangent `w` of the forces
/// at (x, t) to `cot` (only the wanted ones):
/// - q_p: w_p . E_p(x_p) + k_c sum_{i != p} q_i w_i . phi_ip (all-pairs, one pass; with
///   DDEF, `ddef`'s transpose), E_p the field at p of every other charge, external charge
///   and the external field;
/// - q_e: k_c sum_i q_i w_i . phi(x_i - x_e(t));
/// - x_e(0): R(t)^T [-k_c q_e sum_i q_i G(x_i - x_e(t)) w_i] (G symmetric).
pub fn field_param_vjp(
    x: &[DVec3],
    q: &[f64],
    config: &Config,
    t: f64,
    w: &[DVec3],
    ddef: Option<&LatticeDdef>,
    cot: &mut Cotangent,
) {
    let eps2 = config.coulomb.softening * config.coulomb.softening;
    if cot.wants.charges {
        if let (Some(l), Some(d)) = (ddef, config.coulomb.method.ddef()) {
            let mut xbar = vec![DVec3::ZERO; x.len()];
            l.forces_vjp(
                Evaluation::Ddef(d.variant),
                w,
                &mut xbar,
                Some(&mut cot.charges),
            );
        }
        if config.coulomb.method == CoulombMethod::AllPairs {
            super::pair_cotangent::add_charge_cotangents(
                x,
                q,
                w,
                eps2,
                COULOMB_K,
                &mut cot.charges,
            );
        }
        let externals: Vec<(DVec3, f64)> = config
            .external_charges
            .iter()
            .map(|c| (c.position_at(t), c.charge))
            .collect();
        for p in 0..x.len() {
            let mut e = DVec3::ZERO;
            for &(xe, qe) in &externals {
                e += unit_field_and_jvp(x[p] - xe, eps2, DVec3::ZERO).0 * qe;
            }
            e *= COULOMB_K;
            if let Some(fld) = config.external_field {
                e += fld.at(x[p]);
            }
            cot.charges[p] += w[p].dot(e);
        }
    }
    if cot.wants.externals {
        for (e, c) in config.external_charges.iter().enumerate() {
            let xe = c.position_at(t);
            let (mut qbar, mut gbar) = (0.0, DVec3::ZERO);
            for i in 0..x.len() {
                if q[i] == 0.0 {
                    continue;
                }
                let (phi, gw) = unit_field_and_jvp(x[i] - xe, eps2, w[i]);
                qbar += q[i] * w[i].dot(phi);
                gbar += gw * q[i];
            }
            cot.external_charges[e] += COULOMB_K * qbar;
            cot.external_positions[e] += c.position_vjp(t, gbar * (-COULOMB_K * c.charge));
        }
    }
}

#[cfg(test)]
#[path = "vjp_tests.rs"]
mod tests;
