//! What the step program records into ([`Planner`]: engine, buffers, sizes, the
//! solver), and typed launchers of the forward step's kernels: one method per kernel
//! family that names its buffers, checks what it is given and returns the [`Op`] (or the
//! ops of a whole solve), so the step program never lists bindings by position.

use super::buffers::{Buf, Buffers};
use super::engine::Engine;
use super::layout::{Dispatch, SCALAR_SLOTS, SLOT_PQ, SLOT_RZ};
use super::limits::grid;
use super::params::TimeStep;
use super::recording::Op;
use super::shaders::{self, Kernel};
use super::GpuError;
use crate::config::{Config, CoulombMethod, Integrator, SolverMethod};
// The same weights as the reference, so both backends run the same iteration.
use crate::cpu::solvers::chebyshev_weights;
use crate::model::System;

/// Chebyshev's spectral radius: the config's, or the CPU reference's power-iteration
/// estimate on the initial operator (IMEX: A at x_0; local-global: P), so both backends
/// use the same weights.
pub(super) fn chebyshev_rho(system: &System, config: &Config, dt: TimeStep) -> f64 {
    use crate::cpu::solvers::{estimate_block_jacobi_rho, BlockLaplacian, RHO_ESTIMATE_ITERATIONS};
    config.solver.rho.unwrap_or_else(|| {
        let op = match config.integrator {
            Integrator::LocalGlobal => BlockLaplacian::local_global(system, dt.seconds()),
            _ => BlockLaplacian::imex(system, system.positions(), dt.seconds()),
        };
        estimate_block_jacobi_rho(&op, config.solver.omega, RHO_ESTIMATE_ITERATIONS)
    })
}

/// The linear solver every solve of a step runs (the forward's and the tangents').
pub(super) struct SolveSpec {
    pub(super) method: SolverMethod,
    pub(super) iterations: u32,
    /// Chebyshev's weights omega_k (empty for the other methods).
    pub(super) weights: Vec<f64>,
}

/// What the launchers here and in `gpu::tangent` record into: the engine that
/// owns pipelines, bind groups and records, the buffers they bind, and the sizes.
pub(super) struct Planner<'a> {
    pub(super) device: &'a wgpu::Device,
    pub(super) engine: &'a mut Engine,
    pub(super) buffers: &'a Buffers,
    pub(super) dt: TimeStep,
    /// Particles, springs, charged particles (0 unless the Coulomb sum runs).
    pub(super) n: u32,
    pub(super) ns: u32,
    pub(super) nc: u32,
    /// `coulomb.method = "ddef"`: a step's Coulomb sum is a DDEF evaluation.
    pub(super) ddef: bool,
    pub(super) solve: SolveSpec,
    /// Worlds of a batch (1 for one system): a reduction's second stage runs one
    /// workgroup per world.
    pub(super) worlds: u32,
}

impl<'a> Planner<'a> {
    pub(super) fn new(
        device: &'a wgpu::Device,
        engine: &'a mut Engine,
        buffers: &'a Buffers,
        system: &System,
        config: &Config,
        dt: TimeStep,
    ) -> Self {
        let method = config.solver.method;
        let iterations = config.solver.iterations;
        let weights = if config.integrator.is_implicit() && method == SolverMethod::Chebyshev {
            chebyshev_weights(chebyshev_rho(system, config, dt), iterations as usize)
        } else {
            Vec::new()
        };
        let coulomb = matches!(
            config.coulomb.method,
            CoulombMethod::AllPairs | CoulombMethod::Ddef(_)
        );
        Self {
            device,
            engine,
            buffers,
            dt,
            n: system.len() as u32,
            ns: system.springs().len() as u32,
            nc: if coulomb {
                system.charged_count() as u32
            } else {
                0
            },
            ddef: config.coulomb.method.ddef().is_some(),
            solve: SolveSpec {
                method,
                iterations,
                weights,
            },
            worlds: 1,
        }
    }

