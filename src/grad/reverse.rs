//! The adjoint of one time step on the CPU (f64): given the cotangent (lx, lv) of the
//! state after a step, the cotangent of the state before it, with the step's parameter
//! cotangents added to a [`Cotangent`]. It transposes exactly the map that
//! [`super::step::tangent_step`] differentiates (the exact-solve step; see the module
//! documentation of [`crate::grad`]), so <(lx, lv), J (dx, dv)> = <J^T (lx, lv), (dx, dv)>
//! to the solves' tolerance, which the tests check for every integrator. With
//! [`AdjointSolve::Scene`] the same equations are solved by the scene's own solver.
//!
//! IMEX, A(x_t, k, m) v' = b(x_t, v_t, theta), x' = x_t + h v' (A symmetric):
//! g = lv' + h lx'; solve A mu = g (the forward's matrix on a new right-hand side); then
//! lx = lx' + h (K + F)^T mu - [d(A v')/dx]^T mu, lv = M mu,
//! theta_bar += h (df/dtheta)^T mu - [d(A v')/dtheta]^T mu.
//! Local-global: per alternation in reverse, mu = P^-1 (cotangent of z'), whose local
//! step returns h^2 k D^T (mu_i - mu_j) to the iterate before; the constant right-hand
//! side c collects sum mu. Explicit: the kicks' cotangent h M^-1 lv through the force's
//! vjp. Pinned rows are Dirichlet: their cotangents are dropped (no parameter moves them).

// Per-particle loops index several arrays by particle, as the kernels do.
#![allow(clippy::needless_range_loop)]

use super::cotangent::Cotangent;
use super::jvp::{local_projection_jvp, spring_elastic_jvp};
use super::step::{other_forces, TangentScratch};
use super::step::{AdjointSolve, Forward, Record, TangentSolve};
use super::vjp::SpringBar;
use super::vjp::{field_forces_vjp, field_param_vjp, spring_force_vjp, w_block_vjp};
use crate::config::Integrator;
use crate::cpu::forces::{gather_spring_forces, spring_axis};
use crate::cpu::rows::{for_each_indexed, PAR_CHUNK};
use crate::cpu::solvers::{cg, solve as scene_solve, BlockLaplacian, SolverScratch};
use crate::measures::SolveStats;
use glam::DVec3;
use rayon::prelude::*;

/// The adjoint state: the cotangent of (x, v) at the step being reversed to.
#[derive(Clone, Debug, Default)]
pub(crate) struct Adjoint {
    pub lx: Vec<DVec3>,
    pub lv: Vec<DVec3>,
}

impl Adjoint {
    pub fn zeros(n: usize) -> Self {
        Self {
            lx: vec![DVec3::ZERO; n],
            lv: vec![DVec3::ZERO; n],
        }
    }
}

/// Work buffers of the reverse step, and the warm starts of its solves (the previous
/// step's solution of the same solve: the adjoint varies slowly, as the state does).
#[derive(Clone, Debug, Default)]
pub(crate) struct ReverseScratch {
    /// IMEX: A at the reversed step's x_t.
    op: Option<BlockLaplacian>,
    warm: Vec<Vec<DVec3>>,
    rhs: Vec<DVec3>,
    a: Vec<DVec3>,
    b: Vec<DVec3>,
    lc: Vec<DVec3>,
    per_spring: Vec<DVec3>,
    per_spring2: Vec<DVec3>,
    kbar: Vec<f64>,
    bars: Vec<SpringBar>,
    /// Explicit integrators with mass parameters: the force F itself.
    forces: TangentScratch,
    solver: SolverScratch,
}

impl ReverseScratch {
    fn size(&mut self, n: usize, ns: usize, solves: usize) {
        for v in [&mut self.rhs, &mut self.a, &mut self.b, &mut self.lc] {
            v.resize(n, DVec3::ZERO);
        }
        for v in [&mut self.per_spring, &mut self.per_spring2] {
            v.resize(ns, DVec3::ZERO);
        }
        self.kbar.resize(ns, 0.0);
        self.warm.resize(solves, vec![DVec3::ZERO; n]);
    }
}

