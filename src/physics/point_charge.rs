//! The field of a point charge (paper eq. 8, without k_c), and its derivative in the
//! separation. Never dropped: at r^2 + eps^2 = 0 (a source on the point, no softening) or
//! where it underflows, the field is non-finite (NaN or inf), so a run that brings a
//! charge onto another stops as diverged. Callers exclude the self pair by index, and
//! scenes refuse such pairs at t = 0 (`Config::check_coulomb`).

use glam::DVec3;

/// The point-charge factor q_s / (r^2 + eps^2)^(3/2), given r2 = r^2 + eps^2: the field
/// is this times d. Every exact f64 Coulomb sum forms it here (`coulomb`'s fast path has
/// its own vectorized 1 / r2^(3/2), `coulomb::inv_r3`, within a few ulp of
/// `factor(1.0, r2)`).
#[inline]
pub fn factor(qs: f64, r2: f64) -> f64 {
    qs / (r2 * r2.sqrt())
}

/// q_s d / (r^2 + eps^2)^(3/2) with d = x - x_s: the field at x of a source q_s at x_s.
#[inline]
pub fn field(d: DVec3, qs: f64, eps2: f64) -> DVec3 {
    d * factor(qs, d.length_squared() + eps2)
}

/// q_s / (r^2 + eps^2)^(1/2) with d = x - x_s: the potential at x of a source q_s at x_s
/// (its gradient in x is minus [`field`]).
#[inline]
pub fn potential(d: DVec3, qs: f64, eps2: f64) -> f64 {
    qs / (d.length_squared() + eps2).sqrt()
}

/// The unit-charge field phi = d / r2^(3/2) (r2 = |d|^2 + eps^2) and its derivative
/// applied to a displacement delta of d: G delta with G = (I - 3 d d^T / r2) / r2^(3/2).
#[inline]
pub fn unit_field_and_jvp(d: DVec3, eps2: f64, delta: DVec3) -> (DVec3, DVec3) {
    unit_field_and_jvp_at(d, d.length_squared() + eps2, delta)
}

/// [`unit_field_and_jvp`] given r2 = |d|^2 + eps^2 (a vectorized caller may pad it).
#[inline]
pub fn unit_field_and_jvp_at(d: DVec3, r2: f64, delta: DVec3) -> (DVec3, DVec3) {
    let inv3 = factor(1.0, r2);
    (d * inv3, (delta - d * (3.0 * d.dot(delta) / r2)) * inv3)
}

/// The derivative of [`field`] along a displacement `delta` of d and a change `dqs` of the
/// source charge: dqs phi + qs G delta (the field is linear in qs).
#[inline]
pub fn field_jvp(d: DVec3, qs: f64, eps2: f64, delta: DVec3, dqs: f64) -> DVec3 {
    let (phi, gd) = unit_field_and_jvp(d, eps2, delta);
    phi * dqs + gd * qs
}

/// The transpose of [`field_jvp`]: for a cotangent `c` of the field, the cotangents of
/// the displacement and of the source charge, (qs G c, phi . c) (G is symmetric).
#[inline]
pub fn field_vjp(d: DVec3, qs: f64, eps2: f64, c: DVec3) -> (DVec3, f64) {
    let (phi, gc) = unit_field_and_jvp(d, eps2, c);
    (gc * qs, phi.dot(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jvp_matches_central_differences_and_zero_distance_is_not_finite() {
        let d = DVec3::new(0.3, -0.2, 0.5);
        let delta = DVec3::new(1e-3, 2e-3, -1e-3);
        for eps2 in [0.0, 1e-2] {
            let h = 1e-5;
            let fd =
                (field(d + delta * h, 1.0, eps2) - field(d - delta * h, 1.0, eps2)) / (2.0 * h);
            let (phi, g) = unit_field_and_jvp(d, eps2, delta);
            assert!((phi - field(d, 1.0, eps2)).length() < 1e-12 * phi.length());
            assert!((fd - g).length() < 1e-6 * g.length(), "{fd} vs {g}");
            // Charge and displacement together: field is linear in q_s.
            let (q, dq) = (2.0, -0.7);
            let fd = (field(d + delta * h, q + dq * h, eps2)
                - field(d - delta * h, q - dq * h, eps2))
                / (2.0 * h);
            let j = field_jvp(d, q, eps2, delta, dq);
            assert!((fd - j).length() < 1e-6 * j.length(), "{fd} vs {j}");
        }
        // The vjp is the jvp's transpose: <c, J (delta, dq)> = <J^T c, (delta, dq)>.
        let (c, dq) = (DVec3::new(-0.4, 0.9, 0.2), 0.3);
        for eps2 in [0.0, 1e-2] {
            let (db, qb) = field_vjp(d, 1.7, eps2, c);
            let lhs = c.dot(field_jvp(d, 1.7, eps2, delta, dq));
            let rhs = db.dot(delta) + qb * dq;
            assert!((lhs - rhs).abs() <= 1e-14 * lhs.abs(), "{lhs} vs {rhs}");
        }
        assert!(!field(DVec3::ZERO, 1e-6, 0.0).is_finite());
        assert!(field(DVec3::ZERO, 1e-6, 1e-4).is_finite());
    }
}