    /// A planner for a batch of `worlds` worlds packed in `buffers`: `n` particle slots,
    /// `ns` springs and `nc` Coulomb source slots (0: no Coulomb sum). Chebyshev's
    /// weights come from the world table, one set per world.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn batch(
        device: &'a wgpu::Device,
        engine: &'a mut Engine,
        buffers: &'a Buffers,
        config: &Config,
        dt: TimeStep,
        (n, ns, nc): (u32, u32, u32),
        worlds: u32,
    ) -> Self {
        Self {
            device,
            engine,
            buffers,
            dt,
            n,
            ns,
            nc,
            ddef: false,
            solve: SolveSpec {
                method: config.solver.method,
                iterations: config.solver.iterations,
                weights: vec![1.0; config.solver.iterations as usize],
            },
            worlds,
        }
    }

    /// Workgroup grid of a 1D dispatch over `count` items (2D past the per-dimension
    /// limit).
    pub(super) fn grid(&self, count: u32) -> [u32; 2] {
        grid(
            count,
            self.device.limits().max_compute_workgroups_per_dimension,
        )
    }

    /// Byte offset of the (deduplicated) record `d`.
    pub(super) fn record(&mut self, d: Dispatch) -> u32 {
        self.engine.record(d)
    }

    /// Byte offset of the record with `mode` alone.
    pub(super) fn mode(&mut self, mode: u32) -> u32 {
        self.record(Dispatch {
            mode,
            ..Default::default()
        })
    }

    /// A launch of `k` over `count` items (bindings checked by the engine).
    pub(super) fn dispatch(
        &mut self,
        k: Kernel,
        bufs: &[Buf],
        record: u32,
        count: u32,
    ) -> Result<Op, GpuError> {
        let grid = self.grid(count);
        self.engine
            .dispatch(self.device, self.buffers, k, bufs, record, grid)
    }
}

fn refuse(kernel: &'static str, problem: String) -> GpuError {
    GpuError::Binding { kernel, problem }
}

/// The explicit kick's bindings (x and v updated in place).
const EXPLICIT: [Buf; 7] = [
    Buf::X,
    Buf::V,
    Buf::Props,
    Buf::Force,
    Buf::Sf,
    Buf::Adj,
    Buf::Clock,
];