/// Reverses step `step` (from state `step` to `step + 1`), `record` -> (x1, v1): `adj`
/// goes from the cotangent of (x1, v1) to that of (x_t, v_t), and `cot` gains the step's
/// parameter cotangents. `record` must hold the local-global iterates (`Forward::step`'s trace);
/// with DDEF, `fwd` holds the step's evaluations (`Forward::ddef_for_step`).
/// Returns the worst solve residual and the iterations summed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reverse_step(
    fwd: &Forward,
    record: &Record,
    x1: &[DVec3],
    v1: &[DVec3],
    step: u64,
    adj: &mut Adjoint,
    cot: &mut Cotangent,
    solve: &TangentSolve,
    mode: AdjointSolve,
    ws: &mut ReverseScratch,
) -> SolveStats {
    let sys = fwd.system();
    let cfg = fwd.config();
    let (n, ns) = (sys.len(), sys.springs().len());
    let t0 = crate::measures::time_at(step, cfg.dt);
    let solves = match cfg.integrator {
        Integrator::Imex => 1,
        Integrator::LocalGlobal => cfg.local_global_iterations as usize,
        _ => 0,
    };
    ws.size(n, ns, solves);
    let stats = match cfg.integrator {
        Integrator::Imex => reverse_imex(fwd, record, v1, t0, adj, cot, solve, mode, ws),
        Integrator::LocalGlobal => reverse_local_global(fwd, record, t0, adj, cot, solve, mode, ws),
        Integrator::SymplecticEuler => {
            let h = cfg.dt;
            // v' = v + h M^-1 F(x, v, t), x' = x + h v'.
            for i in 0..n {
                adj.lv[i] += adj.lx[i] * h;
            }
            kick_vjp(fwd, &record.x0, &record.v0, t0, h, 0, adj, cot, ws);
            SolveStats::default()
        }
        Integrator::Verlet => {
            let h = cfg.dt;
            // v' = v_h + h/2 M^-1 F(x', v_h, t1); x' = x + h v_h; v_h = v + h/2 M^-1 F(x, v, t0).
            let t1 = crate::measures::time_at(step + 1, h);
            kick_vjp(fwd, x1, &record.v_half, t1, 0.5 * h, 1, adj, cot, ws);
            for i in 0..n {
                adj.lv[i] += adj.lx[i] * h;
            }
            kick_vjp(fwd, &record.x0, &record.v0, t0, 0.5 * h, 0, adj, cot, ws);
            SolveStats::default()
        }
    };
    let pinned = sys.pinned();
    for i in 0..n {
        if pinned[i] {
            adj.lx[i] = DVec3::ZERO;
            adj.lv[i] = DVec3::ZERO;
        }
    }
    stats
}

/// The IMEX step's transpose (see the module documentation).
#[allow(clippy::too_many_arguments)]
fn reverse_imex(
    fwd: &Forward,
    record: &Record,
    v1: &[DVec3],
    t0: f64,
    adj: &mut Adjoint,
    cot: &mut Cotangent,
    solve: &TangentSolve,
    mode: AdjointSolve,
    ws: &mut ReverseScratch,
) -> SolveStats {
    let (sys, cfg) = (fwd.system(), fwd.config());
    let h = cfg.dt;
    let (x0, v0) = (&record.x0, &record.v0);
    let springs = sys.springs();
    let n = sys.len();
    let op = ws
        .op
        .get_or_insert_with(|| BlockLaplacian::from_system(sys));
    op.assemble_imex(x0, springs, h);
    for i in 0..n {
        ws.rhs[i] = adj.lv[i] + adj.lx[i] * h;
    }
    let stats = adjoint_solve(
        fwd,
        op,
        &ws.rhs,
        &mut ws.warm[0],
        solve,
        mode,
        &mut ws.solver,
    );
    let mu = &ws.warm[0];
    // Per spring: h K^T mu (symmetric: the jvp) + d(mu^T A v')/dd, and k's cotangent.
    let kernel = |(k, (p, kb)): (usize, (&mut DVec3, &mut f64))| {
        let s = &springs[k];
        let (i, j) = (s.i as usize, s.j as usize);
        let a = mu[i] - mu[j];
        let elastic = spring_elastic_jvp(x0[i], x0[j], s, mu[j] - mu[i], 0.0);
        let (gd, gk) = w_block_vjp(x0[i], x0[j], s, h, a, v1[i] - v1[j]);
        *p = elastic * h + gd;
        let (nk, l) = spring_axis(x0[i], x0[j]);
        *kb = h * a.dot(nk) * (l - s.rest_length) - gk;
    };
    per_spring(&mut ws.per_spring, &mut ws.kbar, kernel);
    gather_spring_forces(&fwd.op().adjacency, &ws.per_spring, &mut ws.a);
    field_forces_vjp(x0, sys.charges(), cfg, t0, mu, fwd.ddef_at(0), &mut ws.b);
    let m = sys.masses();
    for i in 0..n {
        adj.lx[i] += ws.a[i] + ws.b[i] * h;
        adj.lv[i] = mu[i] * m[i];
    }
    add_spring_cotangents(cot, &ws.kbar);
    if cot.wants.masses {
        for i in 0..n {
            cot.masses[i] += mu[i].dot(v0[i] + cfg.gravity * h - v1[i]);
        }
    }
    for i in 0..n {
        ws.lc[i] = mu[i] * h;
    }
    field_param_vjp(x0, sys.charges(), cfg, t0, &ws.lc, fwd.ddef_at(0), cot);
    stats
}

