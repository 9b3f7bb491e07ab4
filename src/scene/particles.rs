//! The particles and springs of a scene (`[material]`, `[pin]`): masses, charges, pinned
//! particles and rest lengths on the built mesh, as a checked [`System`].

use super::ctx::{check, finite3, non_negative, one_of, positive, Ctx};
use super::schema::{PinWhere, SceneFile};
use super::SceneError;
use crate::model::{Mesh, ModelError, Spring, System, SystemDesc};
use glam::DVec3;

/// Particle `i` is charged iff floor((i+1) f) > floor(i f): floor(n f) charged particles,
/// spread evenly and deterministically.
fn is_charged(i: usize, fraction: f64) -> bool {
    ((i + 1) as f64 * fraction).floor() > (i as f64 * fraction).floor()
}

pub(super) fn build_system(f: &SceneFile, mesh: Mesh, ctx: &Ctx) -> Result<System, SceneError> {
    let n = mesh.positions.len();
    let mat = &f.material;

    one_of(
        ctx,
        ("material.mass", mat.mass),
        ("material.total_mass", mat.total_mass),
    )?;
    let (mass_key, mass) = match mat.total_mass {
        Some(total) => (
            "material.total_mass",
            positive(ctx, "material.total_mass", total)? / n as f64,
        ),
        None => (
            "material.mass",
            positive(ctx, "material.mass", mat.mass.unwrap_or(0.01))?,
        ),
    };
    // A subnormal mass (given, or total_mass / n underflowing) is positive but its inverse,
    // every integrator's acceleration, overflows: the run would diverge at step 1.
    if !(1.0 / mass).is_finite() {
        let each = match mat.total_mass {
            Some(total) => format!(
                "{} kg over {n} particles is {} kg each",
                crate::display::num(total),
                crate::display::num(mass)
            ),
            None => format!("{} kg", crate::display::num(mass)),
        };
        return Err(ctx.invalid(
            mass_key,
            format!(
                "{each}: its inverse 1/m overflows f64 (a particle's mass must be at least \
                 about 5.6e-309 kg)"
            ),
        ));
    }
    let stiffness = non_negative(ctx, "material.stiffness", mat.stiffness.unwrap_or(10.0))?;
    let damping = non_negative(ctx, "material.damping", mat.damping.unwrap_or(0.0))?;
    let scale = positive(
        ctx,
        "material.rest_length_scale",
        mat.rest_length_scale.unwrap_or(1.0),
    )?;
    let fraction = mat.charged_fraction.unwrap_or(1.0);
    check(
        ctx,
        "material.charged_fraction",
        fraction,
        (0.0..=1.0).contains(&fraction),
        "in [0, 1]",
    )?;
    one_of(
        ctx,
        ("material.charge", mat.charge),
        ("material.total_charge", mat.total_charge),
    )?;
    let charged: Vec<bool> = (0..n).map(|i| is_charged(i, fraction)).collect();
    let n_charged = charged.iter().filter(|&&c| c).count();
    // A charge given to no particle would switch the Coulomb forces off silently.
    let none_charged = |key: &str| {
        ctx.invalid(
            key,
            format!(
                "no particle is charged: material.charged_fraction = {} charges floor({n} x {}) \
                 = 0 of the {n} particles (raise it, or give no charge)",
                crate::display::num(fraction),
                crate::display::num(fraction)
            ),
        )
    };
    let (charge_key, q) = match mat.total_charge {
        Some(total) => {
            let key = "material.total_charge";
            check(ctx, key, total, true, "finite")?;
            if n_charged == 0 {
                if total != 0.0 {
                    return Err(none_charged(key));
                }
                (key, 0.0)
            } else {
                (key, total / n_charged as f64)
            }
        }
        None => {
            let key = "material.charge";
            let q = check(ctx, key, mat.charge.unwrap_or(0.0), true, "finite")?;
            if n_charged == 0 && q != 0.0 {
                return Err(none_charged(key));
            }
            (key, q)
        }
    };
    let charges = charged.iter().map(|&c| if c { q } else { 0.0 }).collect();

    let mut pinned = vec![false; n];
    let mut velocities = vec![DVec3::ZERO; n];
    if let Some(pin) = &f.pin {
        if pin.indices.is_empty() && pin.where_.is_none() {
            return Err(ctx.invalid("pin", "give pin.indices and/or pin.where"));
        }
        for (k, &i) in pin.indices.iter().enumerate() {
            if i >= n as u64 {
                return Err(ctx.invalid(
                    format!("pin.indices[{k}]"),
                    format!("particle {i} is out of range (the mesh has {n} particles)"),
                ));
            }
            pinned[i as usize] = true;
        }
        if let Some(w) = pin.where_ {
            for i in select(&mesh.positions, w) {
                pinned[i] = true;
            }
        }
        let v = finite3(ctx, "pin.velocity", pin.velocity.unwrap_or([0.0; 3]))?;
        super::initial::within_f32(ctx, "pin.velocity", v.to_array())?;
        let pins = pinned.iter().filter(|&&p| p).count() as f64;
        // The kinetic energy of the pinned particles at t = 0.
        if !(0.5 * mass * pins * v.length_squared()).is_finite() {
            return Err(ctx.invalid(
                "pin.velocity",
                format!(
                    "the pinned particles' kinetic energy m |v|^2 / 2 overflows f64 (mass \
                     {} kg, {pins} pinned)",
                    crate::display::num(mass)
                ),
            ));
        }
        for (vel, _) in velocities.iter_mut().zip(&pinned).filter(|(_, &p)| p) {
            *vel = v;
        }
    }

    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness,
            rest_length: scale * (mesh.positions[i as usize] - mesh.positions[j as usize]).length(),
            damping,
        })
        .collect();
    let desc = SystemDesc {
        positions: mesh.positions,
        velocities,
        masses: vec![mass; n],
        charges,
        pinned,
        springs,
        faces: mesh.faces,
    };
    System::new(desc).map_err(|e| {
        let key = match &e {
            ModelError::BadMass { .. } => mass_key,
            ModelError::NonFinite {
                what: "velocity", ..
            } => "pin.velocity",
            ModelError::NonFinite { what: "charge", .. } => charge_key,
            ModelError::BadSpringParameter {
                what: "stiffness", ..
            } => "material.stiffness",
            ModelError::BadSpringParameter {
                what: "damping", ..
            } => "material.damping",
            ModelError::BadSpringParameter { .. } => "material.rest_length_scale",
            _ => "mesh",
        };
        SceneError::Model {
            at: ctx.at(key),
            key: key.to_string(),
            source: Box::new(e),
        }
    })
}

