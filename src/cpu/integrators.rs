//! Time integrators (docs/physics.md §4-§6).
//!
//! Each step is written as the sequence of kernels the GPU runs (spring assembly, field
//! forces, right-hand side, linear solve, position update), so intermediate buffers can be
//! compared one by one. Time after a step is `step * h`, not an accumulated sum.

// Per-particle loops index several arrays by particle, as the kernels do.
#![allow(clippy::needless_range_loop)]

use super::forces::{field_forces_into, gather_spring_forces, spring_axis, spring_forces};
use super::operator::spring_assemble;
use super::rows::for_each_indexed;
use super::solvers::{
    estimate_block_jacobi_rho, solve, BlockLaplacian, SolverScratch, RHO_ESTIMATE_ITERATIONS,
};
use crate::config::{Config, ConfigError, Integrator, SolverMethod};
use crate::ddef::{DdefError, DdefGrid, DdefSolver};
use crate::measures::{DdefCounts, Energies, SolveStats};
use crate::model::{Adjacency, Spring, State, System, Topology};
use glam::DVec3;

mod update;
pub use update::{parameters_fixed, UpdateError};

/// The intermediate values of one step that the forward sensitivities (`crate::grad`)
/// differentiate through, from [`CpuSimulation::step_traced`]: the tangents then follow
/// the very step the reference took.
#[derive(Clone, Debug, Default)]
pub(crate) struct StepTrace {
    /// x_t.
    pub x0: Vec<DVec3>,
    /// v_t.
    pub v0: Vec<DVec3>,
    /// Verlet: the half-step velocity v_half (empty otherwise).
    pub v_half: Vec<DVec3>,
    /// local_global: z^0 = y = x_t + h v_t, then the iterate after each global solve.
    pub iterates: Vec<Vec<DVec3>>,
}

/// The CPU reference simulation of one system.
pub struct CpuSimulation {
    system: System,
    /// What parameter updates keep (`update`).
    topology: Topology,
    config: Config,
    state: State,
    last_solve: Option<SolveStats>,
    /// IMEX: A, reassembled each step. local_global: P, assembled once. Explicit
    /// integrators use only its adjacency.
    op: BlockLaplacian,
    /// Chebyshev spectral radius (the config's, or estimated at construction); 0 otherwise.
    rho: f64,
    scratch: SolverScratch,
    /// Per spring: force on i (IMEX: elastic; explicit: elastic + damping) or d_k.
    spring_buf: Vec<DVec3>,
    /// Per particle: Coulomb + external forces at (x, t), and the drag at the velocity of
    /// the same state.
    field: Vec<DVec3>,
    /// Step number whose positions `field` holds (velocity Verlet reuses a' as the next a).
    field_step: Option<u64>,
    coulomb_scratch: Vec<DVec3>,
    /// `CoulombMethod::Ddef`: the DDEF forces with their grid kept between steps.
    ddef: Option<DdefSolver>,
    /// A DDEF failure during the last step, returned by `Simulator::step`.
    ddef_error: Option<DdefError>,
    /// Per particle work vectors: gathered spring forces, right-hand side, iterate.
    gathered: Vec<DVec3>,
    rhs: Vec<DVec3>,
    work: Vec<DVec3>,
}

