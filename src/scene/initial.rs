//! The range of the initial state, checked at load: positions and velocities that f32
//! (the frames' and the GPU's precision) holds, and gravity and uniform-field forces and
//! energies finite in f64, so such an input is refused naming its key instead of being
//! reported as a divergence at step 0 (the external charges' and fields' forces at t = 0:
//! `Config::check_external`, which library callers pass too).

use super::ctx::Ctx;
use super::SceneError;
use crate::config::{Config, ExternalField};
use crate::display::num;
use crate::model::{System, F32_MAX};
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
