//! Forward sensitivities on the GPU (DESIGN section 5): the tangents (dx, dv) of a
//! trajectory with respect to parameter directions ([`Direction`]), propagated step by
//! step with the forward step's own kernels (and, implicit, its matrix), mirroring the CPU
//! reference `grad::step::tangent_step` term by term.
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
//! - the forward's own solve (`plan_solve`: same method, same fixed iteration count, same
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
//! when it does not, the GPU tangent is the derivative of neither map exactly. The explicit tangents solve
//! nothing and agree to f32 roundoff.

use glam::DVec3;

use super::buffers::{to_f32, vec4, Buf};
use super::error::scoped;
use super::layout::{Dispatch, SLOT_RESIDUAL};
use super::plan::{chebyshev_rho, Op};
use super::shaders;
use super::{GpuError, GpuSolver, HeadlessOptions};
use crate::config::{Config, CoulombMethod, Integrator, SolverMethod};
use crate::grad::sensitivity::{check_frames, GradOptions, GradStats, Tangent};
use crate::grad::{Direction, GradError, ParamSet};
use crate::model::{State, System, COULOMB_K};
use crate::sim::SolveStats;

/// The GPU solver of one system with tangents along fixed parameter directions.
pub struct GpuTangents {
    solver: GpuSolver,
    directions: usize,
    /// Relative residual of the last direction's tangent solve (run on demand; empty for
    /// the explicit integrators, whose tangents solve nothing).
    residual_ops: Vec<Op>,
}

impl GpuTangents {
    /// Picks an adapter as [`GpuSolver::headless`] does and builds the solver with one
    /// tangent per direction, all starting at zero.
    pub fn headless(
        system: &System,
        config: &Config,
        directions: &[Direction],
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        // Refuse before opening a device.
        Self::check(system, config, directions)?;
        let solver = GpuSolver::headless(system, config, options)?;
        Self::attach(solver, system, config, directions)
    }

