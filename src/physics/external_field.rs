//! An external electric field E(x) (force q_i E(x_i), the paper's Section 2.2 and f_ext
//! of eq. 9) and its derivative (grad E) dx. The swirl field is the paper's guiding field
//! of Section 4.3.2. Mirrored by `field_at` in `gpu/shader/physics.wgsl` and
//! `field_tangent` in `gpu/kernels/tangents/tangent_coulomb.wgsl`.

use crate::config::ExternalField;
use glam::DVec3;

impl ExternalField {
    /// Field value at `x`: uniform E; swirl s [y/z', x/z', 0]; vortex s [-y/z', x/z', 0],
    /// with z' = z clamped to |z'| >= min_z.
    pub fn at(&self, x: DVec3) -> DVec3 {
        match *self {
            Self::Uniform(e) => e,
            Self::Swirl { scale, min_z } => {
                let z = clamp_z(x.z, min_z);
                DVec3::new(scale * x.y / z, scale * x.x / z, 0.0)
            }
            Self::Vortex { scale, min_z } => {
                let z = clamp_z(x.z, min_z);
                DVec3::new(-scale * x.y / z, scale * x.x / z, 0.0)
            }
        }
    }

    /// (grad E(x)) dx, the derivative of [`Self::at`]: 0 for a uniform field; for swirl and
    /// vortex d(a/z') = da/z' - a dz'/z'^2 with dz' = 0 where z is clamped.
    pub fn jvp(&self, x: DVec3, dx: DVec3) -> DVec3 {
        match *self {
            Self::Uniform(_) => DVec3::ZERO,
            Self::Swirl { scale, min_z } | Self::Vortex { scale, min_z } => {
                let (z, dz) = clamp_z_jvp(x.z, dx.z, min_z);
                let dy = scale * (dx.y / z - x.y * dz / (z * z));
                let dxz = scale * (dx.x / z - x.x * dz / (z * z));
                match self {
                    Self::Vortex { .. } => DVec3::new(-dy, dxz, 0.0),
                    _ => DVec3::new(dy, dxz, 0.0),
                }
            }
        }
    }

    /// True when the field has a potential (-E . x for a uniform field).
    pub fn is_conservative(&self) -> bool {
        matches!(self, Self::Uniform(_))
    }
}

/// z moved away from the singular plane to at least `min_z` in magnitude, keeping its side.
fn clamp_z(z: f64, min_z: f64) -> f64 {
    if z.abs() < min_z {
        min_z.copysign(z)
    } else {
        z
    }
}

/// [`clamp_z`] and its tangent for a change dz of z (0 in the clamped region).
fn clamp_z_jvp(z: f64, dz: f64, min_z: f64) -> (f64, f64) {
    if z.abs() < min_z {
        (min_z.copysign(z), 0.0)
    } else {
        (z, dz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central differences (step 1e-6, relative 1e-7: truncation ~1e-12, cancellation
    /// ~1e-10 for O(1) inputs), on both sides of the plane and inside the clamp, where the
    /// field is constant in z.
    #[test]
    fn the_jvp_matches_central_differences() {
        let dx = DVec3::new(0.3, -0.7, 0.2);
        for fld in [
            ExternalField::Uniform(DVec3::new(1.0, -2.0, 0.5)),
            ExternalField::Swirl {
                scale: 3.0,
                min_z: 1e-3,
            },
            ExternalField::Vortex {
                scale: -2.0,
                min_z: 1e-3,
            },
        ] {
            for x in [
                DVec3::new(0.4, -0.9, 0.7),
                DVec3::new(-1.1, 0.2, -0.5),
                DVec3::new(0.5, 0.6, 1e-5),
            ] {
                let h = 1e-6;
                let fd = (fld.at(x + dx * h) - fld.at(x - dx * h)) / (2.0 * h);
                let an = fld.jvp(x, dx);
                assert!(
                    (fd - an).length() <= 1e-7 * an.length().max(1e-30),
                    "{fld:?} at {x}: {fd} vs {an}"
                );
            }
        }
    }

    /// The clamp keeps the side of the plane and never lets |z'| fall below min_z.
    #[test]
    fn the_clamp_keeps_the_side() {
        assert_eq!(clamp_z(1e-5, 1e-3), 1e-3);
        assert_eq!(clamp_z(-1e-5, 1e-3), -1e-3);
        assert_eq!(clamp_z(-0.5, 1e-3), -0.5);
        assert_eq!(clamp_z_jvp(-1e-5, 2.0, 1e-3), (-1e-3, 0.0));
        assert_eq!(clamp_z_jvp(0.5, 2.0, 1e-3), (0.5, 2.0));
    }
}
