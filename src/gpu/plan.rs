//! The step program: pipelines, bind groups and the fixed list of dispatches one step
//! replays (per-dispatch values in deduplicated `Dispatch` records chosen by dynamic
//! uniform offset), for every integrator and solver.

use super::buffers::Buf;
use super::ddef::DDEF_MARK;
use super::layout::{Dispatch, SLOT_ENERGY, SLOT_PQ, SLOT_RESIDUAL, SLOT_RZ};
use super::limits::grid;
use super::shaders::{self, Kernel};
use super::solver::GpuSolver;
use super::GpuError;
use crate::config::{Config, CoulombMethod, Integrator, SolverMethod};
// The same weights as the reference, so both backends run the same iteration.
use crate::cpu::solvers::chebyshev_weights;
use crate::model::System;
use wgpu::util::DeviceExt;

/// One recorded dispatch.
#[derive(Clone, Copy, Debug)]
pub(super) struct Op {
    pub(super) pipeline: usize,
    pub(super) group: usize,
    /// Byte offset of its `Dispatch` record.
    pub(super) record: u32,
    pub(super) grid: [u32; 2],
}

pub(super) struct Pipeline {
    pub(super) kernel: Kernel,
    pub(super) pipeline: wgpu::ComputePipeline,
    pub(super) layout: wgpu::BindGroupLayout,
}

/// Chebyshev's spectral radius: the config's, or the CPU reference's power-iteration
/// estimate on the initial operator (IMEX: A at x_0; local-global: P), so both backends
/// use the same weights.
pub(super) fn chebyshev_rho(system: &System, config: &Config) -> f64 {
    use crate::cpu::solvers::{estimate_block_jacobi_rho, BlockLaplacian, RHO_ESTIMATE_ITERATIONS};
    config.solver.rho.unwrap_or_else(|| {
        let op = match config.integrator {
            Integrator::LocalGlobal => BlockLaplacian::local_global(system, config.dt),
            _ => BlockLaplacian::imex(system, system.positions(), config.dt),
        };
        estimate_block_jacobi_rho(&op, config.solver.omega, RHO_ESTIMATE_ITERATIONS)
    })
}

impl GpuSolver {
    /// Workgroup grid of a 1D dispatch over `count` items (2D past 65535 workgroups).
    pub(super) fn grid(&self, count: u32) -> [u32; 2] {
        grid(
            count,
            self.device.limits().max_compute_workgroups_per_dimension,
        )
    }

    pub(super) fn pipeline(&mut self, k: Kernel) -> usize {
        if let Some(&i) = self.pipeline_index.get(k.name) {
            return i;
        }
        let (pipeline, layout) =
            shaders::kernel_pipeline(&self.device, k, Some(&self.dispatch_layout));
        self.pipelines.push(Pipeline {
            kernel: k,
            pipeline,
            layout,
        });
        let i = self.pipelines.len() - 1;
        self.pipeline_index.insert(k.name, i);
        i
    }