/// The local-global step's transpose: alternations in reverse, then the constant
/// right-hand side c = M y + h C_L x_t + h^2 (f_field + M g), y = x_t + h v_t.
#[allow(clippy::too_many_arguments)]
fn reverse_local_global(
    fwd: &Forward,
    record: &Record,
    t0: f64,
    adj: &mut Adjoint,
    cot: &mut Cotangent,
    solve: &TangentSolve,
    mode: AdjointSolve,
    ws: &mut ReverseScratch,
) -> SolveStats {
    let (sys, cfg) = (fwd.system(), fwd.config());
    let h = cfg.dt;
    let h2 = h * h;
    let (x0, iterates) = (&record.x0, &record.iterates);
    assert!(
        iterates.len() == cfg.local_global_iterations as usize + 1,
        "reverse_local_global: the record has no iterates"
    );
    let springs = sys.springs();
    let (n, m, pinned) = (sys.len(), sys.masses(), sys.pinned());
    let adjacency = &fwd.op().adjacency;
    // Free rows: x' = z^N, v' = (z^N - x_t)/h.
    for i in 0..n {
        ws.rhs[i] = adj.lx[i] + adj.lv[i] / h;
        ws.lc[i] = DVec3::ZERO;
        if !pinned[i] {
            adj.lx[i] = -adj.lv[i] / h;
            adj.lv[i] = DVec3::ZERO;
        }
    }
    let mut total = SolveStats::default();
    for a in (0..iterates.len() - 1).rev() {
        let (z, z1) = (&iterates[a], &iterates[a + 1]);
        let (rhs, warm) = (&ws.rhs, &mut ws.warm[a]);
        let s = adjoint_solve(fwd, fwd.op(), rhs, warm, solve, mode, &mut ws.solver);
        total.iterations += s.iterations;
        total.residual = total.residual.max(s.residual);
        let mu = &ws.warm[a];
        let kernel = |(k, (p, kb)): (usize, (&mut DVec3, &mut f64))| {
            let s = &springs[k];
            let (i, j) = (s.i as usize, s.j as usize);
            let w = mu[i] - mu[j];
            let (nk, _) = spring_axis(z[i], z[j]);
            // d_k = -L n; P's h^2 L(k) block acts on z'.
            *kb = h2 * (w.dot(-nk * s.rest_length) - w.dot(z1[i] - z1[j]));
            *p = local_projection_jvp(z[i], z[j], s.rest_length, w, DVec3::ZERO)
                * (h2 * s.stiffness);
        };
        per_spring(&mut ws.per_spring, &mut ws.kbar, kernel);
        add_spring_cotangents(cot, &ws.kbar);
        if cot.wants.masses {
            for i in 0..n {
                cot.masses[i] -= mu[i].dot(z1[i]);
            }
        }
        for i in 0..n {
            ws.lc[i] += mu[i];
        }
        gather_spring_forces(adjacency, &ws.per_spring, &mut ws.rhs);
    }
    // ws.rhs is now the cotangent of y = z^0 = x_t + h v_t; lc that of c.
    let lc = &ws.lc;
    field_forces_vjp(x0, sys.charges(), cfg, t0, lc, fwd.ddef_at(0), &mut ws.b);
    for i in 0..n {
        let mut cl = DVec3::ZERO;
        for e in adjacency.row(i) {
            cl += (lc[i] - lc[e.other as usize]) * springs[e.spring as usize].damping;
        }
        let ly = ws.rhs[i] + lc[i] * m[i];
        adj.lx[i] += ly + cl * h + ws.b[i] * h2;
        adj.lv[i] += ly * h;
    }
    if cot.wants.masses {
        for i in 0..n {
            cot.masses[i] += lc[i].dot(iterates[0][i] + cfg.gravity * h2);
        }
    }
    for i in 0..n {
        ws.a[i] = lc[i] * h2;
    }
    field_param_vjp(x0, sys.charges(), cfg, t0, &ws.a, fwd.ddef_at(0), cot);
    total
}

