//! The linear-solver family, in `solvers/`: (block) Jacobi and Chebyshev sweeps
//! (`jacobi_sweep`), Jacobi-preconditioned CG (`cg_init`, `cg_matvec`, `cg_update`,
//! `cg_direction`) and the final residual (`residual`), all on A = M + sum_k W_k through
//! the one row product of `operator.wgsl`; and the launchers of a whole solve.

use crate::config::SolverMethod;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::{refuse, Recorder};
use crate::gpu::host::recording::Op;
use crate::gpu::layout::{Dispatch, SLOT_PQ, SLOT_RZ};
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

wgsl_enum! {
    /// A sweep of `jacobi_sweep`.
    pub enum SweepMode {
        /// u' = u + omega D^-1 (b - A u).
        Plain = "SWEEP_PLAIN" = 0,
        /// Chebyshev's weighted update of the plain sweep (iterations >= 2).
        Chebyshev = "SWEEP_CHEBYSHEV" = 1,
    }
}

/// The libraries of a kernel that multiplies by A.
const PRODUCT: &[Library] = &[
    Library::Layout,
    Library::World,
    Library::Reduce,
    Library::Adjacency,
    Library::Blocks,
    Library::Operator,
];

pub const JACOBI_SWEEP: Kernel = Kernel {
    name: "jacobi_sweep",
    body: include_str!("solvers/jacobi_sweep.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
        Library::Operator,
    ],
    storage: &[Read, Read, Read, Read, ReadWrite],
    constants: SweepMode::WGSL,
    cpu_targets: None,
};

pub const RESIDUAL: Kernel = Kernel {
    name: "residual",
    body: include_str!("solvers/residual.wgsl"),
    libs: PRODUCT,
    storage: &[Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const CG_INIT: Kernel = Kernel {
    name: "cg_init",
    body: include_str!("solvers/cg_init.wgsl"),
    libs: PRODUCT,
    storage: &[Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const CG_MATVEC: Kernel = Kernel {
    name: "cg_matvec",
    body: include_str!("solvers/cg_matvec.wgsl"),
    libs: PRODUCT,
    storage: &[Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const CG_UPDATE: Kernel = Kernel {
    name: "cg_update",
    body: include_str!("solvers/cg_update.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Reduce,
        Library::Blocks,
    ],
    storage: &[Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const CG_DIRECTION: Kernel = Kernel {
    name: "cg_direction",
    body: include_str!("solvers/cg_direction.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Blocks],
    storage: &[Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[
    JACOBI_SWEEP,
    RESIDUAL,
    CG_INIT,
    CG_MATVEC,
    CG_UPDATE,
    CG_DIRECTION,
];

impl Recorder<'_> {
    /// Partial sums of |b - A u|^2 and |b|^2 over the free rows, for the solve of
    /// unknown `u` (b and the diagonal in `RhsDiagonal`, W_k in `SpringBlocks`).
    pub(in crate::gpu) fn residual(&mut self, u: Buf) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            RESIDUAL,
            &[
                Buf::SpringBlocks,
                Buf::Adj,
                Buf::RhsDiagonal,
                u,
                Buf::Partials,
            ],
            m0,
            n,
        )
    }

    /// Records the fixed-count solve of A u = b (b and the diagonal in `RhsDiagonal`, W_k
    /// in `SpringBlocks`) warm-started from `a`, with `s` its ping-pong partner; returns
    /// the buffer that holds the solution.
    pub(in crate::gpu) fn solve(
        &mut self,
        ops: &mut Vec<Op>,
        a: Buf,
        s: Buf,
    ) -> Result<Buf, GpuError> {
        if a == s {
            return Err(refuse(
                JACOBI_SWEEP.name,
                format!("the solve's unknown and its partner are both {a:?}"),
            ));
        }
        match self.solve.method {
            SolverMethod::Jacobi | SolverMethod::BlockJacobi | SolverMethod::Chebyshev => {
                self.sweeps(ops, a, s)
            }
            SolverMethod::Cg => {
                self.cg(ops, a)?;
                Ok(a)
            }
        }
    }

    /// The (block) Jacobi or Chebyshev sweeps from `a`, ping-ponging with `s`.
    fn sweeps(&mut self, ops: &mut Vec<Op>, a: Buf, s: Buf) -> Result<Buf, GpuError> {
        let n = self.n;
        let cheb = self.solve.method == SolverMethod::Chebyshev;
        let (mut cur, mut next) = (a, s);
        for k in 0..self.solve.iterations {
            // Sweep k + 1 uses omega_{k+1}; omega_1 = 1 is the plain update.
            let (mode, weight) = if cheb && k >= 1 {
                (SweepMode::Chebyshev, self.solve.weights[k as usize] as f32)
            } else {
                (SweepMode::Plain, 1.0)
            };
            // The sweep reads mode, weight and (a batch's weight table) the iteration:
            // equal records are shared.
            let record = self.record(Dispatch {
                iter: if mode == SweepMode::Chebyshev { k } else { 0 },
                mode: mode.bits(),
                weight,
                ..Default::default()
            });
            ops.push(self.dispatch(
                JACOBI_SWEEP,
                &[Buf::SpringBlocks, Buf::Adj, Buf::RhsDiagonal, cur, next],
                record,
                n,
            )?);
            std::mem::swap(&mut cur, &mut next);
        }
        Ok(cur)
    }

    /// Jacobi-preconditioned CG on the unknown `a` (r, p, q in their own buffers).
    fn cg(&mut self, ops: &mut Vec<Op>, a: Buf) -> Result<(), GpuError> {
        let n = self.n;
        let iters = self.solve.iterations;
        let m0 = self.mode(0);
        ops.push(self.dispatch(
            CG_INIT,
            &[
                Buf::SpringBlocks,
                Buf::Adj,
                Buf::RhsDiagonal,
                a,
                Buf::R,
                Buf::P,
                Buf::Partials,
            ],
            m0,
            n,
        )?);
        ops.push(self.reduce(SLOT_RZ, 0)?);
        for k in 0..iters {
            ops.push(self.dispatch(
                CG_MATVEC,
                &[
                    Buf::RhsDiagonal,
                    Buf::SpringBlocks,
                    Buf::Adj,
                    Buf::P,
                    Buf::Q,
                    Buf::Partials,
                ],
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
                CG_UPDATE,
                &[
                    Buf::RhsDiagonal,
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
                    CG_DIRECTION,
                    &[Buf::RhsDiagonal, Buf::R, Buf::Scalars, Buf::P],
                    record,
                    n,
                )?);
            }
        }
        Ok(())
    }
}
