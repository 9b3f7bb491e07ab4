//! What a [`GpuSolver`] reads back: its state, energies and last solve, the tangents it
//! carries, and the diagnostics (spring blocks, field forces) the tests compare with the
//! CPU reference; each read is one submission.

use glam::{DMat3, DVec3};

use super::ddef::check_loop_budget;
use super::gpu_solver::GpuSolver;
use super::tangent::TangentVectors;
use crate::config::Integrator;
use crate::gpu::device::readback;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recording::Op;
use crate::gpu::layout::{DdefWorld, SCALAR_SLOTS, SLOT_ENERGY, SLOT_RESIDUAL};
use crate::measures::{Energies, SolveStats};
use crate::model::{ModelError, State, F32_MAX};

/// A DDEF evaluation's structure as the GPU built it ([`GpuSolver::read_ddef_structure`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DdefStructure {
    /// The frame's box corners (whole numbers of quanta, exact in f32).
    pub lo: DVec3,
    pub hi: DVec3,
    pub dims: [u32; 3],
    pub drifted: bool,
    /// Per charged particle (increasing index) its tetrahedron.
    pub tets: Vec<u32>,
}

impl GpuSolver {
    /// Diagnostics: per spring at the current state, the force on particle i (elastic and
    /// damping, as the explicit integrators use it) and the block W_k of A. It overwrites
    /// the step's blocks, so the last solve's stats are saved first for `solve_stats`.
    /// Refused for `local_global`, whose constant matrix lives in the same buffer.
    pub fn spring_blocks(&mut self) -> Result<Vec<(DVec3, DMat3)>, GpuError> {
        if self.integrator == Integrator::LocalGlobal {
            return Err(GpuError::Unsupported(
                "spring_blocks would overwrite local_global's constant matrix".into(),
            ));
        }
        let ns = self.spring_count;
        if ns == 0 {
            return Ok(Vec::new());
        }
        if self.integrator.is_implicit() && self.steps_done > 0 {
            if let Some(stats) = self.read_solve_stats()? {
                self.saved_stats = Some((self.steps_done, stats));
            }
        }
        let data = self.run_and_read(
            &self.program.springs,
            &[(Buf::SpringBlocks, 0, 32 * u64::from(ns))],
        )?;
        Ok(readback::spring_blocks(&data))
    }

    /// Diagnostics: Coulomb + external + gravity force (and the drag at the current
    /// velocities, where the world has one) on every particle at the current state and
    /// time, and each particle's Coulomb potential sum_j k_c q_i q_j / r_soft.
    /// With DDEF the Coulomb part is the DDEF force (w is then 0: no potential).
    /// With DDEF the world records come back too: a loop-budget flag is an error.
    pub fn field_forces(&mut self) -> Result<(Vec<DVec3>, Vec<f64>), GpuError> {
        let bytes = 16 * u64::from(self.n);
        let data = self.run_and_read_checked(&self.program.field, &[(Buf::Force, 0, bytes)])?;
        Ok((readback::vectors(&data), readback::w_components(&data)))
    }

    /// `run_and_read`, and with DDEF the world records in the same submission: a
    /// loop-budget flag there is an error (`ddef::check_loop_budget`). The flags are
    /// sticky (only a re-plan clears them, after checking them), so one read after a
    /// run of evaluations vouches for all of them: the forward's, and the tangents' and
    /// adjoints' walks over the same structure (`kernels::ddef_adjoint`).
    pub(in crate::gpu) fn run_and_read_checked(
        &self,
        ops: &[Op],
        copies: &[(Buf, u64, u64)],
    ) -> Result<Vec<u8>, GpuError> {
        let (data, records) = self.run_and_read_records(ops, copies)?;
        super::ddef::check_loop_budget(&records)?;
        Ok(data)
    }

