//! Reverse mode on the GPU ([`GpuAdjoint`]): a [`GpuSolver`] whose buffers also hold the
//! adjoint state (the reversed step is recorded by `solver::adjoint`), and the
//! primitives a checkpointing plan (`grad::checkpoint`) is carried out with: keep or
//! restore a state, run steps forward (keeping their starts), seed a target frame's loss
//! cotangent, reverse the latest kept step. The driver over parameter sets is
//! `grad::gpu_adjoint`.
//!
//! A kept state is (x, v, clock) in a buffer of its own, copied on the device; reversing
//! step t copies v_{t+1} aside and step t's start back into (x, v, clock), then replays
//! the reversed step (Verlet and local-global, which recompute the step past its start:
//! then copy the recomputed v aside, restore the start again and replay the rest).
//! Verlet's step reads the field forces the last step left: after a restore or a reversal
//! the next run forward first replays its prologue.
//!
//! Nothing is read back or waited for inside a sweep but the throttle that keeps at most
//! two submissions in flight; the cotangent accumulators and the loss shares are read
//! once, at the end ([`GpuAdjoint::read`]). What differs from the CPU adjoint: f32, and
//! the adjoint solves run the scene's solver for its fixed iteration count (or CG for
//! `cg_iterations`), as the GPU tangents do: the two agree to f32 roundoff when that
//! solve converges.

use glam::DVec3;
use std::sync::atomic::Ordering;

use super::adjoint::{check, AdjointProgram, AdjointSetup};
use super::gpu_solver::GpuSolver;
use crate::config::Config;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::params::vec4;
use crate::model::{State, System, COULOMB_K};

/// The cotangents read back after a sweep (f32 accumulated, f64 here).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdjointRead {
    /// Per spring dL/dk (empty unless asked for).
    pub stiffnesses: Vec<f64>,
    /// Per particle dL/dm.
    pub masses: Vec<f64>,
    /// Per particle dL/dq.
    pub charges: Vec<f64>,
    /// Per external charge dL/dq_e and dL/dx_e(0).
    pub external_charges: Vec<f64>,
    pub external_positions: Vec<DVec3>,
    /// Per target frame its share of the loss.
    pub losses: Vec<f64>,
}

/// The GPU solver of one system with the adjoint (see the module documentation).
pub struct GpuAdjoint {
    solver: GpuSolver,
    /// Snapshot slots and the step each holds.
    slots: Vec<Option<wgpu::Buffer>>,
    slot_steps: Vec<u64>,
    /// Kept step starts (a stack: `kept` of them in use) and their step numbers.
    kept_buffers: Vec<wgpu::Buffer>,
    kept: Vec<u64>,
    /// Work recorded but not submitted yet.
    pending: Option<wgpu::CommandEncoder>,
    /// The last submission (at most two in flight).
    in_flight: Option<wgpu::SubmissionIndex>,
    /// Steps replayed into `pending`.
    pending_ops: usize,
}

/// Bytes of one kept state of `n` particles: x, v and the clock.
pub fn adjoint_state_bytes(n: usize) -> u64 {
    32 * n as u64 + 16
}

/// Dispatches recorded per submission before the throttle (as `GpuSolver::advance`).
const OPS_PER_SUBMIT: usize = 8192;

impl GpuAdjoint {
    /// Builds the solver with the adjoint on an adapter it picks (see
    /// [`GpuSolver::headless`]).
    pub fn headless(
        system: &System,
        config: &Config,
        setup: &AdjointSetup,
        options: &crate::gpu::device::adapter::HeadlessOptions,
    ) -> Result<Self, GpuError> {
        check(config, setup)?;
        let solver = GpuSolver::headless_with_adjoint(system, config, setup, options)?;
        Ok(Self::around(solver))
    }

