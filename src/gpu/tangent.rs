//! Forward sensitivities on the GPU (DESIGN section 5): the tangent banks and kernels
//! that propagate (dx, dv) along parameter directions ([`TangentDirection`]) step by step
//! with the forward step's own kernels (and, implicit, its matrix), recorded through the
//! step program's hooks (`TangentHooks`), mirroring the CPU reference's
//! `grad::step::tangent_step` term by term. The driver over parameter sets is
//! `grad::gpu_tangent`.
//!
//! IMEX: differentiating A(x_t, k) v' = b(x_t, v_t, theta), x' = x_t + h v' gives per
//! direction A dv' = M dv + h (d f_elastic + d f_field) - dA v', dx' = dx + h dv'. Each
//! step, after the forward solve and before `integrate` (so x_t, the blocks W_k of A and
//! v' are all still there), every direction runs:
//! - `tangent_coulomb`: the field-force JVP (all-pairs Coulomb, external charges, field)
//!   on the direction's active particles (q != 0 or dq != 0), tiled as the forward sum;
//! - `tangent_forces`: per particle the spring-force JVP and dA v' gathered through the CSR
//!   adjacency, the right-hand side into the forward's `Bd` (whose inverse diagonal is
//!   the forward's: same matrix) and dv into the solve's warm start;
//! - the forward's own solve (`Planner::solve`: same method, same fixed iteration count, same
//!   W_k) on that right-hand side;
//! - `tangent_integrate`: dv_{t+1} = dv', dx_{t+1} = dx + h dv'.
//!
//! Explicit integrators (damping explicit, all forces at the state the kick reads):
//! symplectic Euler dv' = dv + h M^-1 df(x, v, t), dx' = dx + h dv'; Verlet
//! dv_half = dv + h/2 M^-1 df(x, v, t), dx' = dx + h dv_half,
//! dv' = dv_half + h/2 M^-1 df(x', v_half, t + h). Before each `explicit_step` kick (which
//! then moves x and v in place) every direction runs `tangent_coulomb` (at t + h before
//! Verlet's second kick, when the clock has not advanced yet), `tangent_forces` in its
//! explicit mode (the damped spring-force JVP at the forward's current (x, v), and the
//! kicked dv into the solve buffer) and `tangent_integrate` (with the drift, except after
//! Verlet's second kick). Pinned rows are never kicked: their tangent stays 0. There is no
//! right-hand side in the explicit solver; a buffer of that shape is added for the field
//! JVP.
//!
//! Local-global (paper eq. 11; per alternation P z' = c + h^2 J(k) d(z), P constant):
//! P dz' = dc + h^2 (J(dk) d + J(k) dd) - dP z', dc = M dy + h C_L dx + h^2 d f_field,
//! dy = dx + h dv, dz starting at dy; at the end dv' = (dz - dx) / h, dx' = dz. Before
//! `lg_prepare` (x still x_t) every direction runs `tangent_coulomb` and
//! `tangent_lg_prepare` (dc into `TanA`, dz = dy into the dv slot); before each forward
//! `lg_rhs`, `tangent_copy` keeps the iterate z the local step reads (the forward solve
//! overwrites it) in `TanZ`; after each forward solve every direction runs
//! `tangent_lg_rhs` (the right-hand side from z, the forward's solution z' and dz), the
//! forward's own solve on P, and `tangent_integrate` (the new dz, or after the last
//! alternation the end of the step).
//!
//! Directions are propagated one after another inside the step, so one forward trajectory
//! serves all; their state, constants and active lists live in per-direction banks
//! (`TanState`, `TanDir`, `TanActive`) indexed by the direction in the dispatch record.
//!
//! What differs from the CPU reference: all in f32, and the implicit integrators' tangent
//! solves run the scene's solver for its fixed iteration count (the CPU's run CG to
//! 1e-12). When the scene's solver converges in that count the two agree to f32 roundoff;
//! when it does not, the GPU tangent is the derivative of neither map exactly. The
//! explicit tangents solve nothing and agree to f32 roundoff.

