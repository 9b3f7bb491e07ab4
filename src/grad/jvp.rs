//! Jacobian-vector products of the forces and of the IMEX blocks W_k: given a tangent
//! (dx, dv) of the state and a parameter [`Direction`], the tangent of each quantity.
//! Each mirrors a function of `crate::cpu::forces` term by term, with the same
//! conventions for degenerate springs and coincident charges; the derivatives of the
//! single formulas (spring factor, point charge, external field, orbit) come from
//! `crate::physics`.

// Per-particle loops index several arrays by particle, as the kernels do.
#![allow(clippy::needless_range_loop)]

use super::pair_tangent::{TangentSources, Target};
use super::params::Direction;
use crate::config::{Config, CoulombMethod};
use crate::cpu::forces::spring_axis;
use crate::ddef::field::Evaluation;
use crate::ddef::LatticeDdef;
use crate::model::{Spring, COULOMB_K};
use crate::physics::point_charge::unit_field_and_jvp;
use crate::physics::spring::transverse_factor_and_derivative;
use glam::DVec3;
use rayon::prelude::*;

/// Per-particle loops run in parallel above this size.
const PAR_MIN: usize = 256;

/// d/dtheta of the elastic force on i, k (l - L) n: K dd + dk (l - L) n with
/// K = k [n n^T + (1 - L/l)(I - n n^T)] (= -S_k, docs/physics.md (2.3)) and dd = dx_j - dx_i.
#[inline]
pub fn spring_elastic_jvp(xi: DVec3, xj: DVec3, s: &Spring, dd: DVec3, dk: f64) -> DVec3 {
    let (n, l) = spring_axis(xi, xj);
    let (g, _) = transverse_factor_and_derivative(l, s.rest_length);
    let along = n * n.dot(dd);
    (along + (dd - along) * g) * s.stiffness + n * (dk * (l - s.rest_length))
}

/// d/dtheta of the spring force on i with damping, [k (l - L) + c (u . n)] n with
/// u = v_j - v_i: [dk (l - L) + k dl + c (du . n + u . dn)] n + [k (l - L) + c (u . n)] dn,
/// dl = n . dd, dn = (I - n n^T) dd / l. A degenerate spring (l = 0) has no axis: only
/// the linear part k g dd remains, as its stiffness block has.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn spring_force_jvp(
    xi: DVec3,
    xj: DVec3,
    vi: DVec3,
    vj: DVec3,
    s: &Spring,
    dd: DVec3,
    du: DVec3,
    dk: f64,
) -> DVec3 {
    let (n, l) = spring_axis(xi, xj);
    if l == 0.0 {
        let (g, _) = transverse_factor_and_derivative(l, s.rest_length);
        return dd * (s.stiffness * g);
    }
    let u = vj - vi;
    let dl = n.dot(dd);
    let dn = (dd - n * dl) / l;
    let mag = s.stiffness * (l - s.rest_length) + s.damping * u.dot(n);
    let dmag = dk * (l - s.rest_length) + s.stiffness * dl + s.damping * (du.dot(n) + u.dot(dn));
    n * dmag + dn * mag
}

/// (dW_k) w: the tangent of the IMEX block W_k = a n n^T + b (I - n n^T), a = h^2 k + h c,
/// b = h^2 k max(0, 1 - L/l), applied to w:
/// da n (n.w) + db (w - n (n.w)) + (a - b)(dn (n.w) + n (dn.w)).
/// The clamp's kink (l = L) takes the derivative of the side it is evaluated on.
#[inline]
pub fn w_block_jvp(
    xi: DVec3,
    xj: DVec3,
    s: &Spring,
    h: f64,
    dd: DVec3,
    dk: f64,
    w: DVec3,
) -> DVec3 {
    let (n, l) = spring_axis(xi, xj);
    let (g, dg_dl) = transverse_factor_and_derivative(l, s.rest_length);
    let (g, dg_dl) = if g > 0.0 { (g, dg_dl) } else { (0.0, 0.0) };
    let h2 = h * h;
    let a = h2 * s.stiffness + h * s.damping;
    let b = h2 * s.stiffness * g;
    let nw = n.dot(w);
    if l == 0.0 {
        // No axis: W = b I with b constant in x.
        return w * (h2 * dk * g);
    }
    let dl = n.dot(dd);
    let dn = (dd - n * dl) / l;
    let da = h2 * dk;
    let db = h2 * (dk * g + s.stiffness * dg_dl * dl);
    n * (da * nw) + (w - n * nw) * db + (dn * nw + n * dn.dot(w)) * (a - b)
}

