//! The range of the initial state, checked at load: positions and velocities that f32
//! (the frames' and the GPU's precision) holds, gravity and uniform-field forces and
//! energies finite in f64, and the external charges' and a swirl or vortex field's forces
//! finite at t = 0, so such an input is refused naming its key instead of being reported
//! as a divergence at step 0 or 1.

use super::ctx::Ctx;
use super::SceneError;
use crate::config::{Config, ExternalField};
use crate::display::num;
use crate::model::{System, COULOMB_K, F32_MAX};
use glam::DVec3;

/// `v[k]` within [`F32_MAX`] in magnitude, named `key[k]`.
pub(super) fn within_f32(ctx: &Ctx, key: &str, v: [f64; 3]) -> Result<(), SceneError> {
    match (0..3).find(|&k| v[k].abs() > F32_MAX) {
        None => Ok(()),
        Some(k) => Err(ctx.invalid(
            format!("{key}[{k}]"),
            format!(
                "must be at most {} in magnitude (f32, the frames' and the GPU's precision: \
                 a state beyond it is a divergence), got {}",
                num(F32_MAX),
                num(v[k])
            ),
        )),
    }
}

/// A force `w_i a` (weight `w`: mass or charge) and its energy `-sum w_i a . x_i` stay
/// finite in f64 while `|a_k|` is at most this.
fn largest(system: &System, w: impl Fn(usize) -> f64) -> f64 {
    let x = system.positions();
    let (mut reach, mut sum, mut wmax) = (0.0f64, 0.0f64, 0.0f64);
    for (i, p) in x.iter().enumerate() {
        let l1 = p.abs().element_sum();
        reach = reach.max(l1);
        sum += w(i).abs() * l1;
        wmax = wmax.max(w(i).abs());
    }
    f64::MAX / reach.max(sum).max(wmax)
}

fn check_field(ctx: &Ctx, key: &str, a: DVec3, limit: f64, what: &str) -> Result<(), SceneError> {
    match (0..3).find(|&k| a[k].abs() > limit) {
        None => Ok(()),
        Some(k) => Err(ctx.invalid(
            format!("{key}[{k}]"),
            format!(
                "must be at most {} in magnitude for this mesh: beyond, {what} can overflow \
                 f64, got {}",
                num(limit),
                num(a[k])
            ),
        )),
    }
}

/// Gravity and a uniform external field against the built system.
pub(super) fn check(ctx: &Ctx, system: &System, config: &Config) -> Result<(), SceneError> {
    let m = system.masses();
    let limit = largest(system, |i| m[i]);
    let what = "m g and the gravity energy -sum m g . x";
    check_field(ctx, "gravity", config.gravity, limit, what)?;
    if let Some(ExternalField::Uniform(e)) = config.external_field {
        let q = system.charges();
        let limit = largest(system, |i| q[i]);
        let what = "q E and the field's energy -sum q E . x";
        check_field(ctx, "external_field.value", e, limit, what)?;
    }
    Ok(())
}

/// The external charges' forces and energy terms and a swirl or vortex field's force on
/// each charged particle at t = 0, in the CPU reference's order of operations
/// (`cpu::forces::external_forces_into`, `cpu::energy::external_energy`), finite: else the
/// charge or field is named. Run after `Config::check_coulomb`, which names coincident
/// charges.
pub(super) fn check_external(
    ctx: &Ctx,
    system: &System,
    config: &Config,
) -> Result<(), SceneError> {
    let eps2 = config.coulomb.softening * config.coulomb.softening;
    let field = config.external_field.filter(|f| !f.is_conservative());
    let (x, q) = (system.positions(), system.charges());
    for i in (0..x.len()).filter(|&i| q[i] != 0.0) {
        let (mut e, mut phi) = (DVec3::ZERO, 0.0);
        for (k, c) in config.external_charges.iter().enumerate() {
            if c.charge == 0.0 {
                continue;
            }
            let d = x[i] - c.position_at(0.0);
            let r2 = d.length_squared() + eps2;
            let (term, u) = (d * (c.charge / (r2 * r2.sqrt())), c.charge / r2.sqrt());
            e += term;
            phi += u;
            let alone =
                (term * COULOMB_K * q[i]).is_finite() && (q[i] * (COULOMB_K * u)).is_finite();
            if !alone
                || !(e * COULOMB_K * q[i]).is_finite()
                || !(q[i] * (COULOMB_K * phi)).is_finite()
            {
                return Err(ctx.invalid(
                    format!("external_charges[{k}].charge"),
                    format!(
                        "{} C at {} m from particle {i} (charge {} C) gives a force or energy \
                         at t = 0 that overflows f64",
                        num(c.charge),
                        num(r2.sqrt()),
                        num(q[i])
                    ),
                ));
            }
        }
        if let Some(
            f @ (ExternalField::Swirl { min_z, .. } | ExternalField::Vortex { min_z, .. }),
        ) = field
        {
            if !(f.at(x[i]) * q[i]).is_finite()
                || !((e * COULOMB_K + f.at(x[i])) * q[i]).is_finite()
            {
                let key = if x[i].z.abs() < min_z {
                    "min_z"
                } else {
                    "scale"
                };
                return Err(ctx.invalid(
                    format!("external_field.{key}"),
                    format!(
                        "the field's force q E on particle {i} (z = {} m, charge {} C) at \
                         t = 0 overflows f64 (|E| is scale times |x| or |y| over max(|z|, \
                         min_z)): raise external_field.min_z or lower external_field.scale",
                        num(x[i].z),
                        num(q[i])
                    ),
                ));
            }
        }
    }
    Ok(())
}