impl Planner<'_> {
    /// `spring_assemble` (n, force, W_k per spring) at (x, v); mode 0: the IMEX blocks,
    /// 1: forces with explicit damping. Nothing without springs.
    pub(super) fn springs(&mut self, ops: &mut Vec<Op>, mode: u32) -> Result<(), GpuError> {
        if self.ns == 0 {
            return Ok(());
        }
        let record = self.mode(mode);
        let ns = self.ns;
        ops.push(self.dispatch(
            shaders::SPRING_ASSEMBLE,
            &[Buf::X, Buf::V, Buf::Springs, Buf::SParams, Buf::Sf],
            record,
            ns,
        )?);
        Ok(())
    }

    /// All non-spring forces at t (mode 0) or t + h (mode 1): external and gravity per
    /// particle, then the Coulomb sum.
    pub(super) fn field(
        &mut self,
        ops: &mut Vec<Op>,
        mode: u32,
        exact: bool,
    ) -> Result<(), GpuError> {
        if mode > 1 {
            return Err(refuse(
                shaders::EXTERNAL_FORCES.name,
                format!("mode {mode}: 0 (time t) or 1 (t + h)"),
            ));
        }
        let record = self.mode(mode);
        let n = self.n;
        ops.push(self.dispatch(
            shaders::EXTERNAL_FORCES,
            &[Buf::X, Buf::Props, Buf::Clock, Buf::Force],
            record,
            n,
        )?);
        self.coulomb(ops, mode, exact)
    }

    /// The Coulomb forces over the compacted charges (`coulomb_sources`), added to the
    /// force buffer: tiled all-pairs, or with DDEF (unless `exact`, as the energy wants)
    /// a DDEF evaluation, whose lists are stale after the positions moved (mode 1).
    pub(super) fn coulomb(
        &mut self,
        ops: &mut Vec<Op>,
        mode: u32,
        exact: bool,
    ) -> Result<(), GpuError> {
        let nc = self.nc;
        if nc == 0 {
            return Ok(());
        }
        let m0 = self.mode(0);
        ops.push(self.dispatch(
            shaders::COULOMB_SOURCES,
            &[Buf::X, Buf::Props, Buf::Charged, Buf::Sources],
            m0,
            nc,
        )?);
        if self.ddef && !exact {
            ops.push(Op::Ddef { moved: mode == 1 });
        } else {
            ops.push(self.dispatch(
                shaders::COULOMB_TILED,
                &[Buf::Sources, Buf::Charged, Buf::Force],
                m0,
                nc,
            )?);
        }
        Ok(())
    }

    /// IMEX: the right-hand side b and the diagonal of A into `Bd`.
    pub(super) fn rhs(&mut self) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            shaders::RHS,
            &[Buf::V, Buf::Props, Buf::Force, Buf::Sf, Buf::Adj, Buf::Bd],
            m0,
            n,
        )
    }

    /// The end of an implicit step from the solution (IMEX: v' in v (mode 0) or in the
    /// scratch (1); local-global: z in x (2) or in the scratch (3)); advances the clock.
    pub(super) fn integrate(&mut self, mode: u32) -> Result<Op, GpuError> {
        if mode > 3 {
            return Err(refuse(shaders::INTEGRATE.name, format!("mode {mode} > 3")));
        }
        let (record, n) = (self.mode(mode), self.n);
        self.dispatch(
            shaders::INTEGRATE,
            &[Buf::X, Buf::V, Buf::S, Buf::Xt, Buf::Props, Buf::Clock],
            record,
            n,
        )
    }

    /// Local-global: y, x_t and the constant part of the right-hand side.
    pub(super) fn lg_prepare(&mut self) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            shaders::LG_PREPARE,
            &[Buf::X, Buf::V, Buf::Props, Buf::Force, Buf::Xt, Buf::B0],
            m0,
            n,
        )
    }

    /// Local-global: the local step's right-hand side from the iterate `cur`.
    pub(super) fn lg_rhs(&mut self, cur: Buf) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            shaders::LG_RHS,
            &[
                Buf::Props,
                Buf::Xt,
                cur,
                Buf::B0,
                Buf::SParams,
                Buf::Adj,
                Buf::Bd,
            ],
            m0,
            n,
        )
    }

    /// An explicit kick (mode 0: symplectic Euler's; 1, 2: Verlet's first and second).
    pub(super) fn explicit_step(&mut self, mode: u32) -> Result<Op, GpuError> {
        if mode > 2 {
            return Err(refuse(
                shaders::EXPLICIT_STEP.name,
                format!("mode {mode} > 2"),
            ));
        }
        let (record, n) = (self.mode(mode), self.n);
        self.dispatch(shaders::EXPLICIT_STEP, &EXPLICIT, record, n)
    }

    /// Per-workgroup partial sums of the energies (two reduction blocks).
    pub(super) fn energy_reduce(&mut self) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            shaders::ENERGY_REDUCE,
            &[
                Buf::X,
                Buf::V,
                Buf::Props,
                Buf::Force,
                Buf::SParams,
                Buf::Adj,
                Buf::Clock,
                Buf::Partials,
            ],
            m0,
            n,
        )
    }

    /// Partial sums of |b - A u|^2 and |b|^2 over the free rows, for the solve of
    /// unknown `u` (b and the diagonal in `Bd`, W_k in `Sf`).
    pub(super) fn residual(&mut self, u: Buf) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            shaders::RESIDUAL,
            &[Buf::Sf, Buf::Adj, Buf::Bd, u, Buf::Partials],
            m0,
            n,
        )
    }

    /// Second reduction stage: block `block` of the partial sums into scalar `slot`.
    pub(super) fn reduce(&mut self, slot: u32, block: u32) -> Result<Op, GpuError> {
        if slot >= SCALAR_SLOTS || block > 1 {
            return Err(refuse(
                shaders::DOT_REDUCE.name,
                format!("slot {slot} of {SCALAR_SLOTS}, block {block} of 2"),
            ));
        }
        let record = self.record(Dispatch {
            slot,
            block,
            ..Default::default()
        });
        let op = self.dispatch(
            shaders::DOT_REDUCE,
            &[Buf::Partials, Buf::Scalars],
            record,
            1,
        )?;
        // One workgroup per world whatever the grid of a single item.
        let worlds = self.worlds;
        Ok(match op {
            Op::Dispatch(mut d) => {
                d.grid = [worlds, 1];
                Op::Dispatch(d)
            }
            other => other,
        })
    }

    /// Records the fixed-count solve of A u = b (b and the diagonal in `Bd`, W_k in `Sf`)
    /// warm-started from `a`, with `s` its ping-pong partner; returns the buffer that
    /// holds the solution.
    pub(super) fn solve(&mut self, ops: &mut Vec<Op>, a: Buf, s: Buf) -> Result<Buf, GpuError> {
        if a == s {
            return Err(refuse(
                shaders::JACOBI_SWEEP.name,
                format!("the solve's unknown and its partner are both {a:?}"),
            ));
        }
        let n = self.n;
        let iters = self.solve.iterations;
        match self.solve.method {
            SolverMethod::Jacobi | SolverMethod::BlockJacobi | SolverMethod::Chebyshev => {
                let cheb = self.solve.method == SolverMethod::Chebyshev;
                let (mut cur, mut next) = (a, s);
                for k in 0..iters {
                    // Sweep k + 1 uses omega_{k+1}; omega_1 = 1 is the plain update.
                    let (mode, weight) = if cheb && k >= 1 {
                        (1, self.solve.weights[k as usize] as f32)
                    } else {
                        (0, 1.0)
                    };
                    // The sweep reads mode, weight and (a batch's weight table) the
                    // iteration: equal records are shared.
                    let record = self.record(Dispatch {
                        iter: if mode == 1 { k } else { 0 },
                        mode,
                        weight,
                        ..Default::default()
                    });
                    ops.push(self.dispatch(
                        shaders::JACOBI_SWEEP,
                        &[Buf::Sf, Buf::Adj, Buf::Bd, cur, next],
                        record,
                        n,
                    )?);
                    std::mem::swap(&mut cur, &mut next);
                }
                Ok(cur)
            }
            SolverMethod::Cg => {
                let m0 = self.mode(0);
                ops.push(self.dispatch(
                    shaders::CG_INIT,
                    &[Buf::Sf, Buf::Adj, Buf::Bd, a, Buf::R, Buf::P, Buf::Partials],
                    m0,
                    n,
                )?);
                ops.push(self.reduce(SLOT_RZ, 0)?);
                for k in 0..iters {
                    ops.push(self.dispatch(
                        shaders::CG_MATVEC,
                        &[Buf::Bd, Buf::Sf, Buf::Adj, Buf::P, Buf::Q, Buf::Partials],
                        m0,
                        n,
                    )?);
                    ops.push(self.reduce(SLOT_PQ, 0)?);
                    // The CG kernels use only the parity of the iteration.
                    let record = self.record(Dispatch {
                        iter: k % 2,
                        ..Default::default()
                    });
                    ops.push(self.dispatch(
                        shaders::CG_UPDATE,
                        &[
                            Buf::Bd,
                            Buf::P,
                            Buf::Q,
                            Buf::Scalars,
                            a,
                            Buf::R,
                            Buf::Partials,
                        ],
                        record,
                        n,
                    )?);
                    ops.push(self.reduce(SLOT_RZ + (k + 1) % 2, 0)?);
                    if k + 1 < iters {
                        ops.push(self.dispatch(
                            shaders::CG_DIRECTION,
                            &[Buf::Bd, Buf::R, Buf::Scalars, Buf::P],
                            record,
                            n,
                        )?);
                    }
                }
                Ok(a)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::adapter::test_device;
    use crate::gpu::limits::sizes;
    use crate::model::SystemDesc;
    use glam::DVec3;

    /// The launchers refuse what does not fit a kernel with a typed error naming it,
    /// before anything is recorded: a reduction slot past the scalars, a solve whose
    /// unknown is its own partner, a buffer this solver never created.
    #[test]
    fn launchers_refuse_mismatched_launches_with_typed_errors() {
        let Some((device, _queue)) = test_device() else {
            return;
        };
        let system = System::new(SystemDesc {
            positions: vec![DVec3::ZERO, DVec3::X],
            masses: vec![0.01; 2],
            charges: vec![0.0; 2],
            ..Default::default()
        })
        .unwrap();
        let config = Config::default();
        let dt = TimeStep::new(&config);
        let buffers =
            Buffers::create(&device, &system, &config, dt, &sizes(&system, &config), 1).unwrap();
        let mut engine = Engine::new(&device, Default::default());
        let mut p = Planner::new(&device, &mut engine, &buffers, &system, &config, dt);
        let binding = |r: Result<Op, GpuError>| match r {
            Err(GpuError::Binding { kernel, problem }) => format!("{kernel}: {problem}"),
            other => panic!("expected a binding error, got {other:?}"),
        };
        let m = binding(p.reduce(SCALAR_SLOTS, 0));
        assert!(m.starts_with("dot_reduce: slot 8 of 8"), "{m}");
        match p.solve(&mut Vec::new(), Buf::V, Buf::V) {
            Err(GpuError::Binding { problem, .. }) => assert!(problem.contains("both V")),
            other => panic!("expected a binding error, got {other:?}"),
        }
        let m0 = p.mode(0);
        let m = binding(p.dispatch(shaders::TANGENT_COPY, &[Buf::X, Buf::TanZ], m0, 2));
        assert!(
            m.starts_with("tangent_copy: buffer TanZ does not exist"),
            "{m}"
        );
        // A launch that fits is recorded.
        assert!(matches!(p.rhs(), Ok(Op::Dispatch(_))));
    }
}
