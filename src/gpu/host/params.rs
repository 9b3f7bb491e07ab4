//! Host values in the kernels' f32: the checked conversions ([`to_f32`], [`vec4`]), the
//! time step's one host copy ([`TimeStep`]) and the `Params` uniform derived from a
//! system and configuration: every f32 copy of h the kernels read (`World.dt`,
//! `World.dt2`, a tangent kick's `Dispatch.weight`) and the host's time of a step come
//! from [`TimeStep`], so none can drift from another.

use glam::DVec3;

use super::adjacency;
use crate::config::{Config, ExternalField, Integrator, SolverMethod};
use crate::gpu::error::GpuError;
use crate::gpu::layout::{ExtCharge, FieldKind, Params, World, MAX_EXT_CHARGES};
use crate::gpu::shader::{CellLoad, Specialization};
use crate::model::{System, COULOMB_K};

/// `value` in f32, or a typed error naming `what` and `index` when f32 cannot hold it.
pub(in crate::gpu) fn to_f32(value: f64, what: &str, index: usize) -> Result<f32, GpuError> {
    let v = value as f32;
    if v.is_finite() || !value.is_finite() {
        Ok(v)
    } else {
        // A backstop: `range::check` has already refused such values with more context.
        Err(GpuError::F32Range {
            what: format!("{what} {index}"),
            value,
            limit: format!("|value| <= {:e}", f32::MAX),
        })
    }
}

pub(in crate::gpu) fn vec4(
    v: DVec3,
    w: f32,
    what: &str,
    index: usize,
) -> Result<[f32; 4], GpuError> {
    Ok([
        to_f32(v.x, what, index)?,
        to_f32(v.y, what, index)?,
        to_f32(v.z, what, index)?,
        w,
    ])
}

/// The time step h (s): taken once from the configuration; the kernels' f32 copies are
/// derived here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(in crate::gpu) struct TimeStep(f64);

impl TimeStep {
    pub(in crate::gpu) fn new(config: &Config) -> Self {
        Self(config.dt)
    }

    /// h in seconds (f64, the host's copy).
    pub(in crate::gpu) fn seconds(self) -> f64 {
        self.0
    }

    /// Simulated time after `steps` steps (the host's one rule, [`crate::measures::time_at`]).
    pub(in crate::gpu) fn time_at(self, steps: u64) -> f64 {
        crate::measures::time_at(steps, self.0)
    }

    /// `World.dt` and `World.dt2`: h and h^2 rounded to f32 (h^2 formed in f64).
    pub(in crate::gpu) fn uniform(self) -> (f32, f32) {
        (self.0 as f32, (self.0 * self.0) as f32)
    }

    /// The `Dispatch.weight` of an explicit kick of `fraction` h (Verlet's halves: 0.5).
    pub(in crate::gpu) fn kick(self, fraction: f64) -> f32 {
        (fraction * self.0) as f32
    }
}