    /// As [`Self::headless`] on the caller's device and queue.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        directions: &[Direction],
    ) -> Result<Self, GpuError> {
        Self::check(system, config, directions)?;
        let solver = GpuSolver::new(device, queue, system, config)?;
        Self::attach(solver, system, config, directions)
    }

    fn check(system: &System, config: &Config, directions: &[Direction]) -> Result<(), GpuError> {
        if config.coulomb.method.ddef().is_some() {
            // DDEF's grid and lists change discontinuously with the positions; there is no
            // tangent of it (the CPU reference refuses it too).
            return Err(GpuError::Unsupported(
                "tangents through coulomb.method = \"ddef\" are not defined; use \"all_pairs\""
                    .into(),
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
            if let Some(dq) = dir.dq.as_ref().filter(|v| v.len() != n) {
                return Err(bad("dq", dq.len(), n));
            }
            if let Some(dk) = dir.dk.as_ref().filter(|v| v.len() != ns) {
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

    /// Adds the tangent buffers and kernels to a freshly built IMEX solver.
    fn attach(
        mut solver: GpuSolver,
        system: &System,
        config: &Config,
        directions: &[Direction],
    ) -> Result<Self, GpuError> {
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
        let limits = solver.device.limits();
        for (what, bytes) in [
            ("tangent state (2 n vec4 per direction)", state_bytes),
            (
                "tangent constants (vec4 per particle, spring and external charge, per direction)",
                (tdir.len() * 16) as u64,
            ),
            // The explicit integrators' field-JVP buffer (the implicit ones' Bd, checked
            // with the solver).
            ("tangent field forces (3 n vec4)", (n * 48) as u64),
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
        let rho =
            if config.integrator.is_implicit() && config.solver.method == SolverMethod::Chebyshev {
                chebyshev_rho(system, config)
            } else {
                0.0
            };
        let all_pairs = config.coulomb.method == CoulombMethod::AllPairs;
        let lg = config.integrator == Integrator::LocalGlobal;
        let device = solver.device.clone();
        let residual_ops = scoped(&device, || {
            use wgpu::util::DeviceExt;
            let storage = wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC;
            let padded = |mut bytes: Vec<u8>| {
                bytes.resize(bytes.len().max(16), 0);
                bytes
            };
            let init = |label: &str, bytes: Vec<u8>| {
                device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents: &padded(bytes),
                    usage: storage,
                })
            };
            let zeroed = |label: &str, size: u64| {
                // Buffers are zero-initialized: tangents start at 0.
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size: size.max(16),
                    usage: storage,
                    mapped_at_creation: false,
                })
            };
            let mut new = vec![
                (Buf::TanState, zeroed("msc tangent state", state_bytes)),
                (
                    Buf::TanDir,
                    init(
                        "msc tangent directions",
                        bytemuck::cast_slice(&tdir).to_vec(),
                    ),
                ),
                (
                    Buf::TanActive,
                    init(
                        "msc tangent active particles",
                        bytemuck::cast_slice(&active).to_vec(),
                    ),
                ),
                (Buf::TanU, zeroed("msc tangent solve", (n * 16) as u64)),
                (
                    Buf::TanS,
                    zeroed("msc tangent solve scratch", (n * 16) as u64),
                ),
                (
                    Buf::TanA,
                    zeroed(
                        "msc tangent local-global rhs",
                        if lg { state_bytes / 2 } else { 16 },
                    ),
                ),
                (
                    Buf::TanZ,
                    zeroed(
                        "msc tangent local-global iterate",
                        if lg { (n * 16) as u64 } else { 16 },
                    ),
                ),
            ];
            let bd_bytes = (n * 48) as u64;
            if solver.buf(Buf::Bd).size() < bd_bytes {
                // Explicit integrators have no right-hand side; the field JVP goes there.
                new.push((Buf::Bd, zeroed("msc tangent field forces", bd_bytes)));
            }
            for (b, buffer) in new {
                // Indexed by `Buf as usize`, after the solver's own buffers.
                let index = b as usize;
                while solver.buffers.len() < index {
                    solver.buffers.push(zeroed("msc unused buffer slot", 16));
                }
                if index < solver.buffers.len() {
                    solver.buffers[index] = buffer;
                } else {
                    solver.buffers.push(buffer);
                }
            }

            let nn = n as u32;
            let residual_ops = if lg {
                // The forward's iterate after each alternation (replanning its solves
                // returns the same buffers): curs[0] = y in x, curs[a + 1] = z^{a+1}.
                let alternations = config.local_global_iterations as usize;
                let mut curs = vec![Buf::X];
                for a in 0..alternations {
                    let other = if curs[a] == Buf::X { Buf::S } else { Buf::X };
                    let next = solver.plan_solve(&mut Vec::new(), config, rho, curs[a], other);
                    curs.push(next);
                }
                let mut last = Buf::TanU;
                // Alternation a of every direction, after the forward's solve a: z^a is in
                // TanZ, z^{a+1} in curs[a + 1].
                let mut alternation = |solver: &mut GpuSolver, a: usize| {
                    let mut ops = Vec::new();
                    for d in 0..nd as u32 {
                        let record = solver.rec(Dispatch {
                            iter: d,
                            ..Default::default()
                        });
                        let op = solver.op(
                            shaders::TANGENT_LG_RHS,
                            &[
                                Buf::Adj,
                                Buf::TanDir,
                                Buf::TanZ,
                                curs[a + 1],
                                Buf::TanA,
                                Buf::TanState,
                                Buf::TanU,
                                Buf::Bd,
                            ],
                            record,
                            nn,
                        );
                        ops.push(op);
                        last = solver.plan_solve(&mut ops, config, rho, Buf::TanU, Buf::TanS);
                        let mode = if a + 1 == alternations { 2 } else { 1 };
                        ops.push(integrate_op(solver, last, d, mode));
                    }
                    ops
                };
                let copy = |solver: &mut GpuSolver, from: Buf| {
                    let m0 = solver.mode(0);
                    solver.op(shaders::TANGENT_COPY, &[from, Buf::TanZ], m0, nn)
                };
                let old = std::mem::take(&mut solver.step_ops);
                let mut seen = 0;
                for op in old {
                    let name = solver.pipelines[op.pipeline].kernel.name;
                    if name == shaders::LG_PREPARE.name {
                        // The step start, while x is still x_t.
                        let mut ops = Vec::new();
                        for (d, &na) in counts.iter().enumerate() {
                            let d = d as u32;
                            field_jvp_op(&mut solver, &mut ops, d, na, all_pairs, false);
                            let record = solver.rec(Dispatch {
                                iter: d,
                                mode: u32::from(na > 0),
                                ..Default::default()
                            });
                            let op = solver.op(
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
                                nn,
                            );
                            ops.push(op);
                        }
                        solver.step_ops.extend(ops);
                    } else if name == shaders::LG_RHS.name {
                        if seen > 0 {
                            let ops = alternation(&mut solver, seen - 1);
                            solver.step_ops.extend(ops);
                        }
                        let op = copy(&mut solver, curs[seen.min(alternations)]);
                        solver.step_ops.push(op);
                        seen += 1;
                    } else if name == shaders::INTEGRATE.name {
                        if seen != alternations {
                            return Err(GpuError::Unsupported(format!(
                                "tangents: the local-global step has {seen} alternations, \
                                 expected {alternations}"
                            )));
                        }
                        let ops = alternation(&mut solver, seen - 1);
                        solver.step_ops.extend(ops);
                    }
                    solver.step_ops.push(op);
                }
                residual_ops(&mut solver, last, nn)
            } else if config.integrator == Integrator::Imex {
                // Where the forward solve leaves v': replanning it records the same
                // dispatches (pipelines, groups and records are shared) and returns the
                // same buffer.
                let vnew = solver.plan_solve(&mut Vec::new(), config, rho, Buf::V, Buf::S);
                let mut ops = Vec::new();
                let mut last = Buf::TanU;
                for (d, &na) in counts.iter().enumerate() {
                    let d = d as u32;
                    field_jvp_op(&mut solver, &mut ops, d, na, all_pairs, false);
                    let record = solver.rec(Dispatch {
                        iter: d,
                        mode: u32::from(na > 0),
                        ..Default::default()
                    });
                    ops.push(forces_op(&mut solver, vnew, record));
                    last = solver.plan_solve(&mut ops, config, rho, Buf::TanU, Buf::TanS);
                    ops.push(integrate_op(&mut solver, last, d, 0));
                }
                // Before the step's final `integrate`, which moves x and the clock.
                let integrate = solver
                    .step_ops
                    .pop()
                    .filter(|op| {
                        solver.pipelines[op.pipeline].kernel.name == shaders::INTEGRATE.name
                    })
                    .ok_or_else(|| {
                        GpuError::Unsupported(
                            "tangents: the IMEX step does not end in integrate".into(),
                        )
                    })?;
                solver.step_ops.extend(ops);
                solver.step_ops.push(integrate);
                // The residual of the last tangent solve: its right-hand side is still in Bd.
                residual_ops(&mut solver, last, nn)
            } else {
                // Explicit integrators: each `explicit_step` kick reads the forces at the
                // state it finds in (x, v) and then moves it, so the tangent's force JVP
                // runs just before each kick, at the same (x, v, t) (grad::step's
                // total_force_jvp): symplectic Euler's one kick of h at (x_t, v_t, t);
                // Verlet's half kicks at (x_t, v_t, t), then after its drift at
                // (x', v_half, t + h). The step clock advances only in the last kick.
                let verlet = config.integrator == Integrator::Verlet;
                let kicks: &[(f64, u32)] = if verlet {
                    // (kick, 1 on the second half kick)
                    &[(0.5, 0), (0.5, 1)]
                } else {
                    &[(1.0, 0)]
                };
                let h = config.dt;
                let old = std::mem::take(&mut solver.step_ops);
                let mut kick = 0;
                for op in old {
                    let name = solver.pipelines[op.pipeline].kernel.name;
                    if name == shaders::EXPLICIT_STEP.name {
                        let &(fraction, second) = kicks.get(kick).ok_or_else(|| {
                            GpuError::Unsupported(
                                "tangents: the explicit step has more kicks than planned".into(),
                            )
                        })?;
                        kick += 1;
                        let mut ops = Vec::new();
                        for (d, &na) in counts.iter().enumerate() {
                            let d = d as u32;
                            field_jvp_op(&mut solver, &mut ops, d, na, all_pairs, second == 1);
                            let record = solver.rec(Dispatch {
                                iter: d,
                                mode: 2 | u32::from(na > 0),
                                weight: (fraction * h) as f32,
                                ..Default::default()
                            });
                            // The forward's v is the velocity the kick's damping uses.
                            ops.push(forces_op(&mut solver, Buf::V, record));
                            // The first kick also drifts dx with the kicked dv.
                            ops.push(integrate_op(&mut solver, Buf::TanU, d, second));
                        }
                        solver.step_ops.extend(ops);
                    }
                    solver.step_ops.push(op);
                }
                if kick != kicks.len() {
                    return Err(GpuError::Unsupported(format!(
                        "tangents: the explicit step has {kick} kicks, expected {}",
                        kicks.len()
                    )));
                }
                Vec::new()
            };
            solver.create_dispatch_records();
            Ok(residual_ops)
        })?;
        Ok(Self {
            solver,
            directions: nd,
            residual_ops,
        })
    }

    /// The underlying solver (device, queue, position buffer). Its step carries the
    /// tangents, which overwrite the forward right-hand side: use [`Self::step`] and
    /// [`Self::read`] rather than its `Simulator` methods.
    pub fn solver(&self) -> &GpuSolver {
        &self.solver
    }

    pub fn directions(&self) -> usize {
        self.directions
    }

    pub fn steps_done(&self) -> u64 {
        self.solver.steps_done()
    }

    /// Advances the state and every tangent by `n` steps.
    pub fn step(&mut self, n: u64) -> Result<(), GpuError> {
        self.solver.submit_steps(n)
    }

    /// The state and one tangent per direction (one submission).
    pub fn read(&self) -> Result<(State, Vec<Tangent>), GpuError> {
        let n = self.solver.n as usize;
        let bytes = 16 * n as u64;
        let data = self.solver.run_and_read(
            &[],
            &[
                (Buf::X, 0, bytes),
                (Buf::V, 0, bytes),
                (Buf::TanState, 0, 2 * bytes * self.directions as u64),
            ],
        )?;
        let f: &[[f32; 4]] = bytemuck::cast_slice(&data);
        let vec = |k: usize| DVec3::new(f[k][0] as f64, f[k][1] as f64, f[k][2] as f64);
        let range = |a: usize| (a..a + n).map(vec).collect::<Vec<_>>();
        let steps = self.solver.steps_done();
        let state = State {
            x: range(0),
            v: range(n),
            t: steps as f64 * self.solver.dt,
            step: steps,
        };
        let tangents = (0..self.directions)
            .map(|d| Tangent {
                dx: range(2 * n + 2 * n * d),
                dv: range(3 * n + 2 * n * d),
            })
            .collect();
        Ok((state, tangents))
    }

    /// The relative residual |b - A dv'| / |b| (free rows) of the last direction's tangent
    /// solve in the last step, with the solver's fixed iteration count.
    pub fn last_tangent_solve(&self) -> Result<SolveStats, GpuError> {
        if self.residual_ops.is_empty() {
            // Explicit integrators: no solve (the CPU reference reports 0 too).
            return Ok(SolveStats::default());
        }
        let data = self.solver.run_and_read(
            &self.residual_ops,
            &[(Buf::Scalars, 16 * u64::from(SLOT_RESIDUAL), 16)],
        )?;
        let s: &[f32] = bytemuck::cast_slice(&data);
        let (rr, bb) = (s[0] as f64, s[1] as f64);
        Ok(SolveStats {
            iterations: self.solver.iterations,
            residual: if bb > 0.0 {
                (rr / bb).sqrt()
            } else {
                rr.sqrt()
            },
        })
    }
}

/// `tangent_coulomb` for direction `d` (nothing when it has no active particle), at the
/// step clock's time or, with `later`, at t + h.
fn field_jvp_op(
    solver: &mut GpuSolver,
    ops: &mut Vec<Op>,
    d: u32,
    na: u32,
    all_pairs: bool,
    later: bool,
) {
    if na == 0 {
        return;
    }
    let record = solver.rec(Dispatch {
        iter: d,
        mode: u32::from(all_pairs) | (u32::from(later) << 1),
        block: na,
        ..Default::default()
    });
    let op = solver.op(
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
    );
    ops.push(op);
}

/// `tangent_forces` with the forward velocity `vel` (IMEX: v'; explicit: the kick's v).
fn forces_op(solver: &mut GpuSolver, vel: Buf, record: u32) -> Op {
    let n = solver.n;
    solver.op(
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
        n,
    )
}

/// The residual of the last tangent solve of a step (its right-hand side is still in
/// `Bd`), reduced into `SLOT_RESIDUAL`.
fn residual_ops(solver: &mut GpuSolver, last: Buf, n: u32) -> Vec<Op> {
    let m0 = solver.mode(0);
    let op = solver.op(
        shaders::RESIDUAL,
        &[Buf::Props, Buf::Sf, Buf::Adj, Buf::Bd, last, Buf::Partials],
        m0,
        n,
    );
    vec![op, solver.reduce(SLOT_RESIDUAL, 0)]
}

/// `tangent_integrate` of direction `d` from `sol` (mode 1: dv only).
fn integrate_op(solver: &mut GpuSolver, sol: Buf, d: u32, mode: u32) -> Op {
    let record = solver.rec(Dispatch {
        iter: d,
        mode,
        ..Default::default()
    });
    let n = solver.n;
    solver.op(shaders::TANGENT_INTEGRATE, &[sol, Buf::TanState], record, n)
}

/// `grad::sensitivity::drive` on the GPU: the forward run (a plain [`GpuSolver`] without
/// tangents) or the run with tangents, read back at each frame.
pub(crate) fn drive(
    set: &ParamSet,
    theta: &[f64],
    frames: &[u64],
    options: &GradOptions,
    with_tangents: bool,
    allow_software: bool,
    mut on_frame: impl FnMut(usize, &State, &[Tangent]) -> Result<(), GradError>,
) -> Result<GradStats, GradError> {
    check_frames(frames)?;
    if options.window.is_some() {
        return Err(GradError::Param(
            "a truncation window is not supported by the GPU tangents (use --backend cpu)".into(),
        ));
    }
    if options.exact_forward {
        return Err(GradError::Param(
            "exact forward solves (CG to a tolerance) are not supported by the GPU, which runs \
             a fixed iteration count (use --backend cpu)"
                .into(),
        ));
    }
    let (system, config) = set.instantiate(theta)?;
    let hopts = HeadlessOptions { allow_software };
    let names = set.component_names();
    let n = system.len();
    let mut stats = GradStats::default();
    enum Run {
        Forward(GpuSolver),
        Tangents(GpuTangents),
    }
    let mut run = if with_tangents {
        let dirs = set.directions();
        stats.tangents = dirs.len();
        Run::Tangents(GpuTangents::headless(&system, &config, &dirs, &hopts)?)
    } else {
        Run::Forward(GpuSolver::headless(&system, &config, &hopts)?)
    };
    let zero = Tangent {
        dx: vec![DVec3::ZERO; n],
        dv: vec![DVec3::ZERO; n],
    };
    let mut done = 0;
    for (k, &frame) in frames.iter().enumerate() {
        let (state, tangents) = match &mut run {
            Run::Forward(s) => {
                s.submit_steps(frame - done)?;
                (s.read_state()?, Vec::new())
            }
            Run::Tangents(t) => {
                t.step(frame - done)?;
                let (state, tangents) = t.read()?;
                if frame > 0 {
                    let s = t.last_tangent_solve()?;
                    stats.worst_tangent_residual = stats.worst_tangent_residual.max(s.residual);
                }
                if frame == 0 {
                    (state, vec![zero.clone(); tangents.len()])
                } else {
                    (state, tangents)
                }
            }
        };
        done = frame;
        if !state.is_finite() {
            return Err(GradError::NonFiniteState {
                step: state.step,
                time: state.t,
            });
        }
        if let Some(p) = tangents
            .iter()
            .position(|t| !t.dx.iter().chain(&t.dv).all(|v| v.is_finite()))
        {
            return Err(GradError::NonFiniteTangent {
                step: state.step,
                param: names[p].clone(),
            });
        }
        on_frame(k, &state, &tangents)?;
    }
    stats.steps = done;
    if let Run::Tangents(t) = &run {
        if !t.residual_ops.is_empty() {
            stats.tangent_iterations = u64::from(t.solver.iterations) * done * t.directions as u64;
        }
    }
    Ok(stats)
}