use glam::DVec3;

use super::buffers::{filled, zeroed, Buf, Buffers};
use super::launch::Planner;
use super::layout::{Dispatch, SLOT_RESIDUAL};
use super::params::{to_f32, vec4};
use super::program::{Kick, SolveEnd, StepHooks};
use super::recording::Op;
use super::shaders;
use super::GpuError;
use crate::config::{Config, CoulombMethod, Integrator};
use crate::model::{System, COULOMB_K};

/// One parameter direction as the tangent kernels read it: d(parameter)/dtheta per
/// particle charge, spring stiffness and external charge (charge and position at t = 0);
/// an absent or short list is zero.
#[derive(Clone, Copy, Debug, Default)]
pub struct TangentDirection<'a> {
    pub dq: Option<&'a [f64]>,
    pub dk: Option<&'a [f64]>,
    pub dqe: &'a [f64],
    pub dxe: &'a [DVec3],
}

impl TangentDirection<'_> {
    fn dq(&self, i: usize) -> f64 {
        self.dq.map_or(0.0, |v| v[i])
    }
    fn dk(&self, k: usize) -> f64 {
        self.dk.map_or(0.0, |v| v[k])
    }
    fn dqe(&self, e: usize) -> f64 {
        self.dqe.get(e).copied().unwrap_or(0.0)
    }
    fn dxe(&self, e: usize) -> DVec3 {
        self.dxe.get(e).copied().unwrap_or(DVec3::ZERO)
    }
}

/// One direction's tangent of the state as read back: dx/dtheta and dv/dtheta per
/// particle.
#[derive(Clone, Debug, PartialEq)]
pub struct TangentVectors {
    pub dx: Vec<DVec3>,
    pub dv: Vec<DVec3>,
}

/// Refuses what the tangents cannot propagate (before a device is opened).
pub(super) fn check(
    system: &System,
    config: &Config,
    directions: &[TangentDirection],
) -> Result<(), GpuError> {
    if config.coulomb.method.ddef().is_some() {
        // DDEF's grid and lists change discontinuously with the positions; there is no
        // tangent of it (the CPU reference refuses it too).
        return Err(GpuError::Unsupported(
            "tangents through coulomb.method = \"ddef\" are not defined; use \"all_pairs\"".into(),
        ));
    }
    if directions.is_empty() {
        return Err(GpuError::Unsupported("tangents: no direction given".into()));
    }
    let (n, ns, ne) = (
        system.len(),
        system.springs().len(),
        config.external_charges.len(),
    );
    for (d, dir) in directions.iter().enumerate() {
        let bad = |what: &str, got: usize, want: usize| {
            GpuError::Unsupported(format!(
                "tangent direction {d}: {what} has {got} entries, the system {want}"
            ))
        };
        if let Some(dq) = dir.dq.filter(|v| v.len() != n) {
            return Err(bad("dq", dq.len(), n));
        }
        if let Some(dk) = dir.dk.filter(|v| v.len() != ns) {
            return Err(bad("dk", dk.len(), ns));
        }
        if dir.dqe.len() > ne {
            return Err(bad("dqe", dir.dqe.len(), ne));
        }
        if dir.dxe.len() > ne {
            return Err(bad("dxe", dir.dxe.len(), ne));
        }
    }
    Ok(())
}

/// The tangents' part of a solver: how many directions, and the kernels each step adds
/// at the step program's hooks.
pub(super) struct TangentHooks {
    n: u32,
    /// Active particles per direction (0: the field JVP is skipped).
    counts: Vec<u32>,
    all_pairs: bool,
    lg: bool,
    /// The buffer the last tangent solve left its solution in (None: no solve).
    last: Option<Buf>,
}

