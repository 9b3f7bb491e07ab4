//! The rows the forward buffers start with, converted from the system's f64 values with
//! f32 range checks that name the particle or spring: state (`X`, `V`), particle
//! properties (`Props`), spring parameters (`SpringParams`) and local-global's constant
//! matrix (`SpringBlocks`, `RhsDiagonal`). Shared by a solver's creation and the writes
//! into a running one (`solver::update`).

use glam::DVec3;

use super::params::{to_f32, vec4};
use crate::gpu::error::GpuError;
use crate::model::{System, COULOMB_K};

/// One `vec4<f32>` of a storage buffer.
pub(in crate::gpu) type Vec4 = [f32; 4];

/// Positions (xyz, 1) and velocities (xyz, 0) as the `X` and `V` buffers hold them.
pub(in crate::gpu) fn state_vec4(
    x: &[DVec3],
    v: &[DVec3],
) -> Result<(Vec<Vec4>, Vec<Vec4>), GpuError> {
    let x = x
        .iter()
        .enumerate()
        .map(|(i, p)| vec4(*p, 1.0, "position of particle", i))
        .collect::<Result<_, _>>()?;
    let v = v
        .iter()
        .enumerate()
        .map(|(i, p)| vec4(*p, 0.0, "velocity of particle", i))
        .collect::<Result<_, _>>()?;
    Ok((x, v))
}

/// The `Props` rows: (mass, charge * sqrt(k_c), charge, pinned) per particle.
pub(in crate::gpu) fn particle_props(system: &System) -> Result<Vec<Vec4>, GpuError> {
    let sqrt_k = COULOMB_K.sqrt();
    (0..system.len())
        .map(|i| {
            let q = system.charges()[i];
            Ok([
                to_f32(system.masses()[i], "mass of particle", i)?,
                to_f32(q * sqrt_k, "charge of particle", i)?,
                to_f32(q, "charge of particle", i)?,
                if system.pinned()[i] { 1.0 } else { 0.0 },
            ])
        })
        .collect()
}

/// The `SpringParams` rows: (k, L, c, 0) per spring.
pub(in crate::gpu) fn spring_params(system: &System) -> Result<Vec<Vec4>, GpuError> {
    system
        .springs()
        .iter()
        .enumerate()
        .map(|(k, s)| {
            Ok([
                to_f32(s.stiffness, "stiffness of spring", k)?,
                to_f32(s.rest_length, "rest length of spring", k)?,
                to_f32(s.damping, "damping of spring", k)?,
                0.0,
            ])
        })
        .collect()
}

/// Local-global: the matrix P = M + h C_L + h^2 L is constant: its edge weights as
/// W_k = (h c + h^2 k) I, i.e. (m, s) = (0, w), then the unused (n, fmag) half, and per
/// particle its two `RhsDiagonal` rows (`params::block_diag` is false under local-global):
/// b (written by lg_rhs), the diagonal inverse with the row's mass (0: pinned) in w.
/// `h(i)`: the time step of particle i's world (a spring's is its first particle's).
pub(in crate::gpu) fn local_global_init(
    system: &System,
    h: &dyn Fn(u32) -> f64,
) -> Result<(Vec<Vec4>, Vec<Vec4>), GpuError> {
    let mut sf_init = Vec::with_capacity(2 * system.springs().len());
    let mut bd_init = Vec::with_capacity(2 * system.len());
    let mut diag: Vec<f64> = system.masses().to_vec();
    for (k, s) in system.springs().iter().enumerate() {
        let h = h(s.i);
        let w = h * s.damping + h * h * s.stiffness;
        diag[s.i as usize] += w;
        diag[s.j as usize] += w;
        sf_init.push([
            0.0,
            0.0,
            0.0,
            to_f32(w, "local-global weight of spring", k)?,
        ]);
    }
    sf_init.resize(2 * system.springs().len(), [0.0; 4]);
    for (i, d) in diag.iter().enumerate() {
        let inv = to_f32(1.0 / d, "diagonal of particle", i)?;
        let mass = if system.pinned()[i] {
            0.0
        } else {
            to_f32(system.masses()[i], "mass of particle", i)?
        };
        bd_init.push([0.0; 4]);
        bd_init.push([inv, inv, inv, mass]);
    }
    Ok((sf_init, bd_init))
}
