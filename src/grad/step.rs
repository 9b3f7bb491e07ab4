//! One forward step that keeps what its tangent needs, and the tangent step itself.
//!
//! [`Forward`] advances a system exactly as `CpuSimulation::step_once` does: the same
//! kernels from `crate::cpu` in the same order (a test checks the trajectories agree bit
//! for bit), and it records the intermediate values of the step (x_t, v_t, the
//! local-global iterates, Verlet's half-step velocity). [`tangent_step`] then maps a
//! tangent (dx_t, dv_t) and a parameter [`Direction`] to (dx_{t+1}, dv_{t+1}).

// Per-particle loops index several arrays by particle, as the kernels do.
#![allow(clippy::needless_range_loop)]

use super::jvp::{
    field_forces_jvp, local_projection_jvp, spring_elastic_jvp, spring_force_jvp, w_block_jvp,
};
use super::params::Direction;
use crate::config::{Config, Integrator, SolverMethod};
use crate::cpu::forces::{field_forces_into, gather_spring_forces, spring_assemble, spring_forces};
use crate::cpu::integrators::{
    imex_rhs, local_global_rhs, local_global_rhs_const, local_projection, position_update,
};
use crate::cpu::solvers::{
    cg, estimate_block_jacobi_rho, solve, BlockLaplacian, SolverScratch, RHO_ESTIMATE_ITERATIONS,
};
use crate::model::{State, System};
use crate::sim::SolveStats;
use glam::DVec3;

/// What one step leaves for its tangent (the state after the step is `Forward::state`).
#[derive(Clone, Debug)]
pub(crate) enum Record {
    Imex {
        x0: Vec<DVec3>,
    },
    LocalGlobal {
        x0: Vec<DVec3>,
        /// z^0 = y = x_t + h v_t, then the iterate after each global solve.
        iterates: Vec<Vec<DVec3>>,
    },
    SymplecticEuler {
        x0: Vec<DVec3>,
        v0: Vec<DVec3>,
    },
    Verlet {
        x0: Vec<DVec3>,
        v0: Vec<DVec3>,
        v_half: Vec<DVec3>,
    },
}

/// The forward simulation (a mirror of `CpuSimulation` that records each step).
pub(crate) struct Forward {
    pub system: System,
    pub config: Config,
    pub state: State,
    /// IMEX: A at the last step's x_t; local_global: P; explicit: M (adjacency only).
    pub op: BlockLaplacian,
    rho: f64,
    scratch: SolverScratch,
    spring_buf: Vec<DVec3>,
    field: Vec<DVec3>,
    /// Step whose positions `field` holds (Verlet reuses a' as the next a, as the reference).
    field_step: Option<u64>,
    coulomb_scratch: Vec<DVec3>,
    gathered: Vec<DVec3>,
    rhs: Vec<DVec3>,
    pub last_solve: Option<SolveStats>,
}

impl Forward {
    /// `config` must be validated.
    pub fn new(system: System, config: Config) -> Self {
        let n = system.len();
        let ns = system.springs().len();
        let mut op = BlockLaplacian::from_system(&system);
        let h = config.dt;
        let state = system.initial_state();
        match config.integrator {
            Integrator::Imex => op.assemble_imex(&state.x, system.springs(), h),
            Integrator::LocalGlobal => op.assemble_local_global(system.springs(), h),
            _ => {}
        }
        let rho =
            if config.integrator.is_implicit() && config.solver.method == SolverMethod::Chebyshev {
                config.solver.rho.unwrap_or_else(|| {
                    estimate_block_jacobi_rho(&op, config.solver.omega, RHO_ESTIMATE_ITERATIONS)
                })
            } else {
                0.0
            };
        Self {
            system,
            config,
            state,
            op,
            rho,
            scratch: SolverScratch::default(),
            spring_buf: vec![DVec3::ZERO; ns],
            field: vec![DVec3::ZERO; n],
            field_step: None,
            coulomb_scratch: Vec::new(),
            gathered: vec![DVec3::ZERO; n],
            rhs: vec![DVec3::ZERO; n],
            last_solve: None,
        }
    }

    /// One step; returns what its tangent needs.
    pub fn step(&mut self) -> Record {
        let record = match self.config.integrator {
            Integrator::Imex => self.step_imex(),
            Integrator::LocalGlobal => self.step_local_global(),
            Integrator::SymplecticEuler => self.step_symplectic_euler(),
            Integrator::Verlet => self.step_verlet(),
        };
        self.state.step += 1;
        self.state.t = self.state.step as f64 * self.config.dt;
        record
    }

    fn eval_field(&mut self, x: &[DVec3], t: f64) {
        field_forces_into(
            x,
            self.system.charges(),
            &self.config,
            t,
            &mut self.coulomb_scratch,
            &mut self.field,
        );
    }