/// World `system` under `config`: its parameters, with its ranges (Coulomb source slots
/// from `charged.start`, workgroups `wgs`) in the packed buffers.
pub(in crate::gpu) fn world(
    config: &Config,
    dt: TimeStep,
    charged: std::ops::Range<u32>,
    wgs: std::ops::Range<u32>,
) -> Result<World, GpuError> {
    let sqrt_k = COULOMB_K.sqrt();
    let (dt, dt2) = dt.uniform();
    let drag = config.world.drag;
    if drag != 0.0 && !(f64::from(f32::MIN_POSITIVE)..=f64::from(f32::MAX)).contains(&drag) {
        // A GPU may flush a subnormal to 0: the drag would be dropped silently.
        return Err(GpuError::F32Range {
            what: "world.drag".into(),
            value: drag,
            limit: format!("0 or {:e} <= value <= {:e}", f32::MIN_POSITIVE, f32::MAX),
        });
    }
    let mut world = World {
        dt,
        dt2,
        omega: config.solver.omega as f32,
        eps2: to_f32(config.coulomb.softening.powi(2), "softening", 0)?,
        gravity: vec4(config.gravity, 0.0, "gravity", 0)?,
        field: [0.0; 4],
        field_kind: FieldKind::None.bits(),
        n_ext: config.external_charges.len() as u32,
        charged_begin: charged.start,
        charged_end: charged.end,
        wg_begin: wgs.start,
        wg_end: wgs.end,
        drag: drag as f32,
        _pad1: 0,
        ext: [ExtCharge::default(); MAX_EXT_CHARGES],
    };
    match config.external_field {
        None => {}
        Some(ExternalField::Uniform(e)) => {
            world.field_kind = FieldKind::Uniform.bits();
            world.field = vec4(e, 0.0, "external field", 0)?;
        }
        Some(ExternalField::Swirl { scale, min_z }) => {
            world.field_kind = FieldKind::Swirl.bits();
            world.field = [
                to_f32(scale, "field scale", 0)?,
                to_f32(min_z, "field min_z", 0)?,
                0.0,
                0.0,
            ];
        }
        Some(ExternalField::Vortex { scale, min_z }) => {
            world.field_kind = FieldKind::Vortex.bits();
            world.field = [
                to_f32(scale, "field scale", 0)?,
                to_f32(min_z, "field min_z", 0)?,
                0.0,
                0.0,
            ];
        }
    }
    if config.external_charges.len() > MAX_EXT_CHARGES {
        return Err(GpuError::Unsupported(format!(
            "{} external charges; the kernels support at most {MAX_EXT_CHARGES}",
            config.external_charges.len()
        )));
    }
    for (k, c) in config.external_charges.iter().enumerate() {
        let orbit = c.orbit;
        world.ext[k] = ExtCharge {
            pos0: vec4(
                c.position,
                to_f32(c.charge * sqrt_k, "external charge", k)?,
                "external charge position",
                k,
            )?,
            center: match orbit {
                Some(o) => vec4(
                    o.center,
                    to_f32(o.angular_velocity, "orbit angular velocity", k)?,
                    "orbit center",
                    k,
                )?,
                None => [0.0; 4],
            },
            axis: match orbit {
                Some(o) => vec4(o.axis, 1.0, "orbit axis", k)?,
                None => [0.0; 4],
            },
        };
    }
    Ok(world)
}

/// The `Params` uniform of one world, `system` under `config`; `n_wg` is the workgroup
/// count of a per-particle dispatch (partial sums per reduction block).
pub(in crate::gpu) fn params(
    system: &System,
    config: &Config,
    dt: TimeStep,
    n_wg: u32,
) -> Result<Params, GpuError> {
    let n_charged = system.charged_indices().len() as u32;
    Ok(Params {
        n: system.len() as u32,
        n_springs: system.springs().len() as u32,
        n_charged,
        n_wg,
        _pad0: 0,
        cheb_stride: 0,
        n_worlds: 1,
        adj_shift: adjacency::slice_shift(system.len(), system.springs()),
        world: world(config, dt, 0..n_charged, 0..n_wg)?,
    })
}

/// Whether the solver inverts full 3x3 diagonal blocks, so `RhsDiagonal` stores their
/// off-diagonal entries (3 vec4 per particle, else 2; blocks.wgsl's `BLOCK_DIAG`, fixed at
/// pipeline creation through `shader::Specialization`): IMEX under block Jacobi or
/// Chebyshev. Local-global's P = M + h C_L + h^2 L has diagonal blocks d I, so every
/// solver of it, like Jacobi and CG, needs the diagonal entries alone.
pub(in crate::gpu) fn block_diag(config: &Config) -> bool {
    config.integrator == Integrator::Imex
        && matches!(
            config.solver.method,
            SolverMethod::BlockJacobi | SolverMethod::Chebyshev
        )
}

/// The pipeline constants of `config`'s solver whose DDEF cells hold `ddef_load` at
/// set-up, with the default kernel shapes.
pub(in crate::gpu) fn specialization(config: &Config, ddef_load: CellLoad) -> Specialization {
    Specialization {
        block_diag: block_diag(config),
        tuning: Default::default(),
        ddef_load,
    }
}

/// Bytes of `RhsDiagonal` per particle: 2 or 3 vec4 (see [`block_diag`]).
pub(in crate::gpu) fn bd_row_bytes(config: &Config) -> u64 {
    16 * (2 + u64::from(block_diag(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_f32_copy_of_the_step_comes_from_the_host_value() {
        let h = 1.0 / 3.0;
        let t = TimeStep(h);
        assert_eq!(t.uniform(), (h as f32, (h * h) as f32));
        assert_eq!(t.kick(0.5), (0.5 * h) as f32);
        assert_eq!(t.kick(1.0), t.uniform().0);
        assert_eq!(t.time_at(3), 3.0 * h);
    }
}
