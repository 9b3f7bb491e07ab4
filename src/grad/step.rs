//! One forward step that keeps what its tangent needs, and the tangent step itself.
//!
//! `Forward` advances a system with the CPU reference itself
//! (`CpuSimulation::step_traced`, so the trajectories agree bit for bit, which a test
//! checks) and keeps the intermediate values of each step (x_t, v_t, the local-global
//! iterates, Verlet's half-step velocity). `tangent_step` then maps a
//! tangent (dx_t, dv_t) and a parameter [`Direction`] to (dx_{t+1}, dv_{t+1}).

// Per-particle loops index several arrays by particle, as the kernels do.
#![allow(clippy::needless_range_loop)]

use super::jvp::{
    field_forces_jvp, local_projection_jvp, spring_elastic_jvp, spring_force_jvp, w_block_jvp,
};
use super::params::Direction;
use crate::config::{Config, ConfigError, Integrator};
use crate::cpu::forces::gather_spring_forces;
use crate::cpu::integrators::{kick, StepTrace};
use crate::cpu::solvers::{cg, BlockLaplacian, SolverScratch};
use crate::cpu::CpuSimulation;
use crate::ddef::{DdefError, LatticeDdef};
use crate::measures::SolveStats;
use crate::model::{State, System};
use glam::DVec3;

/// What one step leaves for its tangent and its adjoint: x_t and v_t, the local-global
/// iterates, Verlet's half-step velocity (the state after the step is `Forward::state`).
pub(crate) type Record = StepTrace;

/// The forward simulation: the CPU reference itself, stepped with a trace of each step.
pub(crate) struct Forward {
    sim: CpuSimulation,
    pub last_solve: Option<SolveStats>,
    /// DDEF (lattice grid): the last step's evaluations, rebuilt under the plan the step
    /// ran with (the same structure): at x_t and, for Verlet, at x_{t+1}.
    ddef: Vec<LatticeDdef>,
}

impl Forward {
    pub fn new(system: &System, config: &Config) -> Result<Self, ConfigError> {
        Ok(Self {
            sim: CpuSimulation::new(system, config)?,
            last_solve: None,
            ddef: Vec::new(),
        })
    }

    pub fn system(&self) -> &System {
        self.sim.system()
    }

    pub fn config(&self) -> &Config {
        self.sim.config()
    }

    pub fn state(&self) -> &State {
        self.sim.current()
    }

    /// IMEX: A at the last step's x_t; local_global: P; explicit: M (adjacency only).
    pub fn op(&self) -> &BlockLaplacian {
        self.sim.operator()
    }

    /// One step; returns what its tangent needs.
    pub fn step(&mut self) -> Result<Record, DdefError> {
        let (stats, trace) = self.sim.step_traced();
        self.last_solve = stats;
        self.ddef_for_step(&trace.x0, None)?;
        Ok(trace)
    }

    /// DDEF (lattice grid): the evaluations of the step from `x0` to `x1` (default: the
    /// current state) under the plan the run steps with, the structure the step had (the
    /// adjoint rebuilds them for the step it reverses). The plan stays as the first
    /// evaluation made it: this driver never re-plans.
    pub fn ddef_for_step(&mut self, x0: &[DVec3], x1: Option<&[DVec3]>) -> Result<(), DdefError> {
        self.ddef.clear();
        let plan = self.sim.ddef().and_then(|d| d.plan()).copied();
        if let Some(plan) = plan {
            let sim = &self.sim;
            let (q, eps) = (sim.system().charges(), sim.config().coulomb.softening);
            self.ddef.push(LatticeDdef::new(&plan, x0, q, eps)?);
            if sim.config().integrator == Integrator::Verlet {
                let x1 = x1.unwrap_or(&sim.current().x);
                self.ddef.push(LatticeDdef::new(&plan, x1, q, eps)?);
            }
        }
        Ok(())
    }

    /// One step without a record (the adjoint's recomputation): no DDEF evaluation kept.
    pub fn step_plain(&mut self) {
        self.ddef.clear();
        self.last_solve = self.sim.step_once();
    }

    /// Back to `state`, from which the steps repeat bit for bit
    /// (`CpuSimulation::restore`).
    pub fn restore(&mut self, state: &State) {
        self.ddef.clear();
        self.sim.restore(state);
    }