/// Solves `op mu = rhs` from the warm start in `mu` as `mode` says: CG to `solve`'s
/// tolerance, or the scene's solver as the forward runs it.
fn adjoint_solve(
    fwd: &Forward,
    op: &BlockLaplacian,
    rhs: &[DVec3],
    mu: &mut [DVec3],
    solve: &TangentSolve,
    mode: AdjointSolve,
    scratch: &mut SolverScratch,
) -> SolveStats {
    match mode {
        AdjointSolve::Exact => cg(op, rhs, mu, solve.max_iterations, solve.tolerance, scratch),
        AdjointSolve::Scene => {
            let cfg = &fwd.config().solver;
            scene_solve(op, rhs, mu, cfg, fwd.chebyshev_rho(), scratch)
        }
    }
}

/// One explicit kick v' = v + s M^-1 F(x, v, t) (F without gravity; pinned rows not
/// kicked), reversed: with mu = s M^-1 lv' on free rows, lx += (dF/dx)^T mu,
/// lv += (dF/dv)^T mu (lv' itself passes through), the parameters' cotangents, and
/// m_bar = -mu . F / m. `ddef` picks the step's DDEF evaluation at x (`Forward::ddef_at`).
#[allow(clippy::too_many_arguments)]
fn kick_vjp(
    fwd: &Forward,
    x: &[DVec3],
    v: &[DVec3],
    t: f64,
    s: f64,
    ddef: usize,
    adj: &mut Adjoint,
    cot: &mut Cotangent,
    ws: &mut ReverseScratch,
) {
    let sys = fwd.system();
    let cfg = fwd.config();
    let (n, m, pinned) = (sys.len(), sys.masses(), sys.pinned());
    let springs = sys.springs();
    for i in 0..n {
        ws.lc[i] = if pinned[i] {
            DVec3::ZERO
        } else {
            adj.lv[i] * (s / m[i])
        };
    }
    let mu = &ws.lc;
    ws.bars.resize(springs.len(), SpringBar::default());
    for_each_indexed(&mut ws.bars, |(k, b)| {
        let sp = &springs[k];
        let (i, j) = (sp.i as usize, sp.j as usize);
        *b = spring_force_vjp(x[i], x[j], v[i], v[j], sp, mu[i] - mu[j]);
    });
    for (k, b) in ws.bars.iter().enumerate() {
        // dd = dx_j - dx_i: "on i" with the gather's sign gives i: -dd_bar, j: +dd_bar.
        ws.per_spring[k] = -b.dd;
        ws.per_spring2[k] = -b.du;
        ws.kbar[k] = b.k;
    }
    gather_spring_forces(&fwd.op().adjacency, &ws.per_spring, &mut ws.a);
    gather_spring_forces(&fwd.op().adjacency, &ws.per_spring2, &mut ws.b);
    for i in 0..n {
        adj.lx[i] += ws.a[i];
        adj.lv[i] += ws.b[i];
    }
    add_spring_cotangents(cot, &ws.kbar);
    field_forces_vjp(x, sys.charges(), cfg, t, mu, fwd.ddef_at(ddef), &mut ws.a);
    for i in 0..n {
        adj.lx[i] += ws.a[i];
    }
    field_param_vjp(x, sys.charges(), cfg, t, mu, fwd.ddef_at(ddef), cot);
    if cot.wants.masses {
        other_forces(sys, cfg, &fwd.op().adjacency, x, v, t, &mut ws.forces);
        let f = ws.forces.forces();
        for i in 0..n {
            cot.masses[i] -= ws.lc[i].dot(f[i]) / m[i];
        }
    }
}

/// Runs `kernel(k, (&mut vector, &mut scalar))` for every spring (one writer each), in
/// parallel chunks of at least `PAR_CHUNK` springs as the reference's kernels do.
fn per_spring(
    vec: &mut [DVec3],
    scalar: &mut [f64],
    kernel: impl Fn((usize, (&mut DVec3, &mut f64))) + Sync + Send,
) {
    if vec.len() <= PAR_CHUNK {
        vec.iter_mut()
            .zip(scalar.iter_mut())
            .enumerate()
            .for_each(kernel);
    } else {
        vec.par_iter_mut()
            .zip(scalar.par_iter_mut())
            .enumerate()
            .with_min_len(PAR_CHUNK)
            .for_each(kernel);
    }
}

fn add_spring_cotangents(cot: &mut Cotangent, kbar: &[f64]) {
    if cot.wants.stiffnesses {
        for (c, k) in cot.stiffnesses.iter_mut().zip(kbar) {
            *c += k;
        }
    }
}

#[cfg(test)]
#[path = "reverse_tests.rs"]
mod tests;
