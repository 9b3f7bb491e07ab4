//! The t = 0 check that the external charges' and field's force on every charged particle,
//! and the external charges' energy, are finite in f64 (`Config::check_external`, which
//! `Config::validate_for` runs for every backend, and the scene loader), written with the
//! force code's formulas (`point_charge`, `ExternalField::at`) as a method of the config,
//! as the field and the orbit are (`physics` sits above `config`).

use super::point_charge;
use crate::config::{Config, ConfigError, ExternalField};
use crate::display::num;
use crate::model::{robust_length, System, COULOMB_K};
use glam::DVec3;

impl Config {
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
                e += point_charge::field(xi - xe, qe, eps2);
                phi += point_charge::potential(xi - xe, qe, eps2);
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
                point_charge::field(d, qe, eps2),
                point_charge::potential(d, qe, eps2),
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