    /// The Chebyshev rho the forward's solves use (a constant of the run).
    pub fn chebyshev_rho(&self) -> f64 {
        self.sim.chebyshev_rho()
    }

    /// The DDEF evaluation `k` of the last step (0: at x_t; 1: Verlet's at x_{t+1}).
    pub(crate) fn ddef_at(&self, k: usize) -> Option<&LatticeDdef> {
        self.ddef.get(k)
    }
}

/// How the tangent's linear systems are solved: CG (A and P are SPD) to a tight tolerance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TangentSolve {
    /// Relative residual |r| / |b| over the free rows.
    pub tolerance: f64,
    pub max_iterations: u32,
}

impl Default for TangentSolve {
    fn default() -> Self {
        Self {
            tolerance: 1e-12,
            max_iterations: 20_000,
        }
    }
}

impl TangentSolve {
    /// Refuses a solve that would stop before its first iteration (no iteration, or a
    /// tolerance the starting guess already meets): the tangents, and so the gradient,
    /// would be 0 without an error.
    pub(crate) fn check(&self) -> Result<(), super::GradError> {
        let tol = self.tolerance;
        if self.max_iterations == 0 || !(0.0..1.0).contains(&tol) {
            return Err(super::GradError::Param(format!(
                "the tangent solve needs max_iterations >= 1 and a tolerance in [0, 1), got \
                 {} and {}",
                self.max_iterations,
                crate::display::num(tol)
            )));
        }
        Ok(())
    }
}

/// How the CPU adjoint solves its linear systems A mu = g (IMEX) and P mu = r
/// (local-global); see the module documentation of [`crate::grad`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AdjointSolve {
    /// CG to [`TangentSolve`]'s tolerance: the exact transpose of the map the forward
    /// tangents differentiate (the exact-solve map), so the adjoint gradient equals
    /// forward mode to that tolerance.
    #[default]
    Exact,
    /// The scene's own solver (method, iteration count, tolerance), warm-started from the
    /// previous reversed step's solution, as the GPU adjoint runs it: the same adjoint
    /// equations of the exact-solve map with each solve truncated, so the gradient
    /// approaches [`Self::Exact`]'s as the scene's solve converges, at about the cost of a
    /// forward step per reversed step. It is not the transpose of the forward's
    /// fixed-sweep iterations.
    Scene,
}

/// Work buffers of one tangent.
#[derive(Clone, Debug, Default)]
pub(crate) struct TangentScratch {
    per_spring: Vec<DVec3>,
    per_spring2: Vec<DVec3>,
    a: Vec<DVec3>,
    b: Vec<DVec3>,
    c: Vec<DVec3>,
    z: Vec<DVec3>,
    solver: SolverScratch,
}

impl TangentScratch {
    /// The forces [`other_forces`] wrote.
    pub(crate) fn forces(&self) -> &[DVec3] {
        &self.b
    }

    fn size(&mut self, n: usize, ns: usize) {
        for v in [&mut self.per_spring, &mut self.per_spring2] {
            v.resize(ns, DVec3::ZERO);
        }
        for v in [&mut self.a, &mut self.b, &mut self.c, &mut self.z] {
            v.resize(n, DVec3::ZERO);
        }
    }
}