    /// `copies` as [`Self::run_and_read_checked`] reads them, with the step clock read
    /// back beside them: a clock behind the steps counted means steps recorded into a
    /// caller's encoder that has not been submitted, and the state read would be
    /// labelled with steps it does not hold (Verlet's next step would also skip its
    /// first force evaluation). Compared modulo 2^32, the clock's width.
    pub(in crate::gpu) fn read_at_step(
        &self,
        copies: &[(Buf, u64, u64)],
    ) -> Result<Vec<u8>, GpuError> {
        let mut all = copies.to_vec();
        all.push((Buf::Clock, 0, 16));
        let mut data = self.run_and_read_checked(&[], &all)?;
        let at = data.len() - 16;
        let clock: u32 = bytemuck::pod_read_unaligned(&data[at..at + 4]);
        data.truncate(at);
        let unsubmitted = (self.steps_done as u32).wrapping_sub(clock);
        if unsubmitted != 0 {
            return Err(GpuError::Unsubmitted {
                counted: self.steps_done,
                unsubmitted: unsubmitted.into(),
            });
        }
        Ok(data)
    }

    /// `run_and_read`, and with DDEF every world's record after `copies` (none without).
    fn run_and_read_records(
        &self,
        ops: &[Op],
        copies: &[(Buf, u64, u64)],
    ) -> Result<(Vec<u8>, Vec<DdefWorld>), GpuError> {
        let Some(ddef) = &self.ddef else {
            return Ok((self.run_and_read(ops, copies)?, Vec::new()));
        };
        let bytes: u64 = copies.iter().map(|c| c.2).sum();
        let size = std::mem::size_of::<DdefWorld>() as u64;
        let worlds = ddef.layout.worlds.len() as u64;
        let mut all = copies.to_vec();
        all.push((Buf::DdefWorlds, 0, size * worlds));
        let mut data = self.run_and_read(ops, &all)?;
        let records = data[bytes as usize..]
            .chunks_exact(size as usize)
            .map(bytemuck::pod_read_unaligned)
            .collect();
        data.truncate(bytes as usize);
        Ok((data, records))
    }

    /// Tests against `LatticeDdef::forces_vjp`: the DDEF forces' transpose (structure
    /// frozen) at the current state for the force cotangent `w` (one per particle), as
    /// (position cotangents, charge cotangents); 0 on uncharged particles. Needs a solver
    /// with tangents and DDEF; it overwrites direction 0's tangent state.
    #[doc(hidden)]
    pub fn ddef_forces_vjp(&mut self, w: &[DVec3]) -> Result<(Vec<DVec3>, Vec<f64>), GpuError> {
        let ops =
            match &self.tangents {
                Some(t) if !t.ddef_vjp.is_empty() => t.ddef_vjp.as_slice(),
                _ => return Err(GpuError::Unsupported(
                    "ddef_forces_vjp needs a solver with tangents and coulomb.method = \"ddef\""
                        .into(),
                )),
            };
        self.write_direction_dx("w", w)?;
        let bytes = 16 * u64::from(self.n);
        let data = self.run_and_read_checked(ops, &[(Buf::DdefAdjOut, 0, bytes)])?;
        let sqrt_k = crate::model::COULOMB_K.sqrt();
        let q = readback::w_components(&data)
            .iter()
            .map(|q| q * sqrt_k)
            .collect();
        Ok((readback::vectors(&data), q))
    }

    /// Tests of [`Self::ddef_forces_vjp`] against the DDEF tangent kernels: the tangent of
    /// the field forces (DDEF and external) at the current state along direction 0, its
    /// dx replaced by `dx` (its dq the direction's own), per particle; rows of particles
    /// with neither charge nor dq are left as they were. Overwrites direction 0's
    /// tangent state and the step's right-hand side.
    #[doc(hidden)]
    pub fn ddef_forces_jvp(&mut self, dx: &[DVec3]) -> Result<Vec<DVec3>, GpuError> {
        let ops =
            match &self.tangents {
                Some(t) if !t.ddef_jvp.is_empty() => t.ddef_jvp.as_slice(),
                _ => return Err(GpuError::Unsupported(
                    "ddef_forces_jvp needs a solver with tangents and coulomb.method = \"ddef\""
                        .into(),
                )),
            };
        self.write_direction_dx("dx", dx)?;
        let size = self.buffers.get(Buf::RhsDiagonal)?.size();
        let data = self.run_and_read_checked(ops, &[(Buf::RhsDiagonal, 0, size)])?;
        let rows = readback::vectors(&data);
        let stride = rows.len() / self.n.max(1) as usize;
        Ok(rows
            .into_iter()
            .step_by(stride)
            .take(self.n as usize)
            .collect())
    }