impl CpuSimulation {
    pub fn new(system: &System, config: &Config) -> Result<Self, ConfigError> {
        config.validate_for(system)?;
        let n = system.len();
        let ns = system.springs().len();
        let mut op = BlockLaplacian::from_system(system);
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
        Ok(Self {
            system: system.clone(),
            topology: Topology::of(system),
            config: config.clone(),
            state,
            last_solve: None,
            op,
            rho,
            scratch: SolverScratch::default(),
            spring_buf: vec![DVec3::ZERO; ns],
            field: vec![DVec3::ZERO; n],
            field_step: None,
            coulomb_scratch: Vec::new(),
            ddef: config
                .coulomb
                .method
                .ddef()
                .map(|d| DdefSolver::new(d, config.coulomb.softening)),
            ddef_error: None,
            gathered: vec![DVec3::ZERO; n],
            rhs: vec![DVec3::ZERO; n],
            work: vec![DVec3::ZERO; n],
        })
    }
    pub fn system(&self) -> &System {
        &self.system
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// Current state, without a copy.
    pub fn current(&self) -> &State {
        &self.state
    }
    /// The Chebyshev spectral radius in use (0 unless the run uses Chebyshev).
    pub fn chebyshev_rho(&self) -> f64 {
        self.rho
    }
    /// The DDEF state (grid, rebuild count) when the Coulomb method is DDEF.
    pub fn ddef(&self) -> Option<&DdefSolver> {
        self.ddef.as_ref()
    }
    /// Re-plans the DDEF lattice when a frame drifted from its plan (between steps: the
    /// drivers call it where they read the energies, as the GPU solver re-plans there);
    /// true when it did.
    pub fn replan_ddef(&mut self) -> Result<bool, DdefError> {
        match &mut self.ddef {
            Some(d) => d.replan(),
            None => Ok(false),
        }
    }

    /// Takes the DDEF failure of the last step, if any (`Simulator::step` reports it).
    pub fn take_ddef_error(&mut self) -> Option<DdefError> {
        self.ddef_error.take()
    }
    /// The linear operator of the last implicit step (IMEX: A at the last step's x_t;
    /// local_global: P).
    pub fn operator(&self) -> &BlockLaplacian {
        &self.op
    }

    /// Puts the simulation back at `state` (a state this simulation passed through, for
    /// the reverse sweeps of `crate::grad`): the steps from there repeat the ones taken
    /// before bit for bit (the per-step buffers are rebuilt from the state; the cached
    /// field is dropped; the Chebyshev rho and the local-global matrix are constants of
    /// the run). DDEF on the lattice grid keeps only its plan between steps (made at the
    /// first evaluation; these drivers never re-plan), so its steps repeat too; the
    /// Delaunay grid keeps a grid between steps and cannot be restored.
    pub(crate) fn restore(&mut self, state: &State) {
        debug_assert!(
            self.ddef
                .as_ref()
                .is_none_or(|d| d.config().grid == DdefGrid::Lattice),
            "restore: the Delaunay DDEF grid keeps state between steps"
        );
        self.state.x.copy_from_slice(&state.x);
        self.state.v.copy_from_slice(&state.v);
        self.state.t = state.t;
        self.state.step = state.step;
        self.field_step = None;
        self.last_solve = None;
    }

    /// One time step; returns the linear solve's stats for implicit integrators.
    pub fn step_once(&mut self) -> Option<SolveStats> {
        self.step_with(None)
    }

    /// [`Self::step_once`], also returning the step's intermediate values.
    pub(crate) fn step_traced(&mut self) -> (Option<SolveStats>, StepTrace) {
        let mut trace = StepTrace {
            x0: self.state.x.clone(),
            v0: self.state.v.clone(),
            ..Default::default()
        };
        let stats = self.step_with(Some(&mut trace));
        (stats, trace)
    }

    fn step_with(&mut self, trace: Option<&mut StepTrace>) -> Option<SolveStats> {
        let stats = match self.config.integrator {
            Integrator::Imex => Some(self.step_imex()),
            Integrator::LocalGlobal => Some(self.step_local_global(trace)),
            Integrator::SymplecticEuler => {
                self.step_symplectic_euler();
                None
            }
            Integrator::Verlet => {
                self.step_verlet(trace);
                None
            }
        };
        self.state.step += 1;
        self.state.t = crate::measures::time_at(self.state.step, self.config.dt);
        stats
    }

    /// Coulomb + external forces at (x, t) into `self.field`, and the linear drag
    /// f_i = -c v_i (docs/physics.md §3) at the velocity of the same state (Verlet's
    /// second force: v_half, in `rhs`). The drag's only Rust definition: its derivative
    /// d f_i / d v_i = -c I is not needed while the drag stays explicit.
    fn eval_field(&mut self, x_is_new: bool, t: f64) {
        let x = if x_is_new { &self.work } else { &self.state.x };
        field_forces_into(
            x,
            self.system.charges(),
            &self.config,
            t,
            &mut self.coulomb_scratch,
            &mut self.field,
        );
        let c = self.config.world.drag;
        if c != 0.0 {
            let v = if x_is_new { &self.rhs } else { &self.state.v };
            for (f, v) in self.field.iter_mut().zip(v) {
                *f += *v * -c;
            }
        }
        if let Some(ddef) = &mut self.ddef {
            let scratch = &mut self.coulomb_scratch;
            scratch.resize(x.len(), DVec3::ZERO);
            match ddef.forces_into(x, self.system.charges(), scratch) {
                Ok(()) => {
                    for (o, c) in self.field.iter_mut().zip(scratch.iter()) {
                        *o += *c;
                    }
                }
                Err(e) => {
                    // Poison the step so it is never mistaken for a valid one.
                    self.field.iter_mut().for_each(|f| *f = DVec3::NAN);
                    self.ddef_error = Some(e);
                }
            }
        }
    }

    /// Linearized implicit Euler in velocity form (docs/physics.md (4.1)-(4.3), paper
    /// eq. 10): A v' = b, b_i = m_i v_i + h (f_elastic + f_field + m_i g), x' = x + h v'.
    fn step_imex(&mut self) -> SolveStats {
        let h = self.config.dt;
        let t = self.state.t;
        // 1. spring_assemble at x_t.
        spring_assemble(
            &self.state.x,
            self.system.springs(),
            h,
            &mut self.spring_buf,
            self.op.blocks_mut(),
        );
        // 2. explicit field forces at (x_t, t).
        self.eval_field(false, t);
        // 3. rhs per particle.
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
        // 4. solve A v' = b warm-started from v_t; pinned rows keep their prescribed v.
        let stats = solve(
            &self.op,
            &self.rhs,
            &mut self.state.v,
            &self.config.solver,
            self.rho,
            &mut self.scratch,
        );
        // 5. position update.
        position_update(&mut self.state.x, &self.state.v, h);
        stats
    }

    /// Liu 2013 local-global with explicit Coulomb (paper eqs. 3-7 and 11), isotropic edge
    /// damping: P x' = M y + h C_L x_t + h^2 (J d + f_field + M g), y = x_t + h v_t.
    /// Stats: iterations summed over the alternations, residual of the last global solve.
    fn step_local_global(&mut self, mut trace: Option<&mut StepTrace>) -> SolveStats {
        let h = self.config.dt;
        let t = self.state.t;
        self.eval_field(false, t);
        // Constant part of the right-hand side, in `gathered`; y in `work` (the iterate).
        local_global_rhs_const(
            &self.system,
            &self.op.adjacency,
            &self.state.x,
            &self.state.v,
            &self.field,
            self.config.gravity,
            h,
            &mut self.gathered,
        );
        for ((w, x), v) in self.work.iter_mut().zip(&self.state.x).zip(&self.state.v) {
            *w = *x + *v * h;
        }
        if let Some(tr) = trace.as_deref_mut() {
            tr.iterates.push(self.work.clone());
        }
        let mut total = SolveStats::default();
        for _ in 0..self.config.local_global_iterations {
            local_projection(&self.work, self.system.springs(), &mut self.spring_buf);
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
                &mut self.work,
                &self.config.solver,
                self.rho,
                &mut self.scratch,
            );
            total.iterations += s.iterations;
            total.residual = s.residual;
            if let Some(tr) = trace.as_deref_mut() {
                tr.iterates.push(self.work.clone());
            }
        }
        let pinned = self.system.pinned();
        for i in 0..self.system.len() {
            if pinned[i] {
                // Dirichlet: exactly x_t + h v_p, v stays v_p.
                self.state.x[i] += self.state.v[i] * h;
            } else {
                self.state.v[i] = (self.work[i] - self.state.x[i]) / h;
                self.state.x[i] = self.work[i];
            }
        }
        total
    }