/// d/dtheta of the local projection d_k = L (x_i - x_j) / |x_i - x_j| (paper eq. 40):
/// L (I - m m^T) (dx_i - dx_j) / |x_i - x_j|, m the unit axis; 0 for coincident ends.
#[inline]
pub fn local_projection_jvp(xi: DVec3, xj: DVec3, rest: f64, dxi: DVec3, dxj: DVec3) -> DVec3 {
    let (n, l) = spring_axis(xi, xj);
    if l == 0.0 {
        return DVec3::ZERO;
    }
    let db = dxi - dxj;
    (db - n * n.dot(db)) * (rest / l)
}

/// d/dtheta of the explicit field forces (internal all-pairs Coulomb when enabled, external
/// point charges and the external field) at (x, t), into `out`:
/// d f_i = k_c sum_j [(dq_i q_j + q_i dq_j) phi_ij + q_i q_j G_ij (dx_i - dx_j)]
///       + k_c sum_e [(dq_i q_e + q_i dq_e) phi_ie + q_i q_e G_ie (dx_i - dx_e(t))]
///       + dq_i E(x_i) + q_i (grad E) dx_i.
/// A particle with q = 0 but dq != 0 (a per-particle charge parameter) acts and is acted
/// on: the formula is smooth in q; the reference only skips terms that are exactly zero.
///
/// With DDEF, `ddef` is the step's evaluation at `x` (its structure frozen) and its
/// tangent replaces the all-pairs sum ([`LatticeDdef::forces_jvp`]); there a particle
/// with q = 0 but dq != 0 gets a NaN tangent (it would enter the structure).
#[allow(clippy::too_many_arguments)]
pub fn field_forces_jvp(
    x: &[DVec3],
    q: &[f64],
    config: &Config,
    t: f64,
    dx: &[DVec3],
    dir: &Direction,
    ddef: Option<&LatticeDdef>,
    out: &mut [DVec3],
) {
    field_forces_jvp_parts(x, q, config, t, dx, dir, true, ddef, out);
}

