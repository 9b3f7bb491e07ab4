//! The checks of a [`Config`] against the [`System`] it will advance, before a run starts
//! (`Config::validate_for`, which every backend calls, and the scene loader): the explicit
//! drag's stability, and finite external-charge and external-field forces at t = 0.

use super::{Config, ConfigError, ExternalField};
use crate::display::num;
use crate::model::{robust_length, System, COULOMB_K};
use glam::DVec3;

/// `physics::point_charge::field`, which `config` (a layer below `physics`) cannot call:
/// q_s d / (|d|^2 + eps^2)^(3/2), the same operations in the same order (a test holds the
/// two to the same bits).
fn point_field(d: DVec3, qs: f64, eps2: f64) -> DVec3 {
    let r2 = d.length_squared() + eps2;
    d * (qs / (r2 * r2.sqrt()))
}

impl Config {
    /// The drag is explicit: each step scales a free particle's velocity by 1 - c h / m
    /// (its own part), which grows without bound past c h / m = 2.
    pub(super) fn check_drag(&self, system: &System) -> Result<(), ConfigError> {
        let c = self.world.drag;
        let free = (system.masses().iter().zip(system.pinned())).enumerate();
        let lightest = free
            .filter(|(_, (_, &pinned))| !pinned)
            .map(|(i, (&m, _))| (i, m))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match lightest {
            Some((i, m)) if c * self.dt / m >= 2.0 => Err(ConfigError::new(
                "world.drag",
                format!(
                    "c dt / m = {} for particle {i} (mass {} kg): the explicit drag is \
                     unstable from 2 on; lower world.drag or integrator.dt",
                    num(c * self.dt / m),
                    num(m)
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The external charges' and field's force on each charged particle at t = 0 and the
    /// external charges' energy, finite in f64, formed as `cpu::forces::external_forces_into`
    /// and `cpu::energy::external_energy` form them: else the charge
    /// (`external_charges[k].charge`) or the field (`external_field.min_z`, `.scale` or
    /// `.value`) is named. Run after [`Self::check_coulomb`], which names coincident charges.
    pub fn check_external(&self, system: &System) -> Result<(), ConfigError> {
        let eps2 = self.coulomb.softening * self.coulomb.softening;
        // A 0 C external charge exerts nothing, as in the force code.
        let sources: Vec<(usize, DVec3, f64)> = (self.external_charges.iter().enumerate())
            .filter(|(_, c)| c.charge != 0.0)
            .map(|(k, c)| (k, c.position_at(0.0), c.charge))
            .collect();
        let uniform = match self.external_field {
            Some(ExternalField::Uniform(e)) => e,
            _ => DVec3::ZERO,
        };
        let (x, q) = (system.positions(), system.charges());
        for i in (0..x.len()).filter(|&i| q[i] != 0.0) {
            let (xi, qi) = (x[i], q[i]);
            let (mut e, mut phi) = (DVec3::ZERO, 0.0);
            for &(_, xe, qe) in &sources {
                e += point_field(xi - xe, qe, eps2);
                phi += qe / ((xi - xe).length_squared() + eps2).sqrt();
            }
            e *= COULOMB_K;
            if let Some(f) = self.external_field {
                e += f.at(xi);
            }
            if !((e * qi).is_finite() && (qi * (COULOMB_K * phi - uniform.dot(xi))).is_finite()) {
                return Err(self.external_culprit(i, xi, qi, &sources, eps2));
            }
        }
        Ok(())
    }

    /// What made particle `i`'s external force or energy overflow: the first charge whose
    /// term or running sum does, else the field.
    fn external_culprit(
        &self,
        i: usize,
        xi: DVec3,
        qi: f64,
        sources: &[(usize, DVec3, f64)],
        eps2: f64,
    ) -> ConfigError {
        let finite = |e: DVec3, phi: f64| {
            (e * COULOMB_K * qi).is_finite() && (qi * (COULOMB_K * phi)).is_finite()
        };
        let (mut e, mut phi) = (DVec3::ZERO, 0.0);
        for &(k, xe, qe) in sources {
            let d = xi - xe;
            let (term, u) = (
                point_field(d, qe, eps2),
                qe / (d.length_squared() + eps2).sqrt(),
            );
            e += term;
            phi += u;
            if !finite(term, u) || !finite(e, phi) {
                return ConfigError::new(
                    format!("external_charges[{k}].charge"),
                    format!(
                        "{} C at {} m from particle {i} (charge {} C) gives a force or energy \
                         at t = 0 that overflows f64",
                        num(qe),
                        num(robust_length(d)),
                        num(qi)
                    ),
                );
            }
        }
        match self.external_field {
            Some(ExternalField::Swirl { min_z, .. } | ExternalField::Vortex { min_z, .. }) => {
                let key = if xi.z.abs() < min_z { "min_z" } else { "scale" };
                ConfigError::new(
                    format!("external_field.{key}"),
                    format!(
                        "the field's force q E on particle {i} (z = {} m, charge {} C) at t = 0 \
                         overflows f64 (|E| is scale times |x| or |y| over max(|z|, min_z)): \
                         raise external_field.min_z or lower external_field.scale",
                        num(xi.z),
                        num(qi)
                    ),
                )
            }
            _ => ConfigError::new(
                "external_field.value",
                format!(
                    "the field's force q E or energy -q E . x on particle {i} (charge {} C) \
                     at t = 0 overflows f64",
                    num(qi)
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check's point-charge field is the force code's, bit for bit, overflow included.
    #[test]
    fn the_point_field_is_the_physics_one() {
        let ds = [
            DVec3::new(0.3, -0.2, 0.5),
            DVec3::new(1e-160, 0.0, 0.0),
            DVec3::new(1e200, -3e199, 7.0),
            DVec3::ZERO,
        ];
        for d in ds {
            for (qs, eps2) in [(1e-9, 0.0), (1e300, 1e-6), (-42e-6, 1e-300), (5e-324, 0.0)] {
                let (a, b) = (
                    point_field(d, qs, eps2),
                    crate::physics::point_charge::field(d, qs, eps2),
                );
                assert_eq!(
                    a.to_array().map(f64::to_bits),
                    b.to_array().map(f64::to_bits),
                    "{d} {qs} {eps2}"
                );
            }
        }
    }
}