impl TangentHooks {
    /// Checks the sizes, creates the tangent banks (all tangents start at zero) and adds
    /// them to `buffers`, before the step is planned.
    pub(super) fn new(
        device: &wgpu::Device,
        buffers: &mut Buffers,
        system: &System,
        config: &Config,
        directions: &[TangentDirection],
    ) -> Result<Self, GpuError> {
        check(system, config, directions)?;
        let n = system.len();
        let springs = system.springs();
        let ne = config.external_charges.len();
        let nd = directions.len();
        let sqrt_k = COULOMB_K.sqrt();
        // Per-direction constants (bank layouts in shaders/tangent_coulomb.wgsl).
        let stride = n + springs.len() + ne;
        let mut tdir: Vec<[f32; 4]> = Vec::with_capacity(nd * stride);
        let mut active: Vec<u32> = vec![0; nd * n];
        let mut counts = Vec::with_capacity(nd);
        let q = system.charges();
        for (d, dir) in directions.iter().enumerate() {
            let mut count = 0;
            for (i, &qi) in q.iter().enumerate() {
                let dq = dir.dq(i);
                tdir.push([
                    to_f32(dq * sqrt_k, "charge tangent of particle", i)?,
                    to_f32(dq, "charge tangent of particle", i)?,
                    0.0,
                    0.0,
                ]);
                // The reference's active set: such a particle acts and is acted on.
                if qi != 0.0 || dq != 0.0 {
                    active[d * n + count] = i as u32;
                    count += 1;
                }
            }
            counts.push(count as u32);
            for (k, s) in springs.iter().enumerate() {
                tdir.push([
                    to_f32(s.stiffness, "stiffness of spring", k)?,
                    to_f32(s.rest_length, "rest length of spring", k)?,
                    to_f32(s.damping, "damping of spring", k)?,
                    to_f32(dir.dk(k), "stiffness tangent of spring", k)?,
                ]);
            }
            for e in 0..ne {
                tdir.push(vec4(
                    dir.dxe(e),
                    to_f32(dir.dqe(e) * sqrt_k, "external charge tangent", e)?,
                    "external position tangent",
                    e,
                )?);
            }
        }
        let state_bytes = (nd * n * 32) as u64;
        // The forward's `Bd` rows (tangent_coulomb writes row b of each).
        let bd_row = super::params::bd_row_bytes(config);
        let limits = device.limits();
        for (what, bytes) in [
            ("tangent state (2 n vec4 per direction)", state_bytes),
            (
                "tangent constants (vec4 per particle, spring and external charge, per direction)",
                (tdir.len() * 16) as u64,
            ),
            // The explicit integrators' field-JVP buffer (the implicit ones' Bd, checked
            // with the solver).
            ("tangent field forces (2 or 3 n vec4)", n as u64 * bd_row),
        ] {
            let limit = limits
                .max_storage_buffer_binding_size
                .min(limits.max_buffer_size);
            if bytes > limit {
                return Err(GpuError::LimitExceeded {
                    what: format!("{what} for {nd} directions"),
                    needed: bytes,
                    limit,
                });
            }
        }
        let lg = config.integrator == Integrator::LocalGlobal;
        let vec4s = (n * 16) as u64;
        // Buffers are zero-initialized: tangents start at 0.
        for (b, buffer) in [
            (
                Buf::TanState,
                zeroed(device, "msc tangent state", state_bytes),
            ),
            (
                Buf::TanDir,
                filled(
                    device,
                    "msc tangent directions",
                    bytemuck::cast_slice(&tdir),
                    16,
                ),
            ),
            (
                Buf::TanActive,
                filled(
                    device,
                    "msc tangent active particles",
                    bytemuck::cast_slice(&active),
                    16,
                ),
            ),
            (Buf::TanU, zeroed(device, "msc tangent solve", vec4s)),
            (
                Buf::TanS,
                zeroed(device, "msc tangent solve scratch", vec4s),
            ),
            (
                Buf::TanA,
                zeroed(
                    device,
                    "msc tangent local-global rhs",
                    if lg { state_bytes / 2 } else { 16 },
                ),
            ),
            (
                Buf::TanZ,
                zeroed(
                    device,
                    "msc tangent local-global iterate",
                    if lg { vec4s } else { 16 },
                ),
            ),
        ] {
            buffers.insert(b, buffer);
        }
        let bd_bytes = n as u64 * bd_row;
        if buffers.get(Buf::Bd)?.size() < bd_bytes {
            // Explicit integrators have no right-hand side; the field JVP goes there.
            buffers.insert(
                Buf::Bd,
                zeroed(device, "msc tangent field forces", bd_bytes),
            );
        }
        Ok(Self {
            n: n as u32,
            counts,
            all_pairs: config.coulomb.method == CoulombMethod::AllPairs,
            lg,
            last: None,
        })
    }