    /// As [`Self::headless`] on the caller's device and queue.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        setup: &AdjointSetup,
    ) -> Result<Self, GpuError> {
        check(config, setup)?;
        let solver = GpuSolver::with_adjoint(device, queue, system, config, setup)?;
        Ok(Self::around(solver))
    }

    fn around(solver: GpuSolver) -> Self {
        Self {
            solver,
            slots: Vec::new(),
            slot_steps: Vec::new(),
            kept_buffers: Vec::new(),
            kept: Vec::new(),
            pending: None,
            in_flight: None,
            pending_ops: 0,
        }
    }

    /// The forward solver (device, queue, adapter).
    pub fn solver(&self) -> &GpuSolver {
        &self.solver
    }

    fn program(&self) -> &AdjointProgram {
        self.solver
            .adjoint
            .as_ref()
            .expect("a GpuAdjoint's solver records the adjoint")
    }

    fn state_buffer(&self, label: &str) -> wgpu::Buffer {
        self.solver
            .host
            .device
            .create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: adjoint_state_bytes(self.solver.n as usize),
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
    }

    fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        let host = &self.solver.host;
        self.pending
            .get_or_insert_with(|| host.encoder("msc adjoint"))
    }

    /// Submits the pending work, keeping at most two submissions in flight.
    fn flush(&mut self) -> Result<(), GpuError> {
        if let Some(encoder) = self.pending.take() {
            let index = self.solver.host.submit(encoder);
            if let Some(previous) = self.in_flight.replace(index) {
                self.solver.host.wait(previous)?;
            }
            self.pending_ops = 0;
        }
        Ok(())
    }

    fn throttle(&mut self, ops: usize) -> Result<(), GpuError> {
        self.pending_ops += ops;
        if self.pending_ops >= OPS_PER_SUBMIT {
            self.flush()?;
        }
        Ok(())
    }

    /// Copies (x, v, clock) into `dst`, or from `src` back.
    fn copy_state(&mut self, to: Option<&wgpu::Buffer>, from: Option<&wgpu::Buffer>) {
        let n = 16 * u64::from(self.solver.n);
        let x = self.solver.buffers.get(Buf::X).expect("x").clone();
        let v = self.solver.buffers.get(Buf::V).expect("v").clone();
        let clock = self.solver.buffers.get(Buf::Clock).expect("clock").clone();
        let e = self.encoder();
        match (to, from) {
            (Some(dst), _) => {
                e.copy_buffer_to_buffer(&x, 0, dst, 0, n);
                e.copy_buffer_to_buffer(&v, 0, dst, n, n);
                e.copy_buffer_to_buffer(&clock, 0, dst, 2 * n, 16);
            }
            (None, Some(src)) => {
                e.copy_buffer_to_buffer(src, 0, &x, 0, n);
                e.copy_buffer_to_buffer(src, n, &v, 0, n);
                e.copy_buffer_to_buffer(src, 2 * n, &clock, 0, 16);
            }
            (None, None) => {}
        }
    }

    /// Keeps the current state in snapshot `slot`: one saved before, or the next new one
    /// (slots are numbered from 0 in order, so a slot index cannot allocate past them).
    pub fn save(&mut self, slot: usize) -> Result<(), GpuError> {
        if slot > self.slots.len() {
            return Err(GpuError::Unsupported(format!(
                "snapshot slot {slot}: new slots are numbered in order, the next is {}",
                self.slots.len()
            )));
        }
        if self.slots.len() == slot {
            self.slots.push(None);
            self.slot_steps.push(0);
        }
        if self.slots[slot].is_none() {
            self.slots[slot] = Some(self.state_buffer("msc adjoint snapshot"));
        }
        let b = self.slots[slot].take().expect("just made");
        self.copy_state(Some(&b), None);
        self.slots[slot] = Some(b);
        self.slot_steps[slot] = self.solver.steps_done;
        Ok(())
    }

    /// Makes snapshot `slot` the current state.
    pub fn restore(&mut self, slot: usize) -> Result<(), GpuError> {
        let b = self
            .slots
            .get_mut(slot)
            .and_then(Option::take)
            .ok_or_else(|| GpuError::Unsupported(format!("snapshot {slot} was never kept")))?;
        self.copy_state(None, Some(&b));
        self.slots[slot] = Some(b);
        self.solver.steps_done = self.slot_steps[slot];
        self.solver.field_fresh.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Room for `n` more kept step starts, made before any step runs (a huge `n` grew the
    /// table step by step until an allocation failed and aborted the process): the host
    /// table (a step number and a buffer per kept step) against the memory available,
    /// reserved fallibly, then the state buffers the stack lacks, in an error scope.
    fn reserve_kept(&mut self, n: u64) -> Result<(), GpuError> {
        let depth = self.kept.len();
        let rows = depth as u128 + u128::from(n);
        let row = (std::mem::size_of::<u64>() + std::mem::size_of::<wgpu::Buffer>()) as u128;
        let needed = rows * row;
        // MemAvailable, capped at the largest allocation (also where it is unknown).
        let limit = crate::scene::available_memory()
            .map_or(isize::MAX as u64, |a| a.min(isize::MAX as u64));
        let what =
            format!("keeping the starts of {n} more steps ({depth} kept): the table of kept steps");
        let short = |available| GpuError::HostMemory {
            what: what.clone(),
            needed: u64::try_from(needed).unwrap_or(u64::MAX),
            available,
        };
        if needed > u128::from(limit) {
            return Err(short(Some(limit)));
        }
        // Both fit: needed <= isize::MAX.
        let (n, rows) = (n as usize, rows as usize);
        let new = rows.saturating_sub(self.kept_buffers.len());
        self.kept
            .try_reserve(n)
            .and_then(|()| self.kept_buffers.try_reserve(new))
            .map_err(|_| short(None))?;
        let buffers = crate::gpu::device::scoped(&self.solver.host.device, || {
            Ok((0..new)
                .map(|_| self.state_buffer("msc adjoint kept step"))
                .collect::<Vec<_>>())
        })?;
        self.kept_buffers.extend(buffers);
        Ok(())
    }

    /// Runs `n` steps forward; with `keep`, each step's start is kept for its reversal
    /// (the room for them is checked and made first: see `reserve_kept`).
    pub fn advance(&mut self, n: u64, keep: bool) -> Result<(), GpuError> {
        if keep {
            self.reserve_kept(n)?;
        }
        let per_step = self.solver.program.step.len();
        // Verlet: the field forces at the current state, when a restore or a reversal
        // left them stale (the forward step reads the last step's).
        if n > 0 && !self.solver.field_fresh.swap(true, Ordering::Relaxed) {
            let solver = &self.solver;
            let e = self
                .pending
                .get_or_insert_with(|| solver.host.encoder("msc adjoint"));
            solver.host.pass(e, "msc adjoint prologue", None, |pass| {
                solver.engine.replay(pass, &solver.program.prologue)
            });
        }
        for _ in 0..n {
            if keep {
                // `reserve_kept` made the buffer.
                let b = self.kept_buffers[self.kept.len()].clone();
                self.copy_state(Some(&b), None);
                self.kept.push(self.solver.steps_done);
            }
            let solver = &self.solver;
            let e = self
                .pending
                .get_or_insert_with(|| solver.host.encoder("msc adjoint"));
            solver.host.pass(e, "msc adjoint forward", None, |pass| {
                solver.engine.replay(pass, &solver.program.step)
            });
            self.solver.steps_done += 1;
            self.throttle(per_step)?;
        }
        Ok(())
    }

    /// Seeds target frame `frame` (positions `target`) at the current state: its loss
    /// share and lx += 2 (x - xhat) / (F n).
    pub fn seed(&mut self, frame: usize, target: &[DVec3]) -> Result<(), GpuError> {
        let n = self.solver.n as usize;
        if target.len() != n {
            return Err(GpuError::Unsupported(format!(
                "target frame {frame} has {} positions, the system {n}",
                target.len()
            )));
        }
        if let Some(i) = target.iter().position(|p| !p.is_finite()) {
            // f32 would carry it into a NaN loss and gradient.
            return Err(GpuError::Unsupported(format!(
                "target frame {frame}: particle {i} has a non-finite position"
            )));
        }
        let data = target
            .iter()
            .enumerate()
            .map(|(i, p)| vec4(*p, 0.0, "target position of particle", i))
            .collect::<Result<Vec<_>, _>>()?;
        // Earlier seeds read the previous target: submit them before it is overwritten.
        self.flush()?;
        let buffer = self.solver.buffers.get(Buf::AdjTarget)?;
        self.solver
            .host
            .queue
            .write_buffer(buffer, 0, bytemuck::cast_slice(&data));
        let op = *self.program().seeds.get(frame).ok_or_else(|| {
            GpuError::Unsupported(format!("frame {frame} past the adjoint's frames"))
        })?;
        let solver = &self.solver;
        let e = self
            .pending
            .get_or_insert_with(|| solver.host.encoder("msc adjoint"));
        solver.host.pass(e, "msc adjoint seed", None, |pass| {
            solver.engine.replay(pass, &[op])
        });
        Ok(())
    }

    /// States this adjoint keeps buffers for: its snapshot slots and its record stack at
    /// its deepest (allocated once, then reused). The state after a reversed step stays
    /// in the solver's own buffers, so a plan's count (`grad::checkpoint`) is one more.
    pub fn kept_states(&self) -> u64 {
        (self.slots.iter().flatten().count() + self.kept_buffers.len()) as u64
    }

    /// The step number of the latest kept step start (None: none kept).
    pub fn latest_kept(&self) -> Option<u64> {
        self.kept.last().copied()
    }

    /// Reverses the latest kept step: the adjoint state goes from the state after it (the
    /// current one) to its start, which becomes the current state.
    pub fn reverse(&mut self) -> Result<(), GpuError> {
        let Some(step) = self.kept.pop() else {
            return Err(GpuError::Unsupported("no kept step to reverse".into()));
        };
        let depth = self.kept.len();
        let n = 16 * u64::from(self.solver.n);
        let v = self.solver.buffers.get(Buf::V)?.clone();
        let v1 = self.solver.buffers.get(Buf::AdjV1)?.clone();
        self.encoder().copy_buffer_to_buffer(&v, 0, &v1, 0, n);
        let b = self.kept_buffers[depth].clone();
        self.copy_state(None, Some(&b));
        let solver = &self.solver;
        let program = solver.adjoint.as_ref().expect("adjoint");
        let e = self
            .pending
            .get_or_insert_with(|| solver.host.encoder("msc adjoint"));
        solver.host.pass(e, "msc adjoint reverse", None, |pass| {
            solver.engine.replay(pass, &program.reverse)
        });
        let ops = program.reverse.len() + program.restart.len();
        if !program.restart.is_empty() {
            // The step's start again, its recomputed end velocity kept (Verlet: v_half).
            self.encoder().copy_buffer_to_buffer(&v, 0, &v1, 0, n);
            self.copy_state(None, Some(&b));
            let solver = &self.solver;
            let program = solver.adjoint.as_ref().expect("adjoint");
            let e = self
                .pending
                .get_or_insert_with(|| solver.host.encoder("msc adjoint"));
            solver.host.pass(e, "msc adjoint restart", None, |pass| {
                solver.engine.replay(pass, &program.restart)
            });
        }
        self.solver.field_fresh.store(false, Ordering::Relaxed);
        self.solver.steps_done = step;
        self.throttle(ops)
    }

    /// The current state (a readback, for tests).
    pub fn state(&mut self) -> Result<State, GpuError> {
        self.flush()?;
        self.solver.read_state()
    }

    /// Reads the accumulated cotangents and the frames' loss shares (one submission; with
    /// DDEF a loop-budget flag is a [`GpuError::LimitExceeded`]).
    pub fn read(&mut self) -> Result<AdjointRead, GpuError> {
        self.flush()?;
        let program = self.program();
        let setup = program.setup;
        let (n, ns, ne) = (
            u64::from(self.solver.n),
            u64::from(self.solver.spring_count),
            program.externals as u64,
        );
        let frames = setup.frames as u64;
        let n_wg = u64::from(program.n_wg);
        let copies = [
            (Buf::AdjKbar, 0, 4 * ns.max(1)),
            (Buf::AdjParticle, 0, 16 * n),
            (Buf::AdjExternal, 0, 16 * n * ne.max(1)),
            (Buf::AdjLoss, 0, 16 * n_wg * frames),
        ];
        // With DDEF the world records come back too: a loop-budget flag raised by any
        // evaluation of the sweep (forward, recomputed or reversed) is an error.
        let bytes = self.solver.run_and_read_checked(&[], &copies)?;
        let (kbar, rest) = bytes.split_at(4 * ns.max(1) as usize);
        let (part, rest) = rest.split_at(16 * n as usize);
        let (ext, loss) = rest.split_at((16 * n * ne.max(1)) as usize);
        let kbar: &[f32] = bytemuck::cast_slice(kbar);
        let part: &[[f32; 4]] = bytemuck::cast_slice(part);
        let ext: &[[f32; 4]] = bytemuck::cast_slice(ext);
        let loss: &[[f32; 4]] = bytemuck::cast_slice(loss);
        let sqrt_k = COULOMB_K.sqrt();
        let mut out = AdjointRead::default();
        if setup.stiffnesses {
            out.stiffnesses = kbar[..ns as usize].iter().map(|k| f64::from(*k)).collect();
        }
        if setup.masses {
            out.masses = part.iter().map(|p| f64::from(p[1])).collect();
        }
        if setup.charges {
            out.charges = part
                .iter()
                .map(|p| sqrt_k * (f64::from(p[0]) + f64::from(p[3])) + f64::from(p[2]))
                .collect();
        }
        if setup.externals {
            for e in 0..ne as usize {
                let (mut q, mut x) = (0.0, DVec3::ZERO);
                for i in 0..n as usize {
                    let a = ext[i * ne as usize + e];
                    x += DVec3::new(a[0].into(), a[1].into(), a[2].into());
                    q += f64::from(a[3]);
                }
                out.external_charges.push(sqrt_k * q);
                out.external_positions.push(x);
            }
        }
        out.losses = (0..frames as usize)
            .map(|f| {
                loss[f * n_wg as usize..(f + 1) * n_wg as usize]
                    .iter()
                    .map(|a| f64::from(a[0]))
                    .sum()
            })
            .collect();
        Ok(out)
    }
}