/// Advances one tangent through the step `record` of `fwd` (whose state is now x_{t+1},
/// v_{t+1}). Returns the worst linear-solve residual (0 for explicit integrators) and the
/// CG iterations. Pinned rows of dx, dv are zero and stay zero.
pub(crate) fn tangent_step(
    fwd: &Forward,
    record: &Record,
    dir: &Direction,
    dx: &mut [DVec3],
    dv: &mut [DVec3],
    solve_opts: &TangentSolve,
    ws: &mut TangentScratch,
) -> SolveStats {
    let sys = fwd.system();
    let cfg = fwd.config();
    let h = cfg.dt;
    // The record belongs to the step that just ended.
    let t = crate::measures::time_at(fwd.state().step - 1, h);
    let (n, springs) = (sys.len(), sys.springs());
    ws.size(n, springs.len());
    let (m, pinned, q) = (sys.masses(), sys.pinned(), sys.charges());
    let adj = &fwd.op().adjacency;
    let Record {
        x0,
        v0,
        iterates,
        v_half,
    } = record;
    match cfg.integrator {
        Integrator::Imex => {
            // Differentiating A(x_t, k, m) v' = b(x_t, v_t, theta) (docs/physics.md §4):
            // A dv' = M dv + dM (v + h g - v') + h (d f_elastic + d f_field) - dW v'.
            let v1 = &fwd.state().v;
            for (k, s) in springs.iter().enumerate() {
                let (i, j) = (s.i as usize, s.j as usize);
                let dd = dx[j] - dx[i];
                let dk = dir.dk(k);
                ws.per_spring[k] = spring_elastic_jvp(x0[i], x0[j], s, dd, dk);
                ws.per_spring2[k] = w_block_jvp(x0[i], x0[j], s, h, dd, dk, v1[i] - v1[j]);
            }
            gather_spring_forces(adj, &ws.per_spring, &mut ws.a);
            gather_spring_forces(adj, &ws.per_spring2, &mut ws.b);
            field_forces_jvp(x0, q, cfg, t, dx, dir, fwd.ddef_at(0), &mut ws.c);
            for i in 0..n {
                ws.z[i] = dv[i] * m[i] + (ws.a[i] + ws.c[i]) * h - ws.b[i];
                let dm = dir.dm(i);
                if dm != 0.0 {
                    ws.z[i] += (v0[i] + cfg.gravity * h - v1[i]) * dm;
                }
            }
            // Warm start from dv_t; pinned rows stay 0 (prescribed velocities).
            let stats = cg(
                fwd.op(),
                &ws.z,
                dv,
                solve_opts.max_iterations,
                solve_opts.tolerance,
                &mut ws.solver,
            );
            for i in 0..n {
                dx[i] += dv[i] * h;
            }
            stats
        }
        Integrator::LocalGlobal => {
            // c = M y + h C_L x_t + h^2 (f_field + M g); per alternation
            // P z' = c + h^2 J(k) d(z) with P = M + h C_L + h^2 L(k) (paper eq. 11), so
            // P dz' = dc + h^2 (J(dk) d + J(k) dd) - dP z', dP = dM + h^2 L(dk).
            field_forces_jvp(x0, q, cfg, t, dx, dir, fwd.ddef_at(0), &mut ws.c);
            for i in 0..n {
                let mut cl = DVec3::ZERO;
                for e in adj.row(i) {
                    cl += (dx[i] - dx[e.other as usize]) * springs[e.spring as usize].damping;
                }
                let dy = dx[i] + dv[i] * h;
                ws.a[i] = dy * m[i] + cl * h + ws.c[i] * (h * h);
                // iterates[0] is y.
                ws.a[i] += (iterates[0][i] + cfg.gravity * (h * h)) * dir.dm(i);
                ws.z[i] = dy;
            }
            let mut worst = SolveStats::default();
            for pair in iterates.windows(2) {
                let (z, z1) = (&pair[0], &pair[1]);
                for (k, s) in springs.iter().enumerate() {
                    let (i, j) = (s.i as usize, s.j as usize);
                    let dk = dir.dk(k);
                    // d_k = L (z_i - z_j) / |z_i - z_j| = -L n.
                    let (nk, _) = crate::cpu::forces::spring_axis(z[i], z[j]);
                    let d = -nk * s.rest_length;
                    let dd = local_projection_jvp(z[i], z[j], s.rest_length, ws.z[i], ws.z[j]);
                    ws.per_spring[k] =
                        (d * dk + dd * s.stiffness) * (h * h) - (z1[i] - z1[j]) * (h * h * dk);
                }
                gather_spring_forces(adj, &ws.per_spring, &mut ws.b);
                for i in 0..n {
                    ws.b[i] += ws.a[i] - z1[i] * dir.dm(i);
                }
                let s = cg(
                    fwd.op(),
                    &ws.b,
                    &mut ws.z,
                    solve_opts.max_iterations,
                    solve_opts.tolerance,
                    &mut ws.solver,
                );
                worst.iterations += s.iterations;
                worst.residual = worst.residual.max(s.residual);
            }
            for i in 0..n {
                if !pinned[i] {
                    dv[i] = (ws.z[i] - dx[i]) / h;
                    dx[i] = ws.z[i];
                }
            }
            worst
        }
        Integrator::SymplecticEuler => {
            total_force_jvp(fwd, x0, v0, t, dx, dv, dir, 0, ws);
            kick(dv, &ws.a, m, pinned, h);
            mass_kick_jvp(fwd, x0, v0, t, dir, dv, h, ws);
            for i in 0..n {
                dx[i] += dv[i] * h;
            }
            SolveStats::default()
        }
        Integrator::Verlet => {
            total_force_jvp(fwd, x0, v0, t, dx, dv, dir, 0, ws);
            let mut dv_half = dv.to_vec();
            kick(&mut dv_half, &ws.a, m, pinned, 0.5 * h);
            mass_kick_jvp(fwd, x0, v0, t, dir, &mut dv_half, 0.5 * h, ws);
            for i in 0..n {
                dx[i] += dv_half[i] * h;
            }
            // (x_{t+1}, v_half) at t_{t+1}, the reference's second force evaluation.
            let (x1, t1) = (&fwd.state().x, fwd.state().t);
            total_force_jvp(fwd, x1, v_half, t1, dx, &dv_half, dir, 1, ws);
            kick(&mut dv_half, &ws.a, m, pinned, 0.5 * h);
            mass_kick_jvp(fwd, x1, v_half, t1, dir, &mut dv_half, 0.5 * h, ws);
            dv.copy_from_slice(&dv_half);
            SolveStats::default()
        }
    }
}

