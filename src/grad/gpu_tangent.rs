//! Forward sensitivities on the GPU for parameter sets: [`GpuTangents`] runs a
//! [`GpuSolver`] whose step carries one tangent per [`Direction`] (the kernels are
//! `gpu/solver/tangent.rs`'s), and [`drive`] is `trajectory::drive` on it, reading states and
//! tangents back at each frame. Long advances run in [`Chunks`], so that a stop request is
//! read every ~50 ms.

use glam::DVec3;

use super::params::{Direction, ParamSet};
use super::sensitivity::{check_frames, GradOptions, GradStats, Tangent};
use super::stop_check;
use super::GradError;
use crate::config::Config;
use crate::gpu::{GpuError, GpuSolver, HeadlessOptions, TangentDirection};
use crate::interrupt::Chunks;
use crate::measures::SolveStats;
use crate::model::{State, System};

/// The GPU solver of one system with tangents along fixed parameter directions.
pub struct GpuTangents {
    solver: GpuSolver,
}

/// The directions as the GPU tangent kernels read them; a mass direction has no GPU
/// tangent kernel.
fn gpu_directions(directions: &[Direction]) -> Result<Vec<TangentDirection<'_>>, GpuError> {
    if directions.iter().any(|d| d.dm.is_some()) {
        return Err(GpuError::Unsupported(
            "the GPU tangents do not differentiate masses (use the CPU reference)".into(),
        ));
    }
    Ok(directions
        .iter()
        .map(|d| TangentDirection {
            dq: d.dq.as_deref(),
            dk: d.dk.as_deref(),
            dqe: &d.dqe,
            dxe: &d.dxe,
        })
        .collect())
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
        let dirs = gpu_directions(directions)?;
        Ok(Self {
            solver: GpuSolver::headless_with_tangents(system, config, &dirs, options)?,
        })
    }

    /// As [`Self::headless`] on the caller's device and queue.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        directions: &[Direction],
    ) -> Result<Self, GpuError> {
        let dirs = gpu_directions(directions)?;
        Ok(Self {
            solver: GpuSolver::with_tangents(device, queue, system, config, &dirs)?,
        })
    }

    /// The underlying solver (device, queue, position buffer). Its step carries the
    /// tangents, which overwrite the forward right-hand side: use [`Self::step`] and
    /// [`Self::read`] rather than its `Simulator` methods.
    pub fn solver(&self) -> &GpuSolver {
        &self.solver
    }

    pub fn directions(&self) -> usize {
        self.solver.tangent_directions()
    }

    pub fn steps_done(&self) -> u64 {
        self.solver.steps_done()
    }

    /// Advances the state and every tangent by `n` steps.
    pub fn step(&mut self, n: u64) -> Result<(), GpuError> {
        self.solver.advance(n)
    }

    /// The state and one tangent per direction (one submission).
    pub fn read(&self) -> Result<(State, Vec<Tangent>), GpuError> {
        let (state, tangents) = self.solver.read_tangents()?;
        let tangents = tangents
            .into_iter()
            .map(|t| Tangent { dx: t.dx, dv: t.dv })
            .collect();
        Ok((state, tangents))
    }

    /// The relative residual |b - A dv'| / |b| (free rows) of the last direction's tangent
    /// solve in the last step, with the solver's fixed iteration count (zero for the
    /// explicit integrators, which solve nothing, as the CPU reference reports).
    pub fn last_tangent_solve(&self) -> Result<SolveStats, GpuError> {
        Ok(self.solver.last_tangent_solve()?.unwrap_or_default())
    }
}

/// `trajectory::drive` on the GPU: the forward run (a plain [`GpuSolver`] without
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
        let dirs = set.directions_at(theta)?;
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
    // A frame interval may be huge: its steps run in chunks, stoppable between them.
    let mut chunks = Chunks::new();
    for (k, &frame) in frames.iter().enumerate() {
        let (state, tangents) = match &mut run {
            Run::Forward(s) => {
                chunks.run(frame - done, |c| {
                    stop_check()?;
                    Ok::<_, GradError>(s.advance(c)?)
                })?;
                (s.read_state()?, Vec::new())
            }
            Run::Tangents(t) => {
                chunks.run(frame - done, |c| {
                    stop_check()?;
                    Ok::<_, GradError>(t.step(c)?)
                })?;
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
        if let Some(iterations) = t.solver.tangent_solve_iterations() {
            stats.tangent_iterations = u64::from(iterations) * done * t.directions() as u64;
        }
    }
    Ok(stats)
}