    pub(super) fn directions(&self) -> usize {
        self.counts.len()
    }

    /// After the step is planned: the residual of the last tangent solve of a step (its
    /// right-hand side is still in `Bd`), reduced into `SLOT_RESIDUAL`; empty when the
    /// tangents solve nothing (explicit integrators).
    pub(super) fn residual(&self, p: &mut Planner) -> Result<Vec<Op>, GpuError> {
        match self.last {
            Some(last) => Ok(vec![p.residual(last)?, p.reduce(SLOT_RESIDUAL, 0)?]),
            None => Ok(Vec::new()),
        }
    }

    fn check_direction(&self, kernel: &'static str, d: u32) -> Result<(), GpuError> {
        if d as usize >= self.counts.len() {
            return Err(GpuError::Binding {
                kernel,
                problem: format!("direction {d} of {}", self.counts.len()),
            });
        }
        Ok(())
    }

    /// `tangent_coulomb` for direction `d` (nothing when it has no active particle), at
    /// the step clock's time or, with `later`, at t + h: the field-force JVP into `Bd`.
    fn field_jvp(
        &self,
        p: &mut Planner,
        ops: &mut Vec<Op>,
        d: u32,
        later: bool,
    ) -> Result<(), GpuError> {
        self.check_direction(shaders::TANGENT_COULOMB.name, d)?;
        let na = self.counts[d as usize];
        if na == 0 {
            return Ok(());
        }
        let record = p.record(Dispatch {
            iter: d,
            mode: u32::from(self.all_pairs) | (u32::from(later) << 1),
            block: na,
            ..Default::default()
        });
        ops.push(p.dispatch(
            shaders::TANGENT_COULOMB,
            &[
                Buf::X,
                Buf::Props,
                Buf::TanState,
                Buf::TanDir,
                Buf::TanActive,
                Buf::Clock,
                Buf::Bd,
            ],
            record,
            na,
        )?);
        Ok(())
    }

    /// `tangent_forces` with the forward velocity `vel` (IMEX: v'; explicit: the kick's
    /// v), `record` carrying the direction and mode.
    fn forces(&self, p: &mut Planner, vel: Buf, record: u32) -> Result<Op, GpuError> {
        p.dispatch(
            shaders::TANGENT_FORCES,
            &[
                Buf::Props,
                Buf::X,
                vel,
                Buf::Adj,
                Buf::TanDir,
                Buf::TanState,
                Buf::TanU,
                Buf::Bd,
            ],
            record,
            self.n,
        )
    }

    /// `tangent_integrate` of direction `d` from `sol` (mode 1: dv only; 2: the end of a
    /// local-global step).
    fn integrate(&self, p: &mut Planner, sol: Buf, d: u32, mode: u32) -> Result<Op, GpuError> {
        self.check_direction(shaders::TANGENT_INTEGRATE.name, d)?;
        let record = p.record(Dispatch {
            iter: d,
            mode,
            ..Default::default()
        });
        p.dispatch(
            shaders::TANGENT_INTEGRATE,
            &[sol, Buf::TanState],
            record,
            self.n,
        )
    }

    /// The record of direction `d` whose mode bit 0 says it has active particles.
    fn direction_record(&self, p: &mut Planner, d: u32, mode: u32, weight: f32) -> u32 {
        p.record(Dispatch {
            iter: d,
            mode: mode | u32::from(self.counts[d as usize] > 0),
            weight,
            ..Default::default()
        })
    }
}