    /// Writes `dx` (one per particle) into direction 0's dx bank of `TanState`. The
    /// argument `what` is checked first: a wrong length or a component that is not a
    /// finite f32 would otherwise be read short or turn the results into NaN silently.
    fn write_direction_dx(&self, what: &'static str, dx: &[DVec3]) -> Result<(), GpuError> {
        if dx.len() != self.n as usize {
            return Err(GpuError::Model(ModelError::LengthMismatch {
                what,
                got: dx.len(),
                expected: self.n as usize,
            }));
        }
        for (index, v) in dx.iter().enumerate() {
            if !v.is_finite() {
                return Err(GpuError::Model(ModelError::NonFinite { index, what }));
            }
            if let Some(c) = v.to_array().into_iter().find(|c| c.abs() > F32_MAX) {
                return Err(GpuError::F32Range {
                    what: format!("{what}[{index}]"),
                    value: c,
                    limit: format!("|value| <= {F32_MAX:e}"),
                });
            }
        }
        let data: Vec<[f32; 4]> = dx
            .iter()
            .map(|v| [v.x as f32, v.y as f32, v.z as f32, 0.0])
            .collect();
        let buffer = self.buffers.get(Buf::TanState)?;
        self.host
            .queue
            .write_buffer(buffer, 0, bytemuck::cast_slice(&data));
        Ok(())
    }

    /// The DDEF structure of the last evaluation, for tests against the CPU reference:
    /// the frame's box, sites per axis and drift flag, and each charged particle's
    /// tetrahedron in increasing particle order (`None` unless `coulomb.method = "ddef"`;
    /// one system only).
    pub fn read_ddef_structure(&self) -> Result<Option<DdefStructure>, GpuError> {
        let Some(ddef) = &self.ddef else {
            return Ok(None);
        };
        let size = std::mem::size_of::<DdefWorld>() as u64;
        let slots = ddef.layout.slots;
        let data = self.run_and_read(
            &[],
            &[(Buf::DdefWorlds, 0, size), (Buf::SrcTet, 0, 4 * slots)],
        )?;
        let w: DdefWorld = bytemuck::pod_read_unaligned(&data[..size as usize]);
        let corner = |v: [f32; 4]| DVec3::new(v[0].into(), v[1].into(), v[2].into());
        Ok(Some(DdefStructure {
            lo: corner(w.lo),
            hi: corner(w.hi),
            dims: [w.dims[0], w.dims[1], w.dims[2]],
            drifted: w.flags[0] != 0,
            tets: data[size as usize..]
                .chunks_exact(4)
                .map(bytemuck::pod_read_unaligned)
                .collect(),
        }))
    }

    /// The state after the steps done (one submission; with DDEF a loop-budget flag
    /// raised since the last re-plan is an error, see `run_and_read_checked`).
    pub fn read_state(&self) -> Result<State, GpuError> {
        let bytes = 16 * u64::from(self.n);
        let data = self.read_at_step(&[(Buf::X, 0, bytes), (Buf::V, 0, bytes)])?;
        let mut x = readback::vectors(&data);
        let v = x.split_off(self.n as usize);
        Ok(State {
            x,
            v,
            t: self.dt.time_at(self.steps_done),
            step: self.steps_done,
        })
    }

    /// The energy terms of the current state (reduced on the GPU; six numbers come back).
    /// With DDEF the world records come back with them: a frame that drifted from its
    /// plan makes the host re-plan here, between steps (see `solver::ddef`).
    pub fn read_energies(&self) -> Result<Energies, GpuError> {
        let Some(data) = self.ddef_records_with(&self.program.energy)? else {
            let energy = (Buf::Scalars, 16 * u64::from(SLOT_ENERGY), 32);
            let data = self.run_and_read(&self.program.energy, &[energy])?;
            return Ok(readback::energies(&data));
        };
        let at = 16 * SLOT_ENERGY as usize;
        Ok(readback::energies(&data[at..at + 32]))
    }