    fn step_imex(&mut self) -> Record {
        let h = self.config.dt;
        let t = self.state.t;
        let x0 = self.state.x.clone();
        spring_assemble(
            &x0,
            self.system.springs(),
            h,
            &mut self.spring_buf,
            &mut self.op.blocks,
        );
        self.eval_field(&x0, t);
        gather_spring_forces(&self.op.adjacency, &self.spring_buf, &mut self.gathered);
        imex_rhs(
            self.system.masses(),
            &self.state.v,
            &self.gathered,
            &self.field,
            self.config.gravity,
            h,
            &mut self.rhs,
        );
        self.last_solve = Some(solve(
            &self.op,
            &self.rhs,
            &mut self.state.v,
            &self.config.solver,
            self.rho,
            &mut self.scratch,
        ));
        position_update(&mut self.state.x, &self.state.v, h);
        Record::Imex { x0 }
    }

    fn step_local_global(&mut self) -> Record {
        let h = self.config.dt;
        let t = self.state.t;
        let x0 = self.state.x.clone();
        self.eval_field(&x0, t);
        local_global_rhs_const(
            &self.system,
            &self.op.adjacency,
            &x0,
            &self.state.v,
            &self.field,
            self.config.gravity,
            h,
            &mut self.gathered,
        );
        let mut z: Vec<DVec3> = x0
            .iter()
            .zip(&self.state.v)
            .map(|(x, v)| *x + *v * h)
            .collect();
        let mut iterates = Vec::with_capacity(self.config.local_global_iterations as usize + 1);
        iterates.push(z.clone());
        let mut total = SolveStats::default();
        for _ in 0..self.config.local_global_iterations {
            local_projection(&z, self.system.springs(), &mut self.spring_buf);
            local_global_rhs(
                &self.op.adjacency,
                self.system.springs(),
                &self.spring_buf,
                &self.gathered,
                h,
                &mut self.rhs,
            );
            let s = solve(
                &self.op,
                &self.rhs,
                &mut z,
                &self.config.solver,
                self.rho,
                &mut self.scratch,
            );
            total.iterations += s.iterations;
            total.residual = s.residual;
            iterates.push(z.clone());
        }
        self.last_solve = Some(total);
        let pinned = self.system.pinned();
        for i in 0..self.system.len() {
            if pinned[i] {
                self.state.x[i] += self.state.v[i] * h;
            } else {
                self.state.v[i] = (z[i] - self.state.x[i]) / h;
                self.state.x[i] = z[i];
            }
        }
        Record::LocalGlobal { x0, iterates }
    }

    /// Total force f(x, v, t) into `gathered`; `x_step` keys the field cache.
    fn total_force(&mut self, x: &[DVec3], v: &[DVec3], t: f64, x_step: u64) {
        if self.field_step != Some(x_step) {
            self.eval_field(x, t);
            self.field_step = Some(x_step);
        }
        spring_forces(x, v, self.system.springs(), &mut self.spring_buf);
        gather_spring_forces(&self.op.adjacency, &self.spring_buf, &mut self.gathered);
        let g = self.config.gravity;
        for ((f, fld), m) in self
            .gathered
            .iter_mut()
            .zip(&self.field)
            .zip(self.system.masses())
        {
            *f = *f + *fld + g * *m;
        }
    }

    fn step_symplectic_euler(&mut self) -> Record {
        let h = self.config.dt;
        let (x0, v0) = (self.state.x.clone(), self.state.v.clone());
        self.total_force(&x0, &v0, self.state.t, self.state.step);
        kick(
            &mut self.state.v,
            &self.gathered,
            self.system.masses(),
            self.system.pinned(),
            h,
        );
        position_update(&mut self.state.x, &self.state.v, h);
        Record::SymplecticEuler { x0, v0 }
    }

    fn step_verlet(&mut self) -> Record {
        let h = self.config.dt;
        let (x0, v0) = (self.state.x.clone(), self.state.v.clone());
        self.total_force(&x0, &v0, self.state.t, self.state.step);
        let mut v_half = v0.clone();
        kick(
            &mut v_half,
            &self.gathered,
            self.system.masses(),
            self.system.pinned(),
            0.5 * h,
        );
        let mut x1 = x0.clone();
        position_update(&mut x1, &v_half, h);
        let t1 = (self.state.step + 1) as f64 * h;
        self.total_force(&x1, &v_half, t1, self.state.step + 1);
        let mut v1 = v_half.clone();
        kick(
            &mut v1,
            &self.gathered,
            self.system.masses(),
            self.system.pinned(),
            0.5 * h,
        );
        self.state.x = x1;
        self.state.v = v1;
        Record::Verlet { x0, v0, v_half }
    }
}