impl StepHooks for TangentHooks {
    /// Local-global, x still x_t: the field JVP and dc into `TanA`, dz = dy.
    fn lg_start(&mut self, p: &mut Planner, ops: &mut Vec<Op>) -> Result<(), GpuError> {
        for d in 0..self.directions() as u32 {
            self.field_jvp(p, ops, d, false)?;
            let record = self.direction_record(p, d, 0, 0.0);
            ops.push(p.dispatch(
                shaders::TANGENT_LG_PREPARE,
                &[
                    Buf::Props,
                    Buf::Adj,
                    Buf::TanDir,
                    Buf::Bd,
                    Buf::TanState,
                    Buf::TanA,
                ],
                record,
                self.n,
            )?);
        }
        Ok(())
    }

    /// Local-global: keep the iterate z the local step reads (the forward solve
    /// overwrites it) in `TanZ`.
    fn before_local(
        &mut self,
        p: &mut Planner,
        ops: &mut Vec<Op>,
        _alternation: u32,
        iterate: Buf,
    ) -> Result<(), GpuError> {
        let m0 = p.mode(0);
        ops.push(p.dispatch(shaders::TANGENT_COPY, &[iterate, Buf::TanZ], m0, self.n)?);
        Ok(())
    }

    /// IMEX: per direction the field JVP, `tangent_forces` (right-hand side into `Bd`,
    /// dv as warm start), the forward's own solve and `tangent_integrate`, before the
    /// forward `integrate` moves x and the clock. Local-global, alternation a (z^a in
    /// `TanZ`, z^{a+1} in the solution): `tangent_lg_rhs`, the solve on P and the new dz
    /// (after the last alternation, the end of the step).
    fn after_solve(
        &mut self,
        p: &mut Planner,
        ops: &mut Vec<Op>,
        end: SolveEnd,
    ) -> Result<(), GpuError> {
        let imex = !self.lg;
        for d in 0..self.directions() as u32 {
            let last = if imex {
                self.field_jvp(p, ops, d, false)?;
                let record = self.direction_record(p, d, 0, 0.0);
                ops.push(self.forces(p, end.solution, record)?);
                let last = p.solve(ops, Buf::TanU, Buf::TanS)?;
                ops.push(self.integrate(p, last, d, 0)?);
                last
            } else {
                let record = p.record(Dispatch {
                    iter: d,
                    ..Default::default()
                });
                ops.push(p.dispatch(
                    shaders::TANGENT_LG_RHS,
                    &[
                        Buf::Adj,
                        Buf::TanDir,
                        Buf::TanZ,
                        end.solution,
                        Buf::TanA,
                        Buf::TanState,
                        Buf::TanU,
                        Buf::Bd,
                    ],
                    record,
                    self.n,
                )?);
                let last = p.solve(ops, Buf::TanU, Buf::TanS)?;
                let mode = if end.alternation + 1 == end.alternations {
                    2
                } else {
                    1
                };
                ops.push(self.integrate(p, last, d, mode)?);
                last
            };
            self.last = Some(last);
        }
        Ok(())
    }

    /// Explicit: each kick reads the forces at the state it finds in (x, v) and then
    /// moves it, so the force JVP runs just before it at the same (x, v, t) (grad::step's
    /// total_force_jvp); the kicked dv goes to `TanU`, and the first kick also drifts dx.
    fn before_kick(
        &mut self,
        p: &mut Planner,
        ops: &mut Vec<Op>,
        kick: Kick,
    ) -> Result<(), GpuError> {
        let weight = p.dt.kick(kick.fraction);
        for d in 0..self.directions() as u32 {
            self.field_jvp(p, ops, d, kick.second)?;
            let record = self.direction_record(p, d, 2, weight);
            // The forward's v is the velocity the kick's damping uses.
            ops.push(self.forces(p, Buf::V, record)?);
            ops.push(self.integrate(p, Buf::TanU, d, u32::from(kick.second))?);
        }
        Ok(())
    }
}