/// Particles selected by `pin.where`. Coordinates within 1e-9 of the extent of the extreme
/// count as on it, so a row computed with rounding is still one row.
fn select(x: &[DVec3], w: PinWhere) -> Vec<usize> {
    let lo = x.iter().fold(DVec3::INFINITY, |a, &p| a.min(p));
    let hi = x.iter().fold(DVec3::NEG_INFINITY, |a, &p| a.max(p));
    let tol = 1e-9 * (hi - lo).max_element().max(f64::MIN_POSITIVE);
    let extreme = |axis: usize, max: bool| -> Vec<usize> {
        let target = if max { hi[axis] } else { lo[axis] };
        (0..x.len())
            .filter(|&i| (x[i][axis] - target).abs() <= tol)
            .collect()
    };
    match w {
        PinWhere::MaxX => extreme(0, true),
        PinWhere::MinX => extreme(0, false),
        PinWhere::MaxY => extreme(1, true),
        PinWhere::MinY => extreme(1, false),
        PinWhere::MaxZ => extreme(2, true),
        PinWhere::MinZ => extreme(2, false),
        PinWhere::CornersMaxY => {
            let top = extreme(1, true);
            // First index wins ties, so the choice is deterministic.
            let left = top
                .iter()
                .copied()
                .min_by(|&a, &b| x[a].x.total_cmp(&x[b].x));
            let right = top
                .iter()
                .copied()
                .rev()
                .max_by(|&a, &b| x[a].x.total_cmp(&x[b].x));
            let mut out: Vec<usize> = left.into_iter().chain(right).collect();
            out.dedup();
            out
        }
    }
}
