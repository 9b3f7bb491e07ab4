//! Forward sensitivities on the GPU (docs/physics.md §9): the tangent banks and kernels
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
//!   with DDEF instead of all-pairs, the DDEF tangent kernels (`kernels::ddef_tangent`)
//!   add the internal part on the forward evaluation's frozen structure;
//! - `tangent_forces`: per particle the spring-force JVP and dA v' gathered through the CSR
//!   adjacency, the right-hand side into the forward's `RhsDiagonal` (whose inverse
//!   diagonal is the forward's: same matrix) and dv into the solve's warm start;
//! - the forward's own solve (`Recorder::solve`: same method, same fixed iteration count,
//!   same W_k) on that right-hand side;
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
//! Verlet's second kick). Pinned rows are never kicked: their tangent stays 0. The explicit
//! solver's `RhsDiagonal` holds no right-hand side; with tangents it is sized for the
//! field JVP (the buffer table).
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

use super::program::{Kick, SolveEnd, StepHooks};
use crate::config::{Config, CoulombMethod, Integrator};
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::{Buf, Buffers};
use crate::gpu::host::params::{to_f32, vec4};
use crate::gpu::host::range::zero_or_normal;
use crate::gpu::host::recorder::{refuse, Recorder};
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::tangents::{TangentBit, TangentEnd, TANGENT_COULOMB, TANGENT_INTEGRATE};
use crate::gpu::layout::{Dispatch, SLOT_RESIDUAL};
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
pub(in crate::gpu) fn check(
    system: &System,
    config: &Config,
    directions: &[TangentDirection],
) -> Result<(), GpuError> {
    if let Some(e) = config.not_differentiable() {
        return Err(GpuError::Unsupported(format!("tangents: {e}")));
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
        let sqrt_k = COULOMB_K.sqrt();
        for (i, &v) in dir.dq.unwrap_or(&[]).iter().enumerate() {
            check_entry(d, "charge tangent of particle", i, v)?;
            check_entry(
                d,
                "charge tangent times sqrt(k_c) of particle",
                i,
                v * sqrt_k,
            )?;
        }
        for (k, &v) in dir.dk.unwrap_or(&[]).iter().enumerate() {
            check_entry(d, "stiffness tangent of spring", k, v)?;
        }
        for (e, &v) in dir.dqe.iter().enumerate() {
            check_entry(d, "charge tangent of external charge", e, v)?;
            check_entry(
                d,
                "charge tangent times sqrt(k_c) of external charge",
                e,
                v * sqrt_k,
            )?;
        }
        for (e, v) in dir.dxe.iter().enumerate() {
            for c in v.to_array() {
                check_entry(d, "position tangent of external charge", e, c)?;
            }
        }
        // DDEF's tangent freezes its structure, the charged set included
        // (`crate::ddef::lattice_tangent`): a charge tangent on an uncharged particle
        // would add a source, and has no derivative there.
        if config.coulomb.method.ddef().is_some() {
            let q = system.charges();
            if let Some(i) = (0..n).find(|&i| q[i] == 0.0 && dir.dq(i) != 0.0) {
                return Err(GpuError::Unsupported(format!(
                    "tangent direction {d}: particle {i} is uncharged but has a charge \
                     tangent; with coulomb.method = \"ddef\" the charged particles are part \
                     of the frozen DDEF structure"
                )));
            }
        }
    }
    Ok(())
}

/// One entry of direction `d` as the kernels take it: finite, and 0 or a normal f32 (a
/// smaller one would be flushed to 0, the direction silently dropped).
fn check_entry(d: usize, what: &str, index: usize, value: f64) -> Result<(), GpuError> {
    if !value.is_finite() {
        return Err(GpuError::Unsupported(format!(
            "tangent direction {d}: {what} {index} is not finite ({value})"
        )));
    }
    zero_or_normal(
        || format!("{what} {index} in tangent direction {d}"),
        value,
        "",
    )
}

/// The tangents' part of a solver: how many directions, and the kernels each step adds
/// at the step program's hooks.
pub(in crate::gpu) struct TangentHooks {
    /// Active particles per direction (0: the field JVP is skipped).
    counts: Vec<u32>,
    all_pairs: bool,
    lg: bool,
    /// The buffer the last tangent solve left its solution in (None: no solve).
    last: Option<Buf>,
}

impl TangentHooks {
    /// Creates the tangent banks at their sizes in the buffer table (`buffers` was sized
    /// for `directions`; all tangents start at zero), before the step is recorded.
    /// `directions` were checked ([`check`]).
    pub(in crate::gpu) fn new(
        device: &wgpu::Device,
        buffers: &mut Buffers,
        system: &System,
        config: &Config,
        directions: &[TangentDirection],
    ) -> Result<Self, GpuError> {
        let n = system.len();
        let springs = system.springs();
        let ne = config.external_charges.len();
        let nd = directions.len();
        let sqrt_k = COULOMB_K.sqrt();
        // Per-direction constants (bank layouts in kernels/tangents/tangent_coulomb.wgsl).
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
        buffers.put(device, Buf::TanDir, bytemuck::cast_slice(&tdir));
        buffers.put(device, Buf::TanActive, bytemuck::cast_slice(&active));
        for b in [
            Buf::TanState,
            Buf::TanU,
            Buf::TanS,
            Buf::TanA,
            Buf::TanZ,
            Buf::TanSorted,
            Buf::TanFar,
            Buf::DdefTetBar,
            Buf::DdefAdjPart,
            Buf::DdefAdjOut,
        ] {
            buffers.put(device, b, &[]);
        }
        Ok(Self {
            counts,
            all_pairs: config.coulomb.method == CoulombMethod::AllPairs,
            lg: config.integrator == Integrator::LocalGlobal,
            last: None,
        })
    }