/// The mass part of a kick's tangent: v' = v + h (F(x, v, t) / m + g) gives
/// -h F dm / m^2 on free rows (F without gravity). Nothing when no mass moves.
#[allow(clippy::too_many_arguments)]
fn mass_kick_jvp(
    fwd: &Forward,
    x: &[DVec3],
    v: &[DVec3],
    t: f64,
    dir: &Direction,
    dv: &mut [DVec3],
    h: f64,
    ws: &mut TangentScratch,
) {
    let Some(dm) = dir.dm.as_deref() else {
        return;
    };
    let sys = fwd.system();
    other_forces(sys, fwd.config(), &fwd.op().adjacency, x, v, t, ws);
    let (m, pinned) = (sys.masses(), sys.pinned());
    for i in 0..dv.len() {
        if !pinned[i] && dm[i] != 0.0 {
            dv[i] -= ws.b[i] * (h * dm[i] / (m[i] * m[i]));
        }
    }
}

/// F(x, v, t) without gravity (springs with damping + field) into `ws.b`
/// ([`TangentScratch::forces`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn other_forces(
    sys: &System,
    cfg: &Config,
    adj: &crate::model::Adjacency,
    x: &[DVec3],
    v: &[DVec3],
    t: f64,
    ws: &mut TangentScratch,
) {
    ws.size(x.len(), sys.springs().len());
    crate::cpu::forces::spring_forces(x, v, sys.springs(), &mut ws.per_spring);
    gather_spring_forces(adj, &ws.per_spring, &mut ws.b);
    crate::cpu::forces::field_forces_into(x, sys.charges(), cfg, t, &mut ws.z, &mut ws.c);
    for i in 0..ws.b.len() {
        ws.b[i] += ws.c[i];
    }
}

/// d f(x, v, t) (springs with damping + field; gravity is constant) into `ws.a`;
/// `ddef` picks the step's DDEF evaluation at x.
#[allow(clippy::too_many_arguments)]
fn total_force_jvp(
    fwd: &Forward,
    x: &[DVec3],
    v: &[DVec3],
    t: f64,
    dx: &[DVec3],
    dv: &[DVec3],
    dir: &Direction,
    ddef: usize,
    ws: &mut TangentScratch,
) {
    let springs = fwd.system().springs();
    for (k, s) in springs.iter().enumerate() {
        let (i, j) = (s.i as usize, s.j as usize);
        ws.per_spring[k] = spring_force_jvp(
            x[i],
            x[j],
            v[i],
            v[j],
            s,
            dx[j] - dx[i],
            dv[j] - dv[i],
            dir.dk(k),
        );
    }
    gather_spring_forces(&fwd.op().adjacency, &ws.per_spring, &mut ws.b);
    field_forces_jvp(
        x,
        fwd.system().charges(),
        fwd.config(),
        t,
        dx,
        dir,
        fwd.ddef_at(ddef),
        &mut ws.c,
    );
    for i in 0..ws.a.len() {
        ws.a[i] = ws.b[i] + ws.c[i];
    }
}
