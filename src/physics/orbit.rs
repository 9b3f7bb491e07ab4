//! An external charge's position on its circular orbit (the charge the paper rotates
//! through the torus, Section 4.3.1, Figure 8) and its tangent in the initial position.
//! Mirrored by `ext_position` in `gpu/shader/physics.wgsl` and `ext_tangent` in
//! `gpu/kernels/tangents/tangent_coulomb.wgsl`.

use crate::config::ExternalCharge;
use glam::DVec3;

impl ExternalCharge {
    /// Position at time `t`: x_e(t) = c + R(t)(x_e(0) - c), `position` rotated about the
    /// orbit axis k through the center c by omega t (Rodrigues' formula); a static charge
    /// stays at `position`.
    pub fn position_at(&self, t: f64) -> DVec3 {
        match self.orbit {
            None => self.position,
            Some(o) => {
                let r = self.position - o.center;
                let (s, c) = (o.angular_velocity * t).sin_cos();
                let k = o.axis;
                o.center + r * c + k.cross(r) * s + k * k.dot(r) * (1.0 - c)
            }
        }
    }

    /// The tangent of [`Self::position_at`] for a change `dx0` of `position`:
    /// d x_e(t) = R(t) dx0 (the center and axis are not parameters).
    pub fn position_tangent(&self, t: f64, dx0: DVec3) -> DVec3 {
        match self.orbit {
            None => dx0,
            Some(o) => {
                let (s, co) = (o.angular_velocity * t).sin_cos();
                let k = o.axis;
                dx0 * co + k.cross(dx0) * s + k * k.dot(dx0) * (1.0 - co)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Orbit;

    /// The orbit is linear in the initial position: its tangent equals the central
    /// difference to rounding (relative 1e-9 for O(1) inputs and step 1e-4), and a static
    /// charge's tangent is the displacement itself.
    #[test]
    fn the_tangent_matches_central_differences() {
        let mut c = ExternalCharge {
            charge: 1e-6,
            position: DVec3::new(2.0, 1.0, 0.5),
            orbit: Some(Orbit {
                center: DVec3::new(0.5, -0.2, 0.1),
                axis: DVec3::new(1.0, 2.0, 2.0) / 3.0,
                angular_velocity: 0.8,
            }),
        };
        let dx0 = DVec3::new(0.3, -0.7, 0.2);
        let t = 1.3;
        let h = 1e-4;
        let at = |c: &ExternalCharge, a: f64| {
            ExternalCharge {
                position: c.position + dx0 * a,
                ..*c
            }
            .position_at(t)
        };
        let fd = (at(&c, h) - at(&c, -h)) / (2.0 * h);
        let an = c.position_tangent(t, dx0);
        assert!((fd - an).length() <= 1e-9 * an.length(), "{fd} vs {an}");
        assert!((c.position_at(0.0) - c.position).length() <= 1e-15);
        c.orbit = None;
        assert_eq!(c.position_at(t), c.position);
        assert_eq!(c.position_tangent(t, dx0), dx0);
    }
}