    pub(super) fn bind_group(&mut self, pipeline: usize, bufs: &[Buf]) -> usize {
        let name = self.pipelines[pipeline].kernel.name;
        let key = (name, bufs.to_vec());
        if let Some(&g) = self.group_index.get(&key) {
            return g;
        }
        let params = self
            .params
            .as_ref()
            .expect("params are created before the plan");
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: params.as_entire_binding(),
        }];
        for (i, b) in bufs.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: self.buffers[*b as usize].as_entire_binding(),
            });
        }
        let label = format!("{name} {bufs:?}");
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&label),
            layout: &self.pipelines[pipeline].layout,
            entries: &entries,
        });
        self.groups.push(group);
        let g = self.groups.len() - 1;
        self.group_index.insert(key, g);
        g
    }

    /// Byte offset of a dispatch record (deduplicated).
    pub(super) fn rec(&mut self, d: Dispatch) -> u32 {
        let key: [u32; 8] = bytemuck::cast(d);
        let records = &mut self.records;
        let i = *self.record_index.entry(key).or_insert_with(|| {
            records.push(d);
            records.len() - 1
        });
        i as u32 * self.record_stride
    }

    pub(super) fn mode(&mut self, mode: u32) -> u32 {
        self.rec(Dispatch {
            mode,
            ..Default::default()
        })
    }

    pub(super) fn op(&mut self, k: Kernel, bufs: &[Buf], record: u32, count: u32) -> Op {
        debug_assert_eq!(bufs.len(), k.storage.len(), "{}", k.name);
        let pipeline = self.pipeline(k);
        let group = self.bind_group(pipeline, bufs);
        Op {
            pipeline,
            group,
            record,
            grid: self.grid(count),
        }
    }

    /// Second reduction stage: block `block` of the partial sums into scalar `slot`.
    pub(super) fn reduce(&mut self, slot: u32, block: u32) -> Op {
        let record = self.rec(Dispatch {
            slot,
            block,
            ..Default::default()
        });
        let mut op = self.op(
            shaders::DOT_REDUCE,
            &[Buf::Partials, Buf::Scalars],
            record,
            1,
        );
        op.grid = [1, 1];
        op
    }

    /// All non-spring forces at t (mode 0) or t + h (mode 1): external and gravity per
    /// particle, then the compacted charges and the tiled Coulomb sum over them (with
    /// DDEF, unless `exact`: a placeholder where the DDEF kernels run, see `gpu::ddef`).
    pub(super) fn field_ops(&mut self, ops: &mut Vec<Op>, nc: u32, mode: u32, exact: bool) {
        let record = self.mode(mode);
        let op = self.op(
            shaders::EXTERNAL_FORCES,
            &[Buf::X, Buf::Props, Buf::Clock, Buf::Force],
            record,
            self.n,
        );
        ops.push(op);
        if nc > 0 {
            let m0 = self.mode(0);
            let op = self.op(
                shaders::COULOMB_SOURCES,
                &[Buf::X, Buf::Props, Buf::Charged, Buf::Sources],
                m0,
                nc,
            );
            ops.push(op);
            if self.ddef.is_some() && !exact {
                // Mode 1 (Verlet's force at x'): the positions moved since the step began.
                ops.push(Op {
                    pipeline: DDEF_MARK,
                    group: mode as usize,
                    record: 0,
                    grid: [0, 0],
                });
                return;
            }
            let op = self.op(
                shaders::COULOMB_TILED,
                &[Buf::Sources, Buf::Charged, Buf::Force],
                m0,
                nc,
            );
            ops.push(op);
        }
    }

    pub(super) fn spring_op(&mut self, ops: &mut Vec<Op>, ns: u32, mode: u32) {
        if ns > 0 {
            let record = self.mode(mode);
            let op = self.op(
                shaders::SPRING_ASSEMBLE,
                &[Buf::X, Buf::V, Buf::Springs, Buf::SParams, Buf::Sf],
                record,
                ns,
            );
            ops.push(op);
        }
    }

    /// Records a fixed-count solve of A u = b (b and the diagonal in `Bd`, W_k in `Sf`)
    /// warm-started from `a`; returns the buffer holding the solution.
    pub(super) fn plan_solve(
        &mut self,
        ops: &mut Vec<Op>,
        config: &Config,
        rho: f64,
        a: Buf,
        s: Buf,
    ) -> Buf {
        let n = self.n;
        let iters = config.solver.iterations;
        match config.solver.method {
            SolverMethod::Jacobi | SolverMethod::BlockJacobi | SolverMethod::Chebyshev => {
                let cheb = config.solver.method == SolverMethod::Chebyshev;
                let weights = if cheb {
                    chebyshev_weights(rho, iters as usize)
                } else {
                    Vec::new()
                };
                let (mut cur, mut next) = (a, s);
                for k in 0..iters {
                    // Sweep k + 1 uses omega_{k+1}; omega_1 = 1 is the plain update.
                    let (mode, weight) = if cheb && k >= 1 {
                        (1, weights[k as usize] as f32)
                    } else {
                        (0, 1.0)
                    };
                    // The sweep reads only mode and weight: equal records are shared.
                    let record = self.rec(Dispatch {
                        mode,
                        weight,
                        ..Default::default()
                    });
                    let op = self.op(
                        shaders::JACOBI_SWEEP,
                        &[Buf::Props, Buf::Sf, Buf::Adj, Buf::Bd, cur, next],
                        record,
                        n,
                    );
                    ops.push(op);
                    std::mem::swap(&mut cur, &mut next);
                }
                cur
            }
            SolverMethod::Cg => {
                let m0 = self.mode(0);
                let op = self.op(
                    shaders::CG_INIT,
                    &[
                        Buf::Props,
                        Buf::Sf,
                        Buf::Adj,
                        Buf::Bd,
                        a,
                        Buf::R,
                        Buf::P,
                        Buf::Partials,
                    ],
                    m0,
                    n,
                );
                ops.push(op);
                ops.push(self.reduce(SLOT_RZ, 0));
                for k in 0..iters {
                    let op = self.op(
                        shaders::CG_MATVEC,
                        &[Buf::Props, Buf::Sf, Buf::Adj, Buf::P, Buf::Q, Buf::Partials],
                        m0,
                        n,
                    );
                    ops.push(op);
                    ops.push(self.reduce(SLOT_PQ, 0));
                    // The CG kernels use only the parity of the iteration.
                    let record = self.rec(Dispatch {
                        iter: k % 2,
                        ..Default::default()
                    });
                    let op = self.op(
                        shaders::CG_UPDATE,
                        &[
                            Buf::Props,
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
                    );
                    ops.push(op);
                    ops.push(self.reduce(SLOT_RZ + (k + 1) % 2, 0));
                    if k + 1 < iters {
                        let op = self.op(
                            shaders::CG_DIRECTION,
                            &[Buf::Props, Buf::Bd, Buf::R, Buf::Scalars, Buf::P],
                            record,
                            n,
                        );
                        ops.push(op);
                    }
                }
                a
            }
        }
    }

    /// Builds the dispatch lists of a step, of the energies and of the residual.
    pub(super) fn plan(
        &mut self,
        system: &System,
        config: &Config,
        rho: f64,
    ) -> Result<(), GpuError> {
        let n = self.n;
        let ns = system.springs().len() as u32;
        let nc = if matches!(
            config.coulomb.method,
            CoulombMethod::AllPairs | CoulombMethod::Ddef(_)
        ) {
            system.charged_count() as u32
        } else {
            0
        };
        let m0 = self.mode(0);
        let mut ops = Vec::new();
        match config.integrator {
            Integrator::Imex => {
                self.spring_op(&mut ops, ns, 0);
                self.field_ops(&mut ops, nc, 0, false);
                let op = self.op(
                    shaders::RHS,
                    &[Buf::V, Buf::Props, Buf::Force, Buf::Sf, Buf::Adj, Buf::Bd],
                    m0,
                    n,
                );
                ops.push(op);
                let result = self.plan_solve(&mut ops, config, rho, Buf::V, Buf::S);
                let record = self.mode(if result == Buf::V { 0 } else { 1 });
                let op = self.op(
                    shaders::INTEGRATE,
                    &[Buf::X, Buf::V, Buf::S, Buf::Xt, Buf::Props, Buf::Clock],
                    record,
                    n,
                );
                ops.push(op);
            }
            Integrator::LocalGlobal => {
                self.field_ops(&mut ops, nc, 0, false);
                let op = self.op(
                    shaders::LG_PREPARE,
                    &[Buf::X, Buf::V, Buf::Props, Buf::Force, Buf::Xt, Buf::B0],
                    m0,
                    n,
                );
                ops.push(op);
                let mut cur = Buf::X;
                for _ in 0..config.local_global_iterations {
                    let op = self.op(
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
                    );
                    ops.push(op);
                    let other = if cur == Buf::X { Buf::S } else { Buf::X };
                    cur = self.plan_solve(&mut ops, config, rho, cur, other);
                }
                let record = self.mode(if cur == Buf::X { 2 } else { 3 });
                let op = self.op(
                    shaders::INTEGRATE,
                    &[Buf::X, Buf::V, Buf::S, Buf::Xt, Buf::Props, Buf::Clock],
                    record,
                    n,
                );
                ops.push(op);
            }
            Integrator::SymplecticEuler | Integrator::Verlet => {
                let verlet = config.integrator == Integrator::Verlet;
                let explicit = [
                    Buf::X,
                    Buf::V,
                    Buf::Props,
                    Buf::Force,
                    Buf::Sf,
                    Buf::Adj,
                    Buf::Clock,
                ];
                self.spring_op(&mut ops, ns, 1);
                if verlet {
                    // a(x_t, t) is the previous step's a' (the CPU reference reuses it
                    // too): its field part runs as a prologue only when not current.
                    let mut prologue = Vec::new();
                    self.field_ops(&mut prologue, nc, 0, false);
                    self.prologue_ops = prologue;
                } else {
                    self.field_ops(&mut ops, nc, 0, false);
                }
                let record = self.mode(if verlet { 1 } else { 0 });
                ops.push(self.op(shaders::EXPLICIT_STEP, &explicit, record, n));
                if verlet {
                    // a' = f(x', v_half, t + h) / m
                    self.spring_op(&mut ops, ns, 1);
                    self.field_ops(&mut ops, nc, 1, false);
                    let record = self.mode(2);
                    ops.push(self.op(shaders::EXPLICIT_STEP, &explicit, record, n));
                }
            }
        }
        self.step_ops = ops;

        let mut ops = Vec::new();
        // The Coulomb energy stays exact all-pairs, as in the CPU reference.
        self.field_ops(&mut ops, nc, 0, true);
        let op = self.op(
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
        );
        ops.push(op);
        ops.push(self.reduce(SLOT_ENERGY, 0));
        ops.push(self.reduce(SLOT_ENERGY + 1, 1));
        self.energy_ops = ops;

        let mut ops = Vec::new();
        self.spring_op(&mut ops, ns, 1);
        self.spring_ops = ops;
        let mut ops = Vec::new();
        self.field_ops(&mut ops, nc, 0, false);
        self.field_ops = ops;

        if config.integrator.is_implicit() {
            let unknown = if config.integrator == Integrator::Imex {
                Buf::V
            } else {
                Buf::X
            };
            let op = self.op(
                shaders::RESIDUAL,
                &[
                    Buf::Props,
                    Buf::Sf,
                    Buf::Adj,
                    Buf::Bd,
                    unknown,
                    Buf::Partials,
                ],
                m0,
                n,
            );
            self.residual_ops = vec![op, self.reduce(SLOT_RESIDUAL, 0)];
        }
        Ok(())
    }

    pub(super) fn create_dispatch_records(&mut self) {
        let stride = self.record_stride as usize;
        let mut bytes = vec![0u8; stride * self.records.len().max(1)];
        for (i, r) in self.records.iter().enumerate() {
            bytes[i * stride..i * stride + std::mem::size_of::<Dispatch>()]
                .copy_from_slice(bytemuck::bytes_of(r));
        }
        let buffer = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("msc dispatch records"),
                contents: &bytes,
                usage: wgpu::BufferUsages::UNIFORM,
            });
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("msc dispatch records"),
            layout: &self.dispatch_layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &buffer,
                    offset: 0,
                    size: wgpu::BufferSize::new(std::mem::size_of::<Dispatch>() as u64),
                }),
            }],
        });
        self.dispatch_group = Some(group);
    }

    pub(super) fn replay(&self, pass: &mut wgpu::ComputePass<'_>, ops: &[Op]) {
        let records = self
            .dispatch_group
            .as_ref()
            .expect("dispatch records exist once built");
        let mut current = usize::MAX;
        for op in ops {
            if op.pipeline == DDEF_MARK {
                if let Some(d) = &self.ddef {
                    d.record(pass);
                }
                current = usize::MAX;
                continue;
            }
            if op.pipeline != current {
                pass.set_pipeline(&self.pipelines[op.pipeline].pipeline);
                current = op.pipeline;
            }
            pass.set_bind_group(0, &self.groups[op.group], &[]);
            pass.set_bind_group(1, records, &[op.record]);
            pass.dispatch_workgroups(op.grid[0], op.grid[1], 1);
        }
    }
}