/// v_i += h f_i / m_i on free rows (as the reference's kick).
fn kick(v: &mut [DVec3], f: &[DVec3], m: &[f64], pinned: &[bool], h: f64) {
    for i in 0..v.len() {
        if !pinned[i] {
            v[i] += f[i] * (h / m[i]);
        }
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
    let sys = &fwd.system;
    let cfg = &fwd.config;
    let h = cfg.dt;
    // The record belongs to the step that just ended.
    let t = (fwd.state.step - 1) as f64 * h;
    let (n, springs) = (sys.len(), sys.springs());
    ws.size(n, springs.len());
    let (m, pinned, q) = (sys.masses(), sys.pinned(), sys.charges());
    let adj = &fwd.op.adjacency;
    match record {
        Record::Imex { x0, .. } => {
            // Differentiating A(x_t, k) v' = b(x_t, v_t, theta) (DESIGN section 2):
            // A dv' = M dv + h (d f_elastic + d f_field) - dA v'.
            let v1 = &fwd.state.v;
            for (k, s) in springs.iter().enumerate() {
                let (i, j) = (s.i as usize, s.j as usize);
                let dd = dx[j] - dx[i];
                let dk = dir.dk(k);
                ws.per_spring[k] = spring_elastic_jvp(x0[i], x0[j], s, dd, dk);
                ws.per_spring2[k] = w_block_jvp(x0[i], x0[j], s, h, dd, dk, v1[i] - v1[j]);
            }
            gather_spring_forces(adj, &ws.per_spring, &mut ws.a);
            gather_spring_forces(adj, &ws.per_spring2, &mut ws.b);
            field_forces_jvp(x0, q, cfg, t, dx, dir, &mut ws.c);
            for i in 0..n {
                ws.z[i] = dv[i] * m[i] + (ws.a[i] + ws.c[i]) * h - ws.b[i];
            }
            // Warm start from dv_t; pinned rows stay 0 (prescribed velocities).
            let stats = cg(
                &fwd.op,
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
        Record::LocalGlobal { x0, iterates } => {
            // c = M y + h C_L x_t + h^2 (f_field + M g); per alternation
            // P z' = c + h^2 J(k) d(z) with P = M + h C_L + h^2 L(k) (paper eq. 11), so
            // P dz' = dc + h^2 (J(dk) d + J(k) dd) - dP z'.
            field_forces_jvp(x0, q, cfg, t, dx, dir, &mut ws.c);
            for i in 0..n {
                let mut cl = DVec3::ZERO;
                for e in adj.row(i) {
                    cl += (dx[i] - dx[e.other as usize]) * springs[e.spring as usize].damping;
                }
                let dy = dx[i] + dv[i] * h;
                ws.a[i] = dy * m[i] + cl * h + ws.c[i] * (h * h);
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
                    ws.b[i] += ws.a[i];
                }
                let s = cg(
                    &fwd.op,
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
        Record::SymplecticEuler { x0, v0 } => {
            total_force_jvp(fwd, x0, v0, t, dx, dv, dir, ws);
            kick(dv, &ws.a, m, pinned, h);
            for i in 0..n {
                dx[i] += dv[i] * h;
            }
            SolveStats::default()
        }
        Record::Verlet { x0, v0, v_half } => {
            total_force_jvp(fwd, x0, v0, t, dx, dv, dir, ws);
            let mut dv_half = dv.to_vec();
            kick(&mut dv_half, &ws.a, m, pinned, 0.5 * h);
            for i in 0..n {
                dx[i] += dv_half[i] * h;
            }
            // (x_{t+1}, v_half) at t_{t+1}, the reference's second force evaluation.
            let x1 = &fwd.state.x;
            total_force_jvp(fwd, x1, v_half, fwd.state.t, dx, &dv_half, dir, ws);
            kick(&mut dv_half, &ws.a, m, pinned, 0.5 * h);
            dv.copy_from_slice(&dv_half);
            SolveStats::default()
        }
    }
}

/// d f(x, v, t) (springs with damping + field; gravity is constant) into `ws.a`.
#[allow(clippy::too_many_arguments)]
fn total_force_jvp(
    fwd: &Forward,
    x: &[DVec3],
    v: &[DVec3],
    t: f64,
    dx: &[DVec3],
    dv: &[DVec3],
    dir: &Direction,
    ws: &mut TangentScratch,
) {
    let springs = fwd.system.springs();
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
    gather_spring_forces(&fwd.op.adjacency, &ws.per_spring, &mut ws.b);
    field_forces_jvp(x, fwd.system.charges(), &fwd.config, t, dx, dir, &mut ws.c);
    for i in 0..ws.a.len() {
        ws.a[i] = ws.b[i] + ws.c[i];
    }
}