/// [`field_forces_jvp`], with the external field's terms only when `with_field`: the
/// rest is the Hessian of a potential (symmetric), which the adjoint applies as is
/// (`super::vjp::field_forces_vjp`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn field_forces_jvp_parts(
    x: &[DVec3],
    q: &[f64],
    config: &Config,
    t: f64,
    dx: &[DVec3],
    dir: &Direction,
    with_field: bool,
    ddef: Option<&LatticeDdef>,
    out: &mut [DVec3],
) {
    let eps2 = config.coulomb.softening * config.coulomb.softening;
    let active = |i: usize| q[i] != 0.0 || dir.dq(i) != 0.0;
    let sources = (config.coulomb.method == CoulombMethod::AllPairs)
        .then(|| TangentSources::new(x, dx, q, |i| dir.dq(i), active));
    let externals: Vec<(DVec3, f64, f64, DVec3)> = config
        .external_charges
        .iter()
        .enumerate()
        .map(|(e, c)| {
            (
                c.position_at(t),
                c.charge,
                dir.dqe(e),
                c.position_tangent(t, dir.dxe(e)),
            )
        })
        .collect();
    let field = config.external_field.filter(|_| with_field);
    let kernel = |(i, f): (usize, &mut DVec3)| {
        *f = DVec3::ZERO;
        if !active(i) {
            return;
        }
        let (qi, dqi, xi, dxi) = (q[i], dir.dq(i), x[i], dx[i]);
        let mut acc = match &sources {
            Some(src) => {
                let t = Target {
                    x: xi,
                    dx: dxi,
                    q: qi,
                    dq: dqi,
                };
                src.tangent_at(i, t, eps2)
            }
            None => DVec3::ZERO,
        };
        for &(xe, qe, dqe, dxe) in &externals {
            let (phi, gd) = unit_field_and_jvp(xi - xe, eps2, dxi - dxe);
            acc += phi * (dqi * qe + qi * dqe) + gd * (qi * qe);
        }
        acc *= COULOMB_K;
        if let Some(fld) = field {
            acc += fld.at(xi) * dqi + fld.jvp(xi, dxi) * qi;
        }
        *f = acc;
    };
    if x.len() <= PAR_MIN {
        out.iter_mut().enumerate().for_each(kernel);
    } else {
        out.par_iter_mut()
            .enumerate()
            .with_min_len(64)
            .for_each(kernel);
    }
    if let (Some(l), Some(d)) = (ddef, config.coulomb.method.ddef()) {
        let dq: Vec<f64> = (0..x.len()).map(|i| dir.dq(i)).collect();
        let mut internal = vec![DVec3::ZERO; x.len()];
        l.forces_jvp(Evaluation::Ddef(d.variant), dx, &dq, &mut internal);
        out.iter_mut().zip(&internal).for_each(|(o, f)| *o += *f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ExternalCharge, ExternalField};
    use crate::cpu::forces::{field_forces_into, spring_force, spring_w_block};

    fn spring(k: f64, rest: f64, c: f64) -> Spring {
        Spring {
            i: 0,
            j: 1,
            stiffness: k,
            rest_length: rest,
            damping: c,
        }
    }

    fn close(a: DVec3, b: DVec3, tol: f64) -> bool {
        (a - b).length() <= tol * b.length().max(1e-30)
    }

    // Central differences of the reference force functions (step 1e-6, relative agreement
    // 1e-7: the O(h^2) truncation is ~1e-12 and cancellation ~1e-10 for O(1) inputs).
    #[test]
    fn spring_jvps_match_central_differences() {
        let (xi, xj) = (DVec3::new(0.1, -0.2, 0.3), DVec3::new(1.0, 0.4, -0.2));
        let (vi, vj) = (DVec3::new(0.3, 0.1, -0.5), DVec3::new(-0.2, 0.7, 0.1));
        let (dxi, dxj) = (DVec3::new(0.3, -0.7, 0.2), DVec3::new(-0.1, 0.5, 0.9));
        let (dvi, dvj) = (DVec3::new(0.2, 0.1, -0.4), DVec3::new(0.6, -0.3, 0.2));
        let e = 1e-6;
        for &(rest, dk) in &[(0.5, 0.7), (2.0, -0.3), (0.0, 1.1)] {
            let s = spring(3.0, rest, 0.4);
            let sp = |a: f64| Spring {
                stiffness: s.stiffness + a * dk,
                ..s
            };
            let f = |a: f64| {
                spring_force(
                    xi + dxi * a,
                    xj + dxj * a,
                    vi + dvi * a,
                    vj + dvj * a,
                    &sp(a),
                )
            };
            let fd = (f(e) - f(-e)) / (2.0 * e);
            let an = spring_force_jvp(xi, xj, vi, vj, &s, dxj - dxi, dvj - dvi, dk);
            assert!(close(an, fd, 1e-7), "force {an} vs {fd}");
            let s0 = Spring { damping: 0.0, ..s };
            let an0 = spring_elastic_jvp(xi, xj, &s0, dxj - dxi, dk);
            let an1 = spring_force_jvp(xi, xj, vi, vj, &s0, dxj - dxi, dvj - dvi, dk);
            assert!(close(an0, an1, 1e-12));
            let h = 0.05;
            let w = DVec3::new(0.4, -1.0, 0.3);
            let wb = |a: f64| spring_w_block(xi + dxi * a, xj + dxj * a, &sp(a), h) * w;
            let fd = (wb(e) - wb(-e)) / (2.0 * e);
            let an = w_block_jvp(xi, xj, &s, h, dxj - dxi, dk, w);
            assert!(close(an, fd, 1e-7), "W {an} vs {fd} (rest {rest})");
        }
    }

    #[test]
    fn field_jvp_matches_central_differences() {
        let x = vec![
            DVec3::new(0.0, 0.0, 0.5),
            DVec3::new(1.0, 0.2, 0.7),
            DVec3::new(-0.3, 0.9, 0.4),
            DVec3::new(0.5, -0.6, -0.8),
        ];
        let q = vec![1e-6, -2e-6, 0.0, 3e-6];
        let dx = vec![
            DVec3::new(0.1, 0.2, -0.3),
            DVec3::new(-0.4, 0.1, 0.2),
            DVec3::new(0.3, 0.3, 0.1),
            DVec3::new(0.0, -0.2, 0.5),
        ];
        let mut config = Config::default();
        config.coulomb.softening = 0.05;
        config.external_charges.push(ExternalCharge {
            charge: -4e-6,
            position: DVec3::new(2.0, 1.0, 0.5),
            orbit: Some(crate::config::Orbit {
                center: DVec3::new(0.5, 0.0, 0.0),
                axis: DVec3::Z,
                angular_velocity: 0.8,
            }),
        });
        config.external_field = Some(ExternalField::Swirl {
            scale: 300.0,
            min_z: 1e-3,
        });
        let dir = Direction {
            dq: Some(vec![0.5e-6, 1e-6, 2e-6, -1e-6]),
            dk: None,
            dm: None,
            dqe: vec![1e-6],
            dxe: vec![DVec3::new(0.2, -0.1, 0.3)],
        };
        let t = 0.7;
        for fld in [
            ExternalField::Swirl {
                scale: 300.0,
                min_z: 1e-3,
            },
            ExternalField::Vortex {
                scale: -200.0,
                min_z: 1e-3,
            },
            ExternalField::Uniform(DVec3::new(1e3, -2e3, 5e2)),
        ] {
            config.external_field = Some(fld);
            let eval = |a: f64| {
                let xa: Vec<DVec3> = x.iter().zip(&dx).map(|(x, d)| *x + *d * a).collect();
                let qa: Vec<f64> = q
                    .iter()
                    .enumerate()
                    .map(|(i, q)| q + a * dir.dq(i))
                    .collect();
                let mut c = config.clone();
                c.external_charges[0].charge += a * dir.dqe[0];
                c.external_charges[0].position += dir.dxe[0] * a;
                let mut out = vec![DVec3::ZERO; x.len()];
                field_forces_into(&xa, &qa, &c, t, &mut Vec::new(), &mut out);
                out
            };
            let e = 1e-6;
            let (p, m) = (eval(e), eval(-e));
            let mut an = vec![DVec3::ZERO; x.len()];
            field_forces_jvp(&x, &q, &config, t, &dx, &dir, None, &mut an);
            for i in 0..x.len() {
                let fd = (p[i] - m[i]) / (2.0 * e);
                assert!(
                    close(an[i], fd, 1e-6),
                    "{fld:?} particle {i}: {} vs {fd}",
                    an[i]
                );
            }
        }
    }

    /// Two distinct charges at one point with eps = 0: the tangent is non-finite, as the
    /// force is, never a silent zero; softened, it is finite. A lone charge's self pair
    /// never enters.
    #[test]
    fn coincident_charges_give_a_non_finite_tangent() {
        let x = vec![DVec3::ZERO, DVec3::ZERO, DVec3::X];
        let q = vec![1e-6, 2e-6, -1e-6];
        let dx = vec![DVec3::X, DVec3::Y, DVec3::Z];
        let dir = Direction {
            dq: None,
            dk: None,
            dm: None,
            dqe: vec![],
            dxe: vec![],
        };
        let mut config = Config::default();
        config.coulomb.softening = 0.0;
        let mut out = vec![DVec3::ZERO; 3];
        field_forces_jvp(&x, &q, &config, 0.0, &dx, &dir, None, &mut out);
        assert!(!out[0].is_finite() && !out[1].is_finite(), "{out:?}");
        config.coulomb.softening = 1e-2;
        field_forces_jvp(&x, &q, &config, 0.0, &dx, &dir, None, &mut out);
        assert!(out.iter().all(|d| d.is_finite()), "{out:?}");
        let mut one = vec![DVec3::ZERO];
        config.coulomb.softening = 0.0;
        field_forces_jvp(
            &x[..1],
            &q[..1],
            &config,
            0.0,
            &dx[..1],
            &dir,
            None,
            &mut one,
        );
        assert_eq!(one[0], DVec3::ZERO);
    }

    /// The vectorized internal tangent against the straightforward loop over active
    /// sources (charged or with dq != 0): equal to reassociation of the same terms,
    /// |d - d_ref| <= 1e-13 sum |terms|, with the self pair excluded by index.
    #[test]
    fn vectorized_tangent_matches_the_straightforward_loop() {
        let n = 203;
        let mut s = 3u64;
        let mut unit = move || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let x: Vec<DVec3> = (0..n).map(|_| DVec3::new(unit(), unit(), unit())).collect();
        let dx: Vec<DVec3> = (0..n)
            .map(|_| DVec3::new(unit(), unit(), unit()) - 0.5)
            .collect();
        // Every third particle uncharged; some of those carry dq.
        let q: Vec<f64> = (0..n)
            .map(|i| {
                if i % 3 == 0 {
                    0.0
                } else {
                    (unit() - 0.5) * 1e-6
                }
            })
            .collect();
        let dq: Vec<f64> = (0..n)
            .map(|i| if i % 6 == 0 { 0.0 } else { unit() * 1e-7 })
            .collect();
        let dir = Direction {
            dq: Some(dq.clone()),
            dk: None,
            dm: None,
            dqe: vec![],
            dxe: vec![],
        };
        for eps in [0.0, 1e-2] {
            let mut config = Config::default();
            config.coulomb.softening = eps;
            let mut fast = vec![DVec3::ZERO; n];
            field_forces_jvp(&x, &q, &config, 0.0, &dx, &dir, None, &mut fast);
            let eps2 = eps * eps;
            let active = |i: usize| q[i] != 0.0 || dq[i] != 0.0;
            for i in 0..n {
                let (mut r, mut scale) = (DVec3::ZERO, 0.0);
                if active(i) {
                    for j in (0..n).filter(|&j| j != i && active(j)) {
                        let (phi, gd) = unit_field_and_jvp(x[i] - x[j], eps2, dx[i] - dx[j]);
                        let t = phi * (dq[i] * q[j] + q[i] * dq[j]) + gd * (q[i] * q[j]);
                        r += t;
                        scale += t.length();
                    }
                }
                let err = (fast[i] - r * COULOMB_K).length();
                assert!(
                    err <= 1e-13 * scale * COULOMB_K,
                    "eps {eps} particle {i}: {err:e}"
                );
                if !active(i) {
                    assert_eq!(fast[i], DVec3::ZERO);
                }
            }
        }
    }
}