    pub(in crate::gpu) fn directions(&self) -> usize {
        self.counts.len()
    }

    /// After the step is recorded: the residual of the last tangent solve of a step (its
    /// right-hand side is still in `RhsDiagonal`), reduced into `SLOT_RESIDUAL`; empty when
    /// the tangents solve nothing (explicit integrators).
    pub(in crate::gpu) fn residual(&self, p: &mut Recorder) -> Result<Vec<Op>, GpuError> {
        match self.last {
            Some(last) => Ok(vec![p.residual(last)?, p.reduce(SLOT_RESIDUAL, 0)?]),
            None => Ok(Vec::new()),
        }
    }

    fn check_direction(&self, kernel: &'static str, d: u32) -> Result<(), GpuError> {
        if d as usize >= self.counts.len() {
            return Err(refuse(
                kernel,
                format!("direction {d} of {}", self.counts.len()),
            ));
        }
        Ok(())
    }

    /// `tangent_coulomb` for direction `d` (nothing when it has no active particle), at
    /// the step clock's time or, with `later`, at t + h.
    pub(super) fn field_jvp(
        &self,
        p: &mut Recorder,
        ops: &mut Vec<Op>,
        d: u32,
        later: bool,
    ) -> Result<(), GpuError> {
        self.check_direction(TANGENT_COULOMB.name, d)?;
        let active = self.counts[d as usize];
        p.tangent_field(ops, d, active, self.all_pairs, later)?;
        // DDEF (its evaluation at this state still in its buffers): the internal part.
        if active > 0 {
            p.ddef_tangent(ops, d)?;
        }
        Ok(())
    }

    /// `tangent_integrate` of direction `d` from `sol`.
    fn integrate(
        &self,
        p: &mut Recorder,
        sol: Buf,
        d: u32,
        end: TangentEnd,
    ) -> Result<Op, GpuError> {
        self.check_direction(TANGENT_INTEGRATE.name, d)?;
        p.tangent_integrate(sol, d, end)
    }

    /// The record of direction `d` with `bits`, plus `TangentBit::Field` when it has
    /// active particles.
    fn direction_record(&self, p: &mut Recorder, d: u32, bits: u32, weight: f32) -> u32 {
        let field = if self.counts[d as usize] > 0 {
            TangentBit::Field.bits()
        } else {
            0
        };
        p.record(Dispatch {
            iter: d,
            mode: bits | field,
            weight,
            ..Default::default()
        })
    }
}

impl StepHooks for TangentHooks {
    /// Local-global, x still x_t: the field JVP and dc into `TanA`, dz = dy.
    fn lg_start(&mut self, p: &mut Recorder, ops: &mut Vec<Op>) -> Result<(), GpuError> {
        for d in 0..self.directions() as u32 {
            self.field_jvp(p, ops, d, false)?;
            let record = self.direction_record(p, d, 0, 0.0);
            ops.push(p.tangent_lg_prepare(record)?);
        }
        Ok(())
    }

    /// Local-global: keep the iterate z the local step reads (the forward solve
    /// overwrites it) in `TanZ`.
    fn before_local(
        &mut self,
        p: &mut Recorder,
        ops: &mut Vec<Op>,
        _alternation: u32,
        iterate: Buf,
    ) -> Result<(), GpuError> {
        ops.push(p.tangent_copy(iterate)?);
        Ok(())
    }

    /// IMEX: per direction the field JVP, `tangent_forces` (right-hand side into
    /// `RhsDiagonal`, dv as warm start), the forward's own solve and `tangent_integrate`,
    /// before the forward `integrate` moves x and the clock. Local-global, alternation a
    /// (z^a in `TanZ`, z^{a+1} in the solution): `tangent_lg_rhs`, the solve on P and the
    /// new dz (after the last alternation, the end of the step).
    fn after_solve(
        &mut self,
        p: &mut Recorder,
        ops: &mut Vec<Op>,
        end: SolveEnd,
    ) -> Result<(), GpuError> {
        let imex = !self.lg;
        for d in 0..self.directions() as u32 {
            let last = if imex {
                self.field_jvp(p, ops, d, false)?;
                let record = self.direction_record(p, d, 0, 0.0);
                ops.push(p.tangent_forces(end.solution, record)?);
                let last = p.solve(ops, Buf::TanU, Buf::TanS)?;
                ops.push(self.integrate(p, last, d, TangentEnd::Step)?);
                last
            } else {
                ops.push(p.tangent_lg_rhs(d, end.solution)?);
                let last = p.solve(ops, Buf::TanU, Buf::TanS)?;
                let end = if end.alternation + 1 == end.alternations {
                    TangentEnd::LocalGlobal
                } else {
                    TangentEnd::VelocityOnly
                };
                ops.push(self.integrate(p, last, d, end)?);
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
        p: &mut Recorder,
        ops: &mut Vec<Op>,
        kick: Kick,
    ) -> Result<(), GpuError> {
        let weight = p.dt.kick(kick.fraction);
        for d in 0..self.directions() as u32 {
            self.field_jvp(p, ops, d, kick.second)?;
            let record = self.direction_record(p, d, TangentBit::Kick.bits(), weight);
            // The forward's v is the velocity the kick's damping uses.
            ops.push(p.tangent_forces(Buf::V, record)?);
            let end = if kick.second {
                TangentEnd::VelocityOnly
            } else {
                TangentEnd::Step
            };
            ops.push(self.integrate(p, Buf::TanU, d, end)?);
        }
        Ok(())
    }
}