    /// Total force f(x, v, t) into `self.gathered`: springs with damping, field, gravity.
    fn total_force(&mut self, x_is_new: bool, v_is_rhs: bool, t: f64) {
        let step_key = self.state.step + u64::from(x_is_new);
        // A drag reads the velocity: never the last step's.
        if self.field_step != Some(step_key) || self.config.world.drag != 0.0 {
            self.eval_field(x_is_new, t);
            self.field_step = Some(step_key);
        }
        let x = if x_is_new { &self.work } else { &self.state.x };
        let v = if v_is_rhs { &self.rhs } else { &self.state.v };
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

    /// v' = v + h M^-1 f(x, v, t), x' = x + h v' (the paper's explicit-explicit baseline).
    fn step_symplectic_euler(&mut self) {
        let h = self.config.dt;
        self.total_force(false, false, self.state.t);
        kick(
            &mut self.state.v,
            &self.gathered,
            self.system.masses(),
            self.system.pinned(),
            h,
        );
        position_update(&mut self.state.x, &self.state.v, h);
    }

    /// Velocity Verlet, kick-drift-kick; the second force uses v_half for damping.
    fn step_verlet(&mut self, trace: Option<&mut StepTrace>) {
        let h = self.config.dt;
        let t = self.state.t;
        self.total_force(false, false, t);
        let (m, pinned) = (self.system.masses(), self.system.pinned());
        // v_half in `rhs`, x' in `work`.
        self.rhs.copy_from_slice(&self.state.v);
        kick(&mut self.rhs, &self.gathered, m, pinned, 0.5 * h);
        if let Some(tr) = trace {
            tr.v_half = self.rhs.clone();
        }
        self.work.copy_from_slice(&self.state.x);
        position_update(&mut self.work, &self.rhs, h);
        let t_new = crate::measures::time_at(self.state.step + 1, h);
        self.total_force(true, true, t_new);
        let (m, pinned) = (self.system.masses(), self.system.pinned());
        kick(&mut self.rhs, &self.gathered, m, pinned, 0.5 * h);
        std::mem::swap(&mut self.state.x, &mut self.work);
        std::mem::swap(&mut self.state.v, &mut self.rhs);
    }
}

/// b_i = m_i v_i + h (f_spring_i + f_field_i + m_i g) (`rhs` kernel; docs/physics.md
/// (4.2)). Pinned rows get the same formula; the solvers never read them.
pub fn imex_rhs(
    m: &[f64],
    v: &[DVec3],
    spring_force: &[DVec3],
    field: &[DVec3],
    gravity: DVec3,
    h: f64,
    out: &mut [DVec3],
) {
    for_each_indexed(out, |(i, o)| {
        *o = v[i] * m[i] + (spring_force[i] + field[i] + gravity * m[i]) * h;
    });
}

/// x += h v (`position_update`).
pub fn position_update(x: &mut [DVec3], v: &[DVec3], h: f64) {
    for_each_indexed(x, |(i, x)| *x += v[i] * h);
}

/// v_i += h f_i / m_i on free rows (explicit kick); pinned rows keep their velocity.
pub(crate) fn kick(v: &mut [DVec3], f: &[DVec3], m: &[f64], pinned: &[bool], h: f64) {
    for_each_indexed(v, |(i, v)| {
        if !pinned[i] {
            *v += f[i] * (h / m[i]);
        }
    });
}

/// Local step (`local_projection`, paper eq. 4): d_k = L_k (x_i - x_j) / |x_i - x_j|, or 0
/// for coincident endpoints.
pub fn local_projection(x: &[DVec3], springs: &[Spring], d_out: &mut [DVec3]) {
    for_each_indexed(d_out, |(k, d)| {
        let s = &springs[k];
        // spring_axis gives n = (x_j - x_i) / l, so x_i - x_j = -l n.
        let (n, _) = spring_axis(x[s.i as usize], x[s.j as usize]);
        *d = -n * s.rest_length;
    });
}

/// The part of the local-global right-hand side that is constant over the alternations:
/// c_i = m_i y_i + h (C_L x_t)_i + h^2 (f_field_i + m_i g), y = x_t + h v_t,
/// (C_L x)_i = sum_{k at i} c_k (x_i - x_j).
#[allow(clippy::too_many_arguments)]
pub fn local_global_rhs_const(
    system: &System,
    adjacency: &Adjacency,
    x: &[DVec3],
    v: &[DVec3],
    field: &[DVec3],
    gravity: DVec3,
    h: f64,
    out: &mut [DVec3],
) {
    let (m, springs) = (system.masses(), system.springs());
    for_each_indexed(out, |(i, o)| {
        let mut cl = DVec3::ZERO;
        for e in adjacency.row(i) {
            cl += (x[i] - x[e.other as usize]) * springs[e.spring as usize].damping;
        }
        let y = x[i] + v[i] * h;
        *o = y * m[i] + cl * h + (field[i] + gravity * m[i]) * (h * h);
    });
}

/// Global-step right-hand side (paper eq. 11): rhs_i = c_i + h^2 (J d)_i,
/// (J d)_i = sum_{k at i} sign k_k d_k.
pub fn local_global_rhs(
    adjacency: &Adjacency,
    springs: &[Spring],
    d: &[DVec3],
    constant: &[DVec3],
    h: f64,
    out: &mut [DVec3],
) {
    for_each_indexed(out, |(i, o)| {
        let mut jd = DVec3::ZERO;
        for e in adjacency.row(i) {
            let k = e.spring as usize;
            let t = d[k] * springs[k].stiffness;
            jd += if e.sign > 0 { t } else { -t };
        }
        *o = constant[i] + jd * (h * h);
    });
}

impl CpuSimulation {
    /// Advances `n` steps; stops at the first DDEF stage error.
    pub fn advance(&mut self, n: u64) -> Result<(), DdefError> {
        for _ in 0..n {
            self.last_solve = self.step_once();
            if let Some(e) = self.ddef_error.take() {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The last step's linear solve (`None` before the first step and for explicit
    /// integrators).
    pub fn last_solve(&self) -> Option<SolveStats> {
        self.last_solve
    }

    /// The energy terms of the current state.
    pub fn energy_terms(&self) -> Energies {
        super::energy::energies(&self.system, &self.config, &self.state)
    }

    /// DDEF grid builds and force evaluations so far (`None` without DDEF).
    pub fn ddef_totals(&self) -> Option<DdefCounts> {
        self.ddef.as_ref().map(|d| DdefCounts {
            rebuilds: d.rebuilds(),
            evaluations: d.evaluations(),
        })
    }
}