    /// With DDEF: runs `ops` and reads every world's scalar slots back with the DDEF
    /// world records in one submission, then re-plans the worlds whose frame drifted;
    /// returns the scalars (`None` without DDEF). An adjoint's solver never re-plans: its
    /// recomputed and reversed steps must evaluate on the forward's structure, so it
    /// keeps its set-up plan for the run, as the CPU gradient driver does (`grad::step`),
    /// and only checks the loop budget.
    pub(in crate::gpu) fn ddef_records_with(
        &self,
        ops: &[Op],
    ) -> Result<Option<Vec<u8>>, GpuError> {
        let Some(ddef) = &self.ddef else {
            return Ok(None);
        };
        let worlds = ddef.layout.worlds.len() as u64;
        let scalars = 16 * u64::from(SCALAR_SLOTS) * worlds;
        let (data, records) = self.run_and_read_records(ops, &[(Buf::Scalars, 0, scalars)])?;
        if self.adjoint.is_some() {
            check_loop_budget(&records)?;
        } else {
            ddef.replan(
                &self.host.queue,
                self.buffers.get(Buf::DdefWorlds)?,
                &records,
            )?;
        }
        Ok(Some(data))
    }

    /// The last step's linear solve: its iterations and final residual (`None` for
    /// explicit integrators and before the first step).
    pub fn read_solve_stats(&self) -> Result<Option<SolveStats>, GpuError> {
        if !self.integrator.is_implicit() || self.steps_done == 0 {
            return Ok(None);
        }
        if let Some((step, stats)) = self.saved_stats {
            if step == self.steps_done {
                return Ok(Some(stats));
            }
        }
        let residual = self.read_residual(&self.program.residual)?;
        Ok(Some(SolveStats {
            iterations: self.iterations,
            residual,
        }))
    }

    fn read_residual(&self, ops: &[Op]) -> Result<f64, GpuError> {
        let data = self.run_and_read(ops, &[(Buf::Scalars, 16 * u64::from(SLOT_RESIDUAL), 16)])?;
        Ok(readback::relative_residual(&data))
    }

    /// Tangent directions the step carries (0 without tangents).
    pub fn tangent_directions(&self) -> usize {
        self.tangents.as_ref().map_or(0, |t| t.directions)
    }

    /// Solver iterations per step of each direction's tangent solves (`None` without
    /// tangents or when they solve nothing: the explicit integrators).
    pub fn tangent_solve_iterations(&self) -> Option<u32> {
        match &self.tangents {
            Some(t) if !t.residual.is_empty() => Some(self.iterations),
            _ => None,
        }
    }

    /// The state and one tangent (dx, dv) per direction (one submission; with DDEF a
    /// loop-budget flag is an error, as for [`Self::read_state`]).
    pub fn read_tangents(&self) -> Result<(State, Vec<TangentVectors>), GpuError> {
        let nd = self.tangent_directions();
        let n = self.n as usize;
        let bytes = 16 * n as u64;
        let data = self.read_at_step(&[
            (Buf::X, 0, bytes),
            (Buf::V, 0, bytes),
            (Buf::TanState, 0, 2 * bytes * nd as u64),
        ])?;
        let all = readback::vectors(&data);
        let range = |a: usize| all[a..a + n].to_vec();
        let state = State {
            x: range(0),
            v: range(n),
            t: self.dt.time_at(self.steps_done),
            step: self.steps_done,
        };
        let tangents = (0..nd)
            .map(|d| TangentVectors {
                dx: range(2 * n + 2 * n * d),
                dv: range(3 * n + 2 * n * d),
            })
            .collect();
        Ok((state, tangents))
    }

    /// The relative residual |b - A dv'| / |b| (free rows) of the last direction's tangent
    /// solve in the last step, with the solver's fixed iteration count (`None` without
    /// tangents or when they solve nothing).
    pub fn last_tangent_solve(&self) -> Result<Option<SolveStats>, GpuError> {
        let Some(t) = self.tangents.as_ref().filter(|t| !t.residual.is_empty()) else {
            return Ok(None);
        };
        Ok(Some(SolveStats {
            iterations: self.iterations,
            residual: self.read_residual(&t.residual)?,
        }))
    }
}
