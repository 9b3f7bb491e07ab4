//! The trait every backend is driven through (the run layer, `validate`, the benchmarks
//! and the viewer step a scene through it), its error, and its two implementations: the
//! f64 CPU reference and the GPU solver. It sits above both backends, so neither imports
//! the other's error type.

use glam::DVec3;

use crate::cpu::{CpuSimulation, UpdateError};
use crate::gpu::{GpuSolver, GpuWorlds};
use crate::measures::{DdefCounts, Energies, SolveStats};
use crate::model::{ModelError, State, System};

/// Errors a backend can raise while stepping or reading back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    #[error(transparent)]
    Gpu(#[from] crate::gpu::GpuError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Ddef(#[from] crate::ddef::DdefError),
    /// A state or parameters written into a running simulation that the model rejects.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// An operation this backend does not offer.
    #[error("not supported by this backend: {0}")]
    Unsupported(String),
    /// An error of one world of a batch of [`Worlds`] stepped together, naming the world:
    /// its index and, where the batch has names, its name ("world 2 (scene 'cloth')", as
    /// a GPU batch names its worlds).
    #[error("{}: {source}", world_label(*world, name.as_deref()))]
    World {
        world: usize,
        name: Option<String>,
        source: Box<SimError>,
    },
}

/// World `w` of a batch in a message: its index, and its name where it has one.
pub(crate) fn world_label(w: usize, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("world {w} ({name})"),
        None => format!("world {w}"),
    }
}

impl From<UpdateError> for SimError {
    fn from(e: UpdateError) -> Self {
        match e {
            UpdateError::Model(m) => Self::Model(m),
            UpdateError::Config(c) => Self::Config(c),
        }
    }
}

/// A time stepper over one system: the CPU reference or the GPU solver.
pub trait Simulator {
    /// Advances `n` steps.
    fn step(&mut self, n: u64) -> Result<(), SimError>;
    /// Current positions and velocities (a readback on the GPU).
    fn state(&mut self) -> Result<State, SimError>;
    /// Current energy terms (reduced on the GPU; only six numbers come back). With DDEF,
    /// a lattice whose frame drifted from its plan is re-planned here, between steps.
    fn energies(&mut self) -> Result<Energies, SimError>;
    /// The last step's linear solve, for implicit integrators.
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError>;
    /// "cpu", or the GPU adapter's name.
    fn backend_name(&self) -> String;
    /// The first particle whose position or velocity f32 cannot hold (see
    /// [`State::first_outside_f32`]); such a state is a divergence on every backend, since
    /// the GPU and the PLY frames hold f32. Backends that hold f32 state cannot exceed it
    /// (values become inf and show in the energies): the default says `None`.
    fn first_outside_f32(&mut self) -> Result<Option<usize>, SimError> {
        Ok(None)
    }
    /// DDEF grid builds and force evaluations so far; `None` unless `coulomb.method` is
    /// DDEF.
    fn ddef_counts(&self) -> Option<DdefCounts> {
        None
    }
    /// Steps done so far.
    fn steps_done(&mut self) -> Result<u64, SimError> {
        Ok(self.state()?.step)
    }
    /// Replaces the positions and velocities (one per particle); the time and step count
    /// stay. On the GPU it is queued behind the steps already submitted.
    fn set_state(&mut self, _x: &[DVec3], _v: &[DVec3]) -> Result<(), SimError> {
        Err(SimError::Unsupported("set_state".into()))
    }
    /// Replaces the masses, charges, pins and spring parameters with `system`'s, which
    /// must keep the simulation's [`crate::model::Topology`]; the state stays.
    fn set_parameters(&mut self, _system: &System) -> Result<(), SimError> {
        Err(SimError::Unsupported("set_parameters".into()))
    }
    /// Positions in f32: on the GPU as the device holds them, with no f64 conversion.
    fn positions_f32(&mut self) -> Result<Vec<[f32; 3]>, SimError> {
        Ok(self
            .state()?
            .x
            .iter()
            .map(|p| p.as_vec3().to_array())
            .collect())
    }
    /// Velocities in f32 (see [`Simulator::positions_f32`]).
    fn velocities_f32(&mut self) -> Result<Vec<[f32; 3]>, SimError> {
        Ok(self
            .state()?
            .v
            .iter()
            .map(|p| p.as_vec3().to_array())
            .collect())
    }
    /// Waits for the steps submitted so far (the GPU's steps return once submitted; the
    /// CPU's once done).
    fn synchronize(&mut self) -> Result<(), SimError> {
        Ok(())
    }
}

impl Simulator for CpuSimulation {
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        Ok(self.advance(n)?)
    }
    fn state(&mut self) -> Result<State, SimError> {
        Ok(self.current().clone())
    }
    /// With DDEF, a drifted lattice is re-planned here, as the GPU solver does.
    fn energies(&mut self) -> Result<Energies, SimError> {
        self.replan_ddef()?;
        Ok(self.energy_terms())
    }
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
        Ok(self.last_solve())
    }
    fn backend_name(&self) -> String {
        "cpu".into()
    }
    fn first_outside_f32(&mut self) -> Result<Option<usize>, SimError> {
        Ok(self.current().first_outside_f32())
    }
    fn ddef_counts(&self) -> Option<DdefCounts> {
        self.ddef_totals()
    }
    fn steps_done(&mut self) -> Result<u64, SimError> {
        Ok(self.current().step)
    }
    fn set_state(&mut self, x: &[DVec3], v: &[DVec3]) -> Result<(), SimError> {
        Ok(CpuSimulation::set_state(self, x, v)?)
    }
    fn set_parameters(&mut self, system: &System) -> Result<(), SimError> {
        Ok(CpuSimulation::set_parameters(self, system)?)
    }
}

impl Simulator for GpuSolver {
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        Ok(self.advance(n)?)
    }
    fn state(&mut self) -> Result<State, SimError> {
        Ok(self.read_state()?)
    }
    fn energies(&mut self) -> Result<Energies, SimError> {
        Ok(self.read_energies()?)
    }
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
        Ok(self.read_solve_stats()?)
    }
    fn backend_name(&self) -> String {
        self.adapter().map(|a| a.name.clone()).unwrap_or_default()
    }
    fn ddef_counts(&self) -> Option<DdefCounts> {
        Some(DdefCounts {
            rebuilds: self.ddef_rebuilds()?,
            evaluations: self.ddef_evaluations()?,
        })
    }
    fn steps_done(&mut self) -> Result<u64, SimError> {
        Ok(GpuSolver::steps_done(self))
    }
    fn set_state(&mut self, x: &[DVec3], v: &[DVec3]) -> Result<(), SimError> {
        Ok(self.write_state(x, v)?)
    }
    fn set_parameters(&mut self, system: &System) -> Result<(), SimError> {
        Ok(GpuSolver::set_parameters(self, system)?)
    }
    fn positions_f32(&mut self) -> Result<Vec<[f32; 3]>, SimError> {
        Ok(self.read_positions_f32()?)
    }
    fn velocities_f32(&mut self) -> Result<Vec<[f32; 3]>, SimError> {
        Ok(self.read_velocities_f32()?)
    }
    fn synchronize(&mut self) -> Result<(), SimError> {
        Ok(GpuSolver::synchronize(self)?)
    }
}

/// Several worlds stepped together (a batch on one device): every step advances all of
/// them; each world is read on its own. A driver keeps a world's outputs exactly as it
/// would for a [`Simulator`] of that world alone.
pub trait Worlds {
    /// Number of worlds.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Advances every world `n` steps.
    fn step(&mut self, n: u64) -> Result<(), SimError>;
    /// World `w`'s positions and velocities.
    fn state(&mut self, w: usize) -> Result<State, SimError>;
    /// World `w`'s energy terms.
    fn energies(&mut self, w: usize) -> Result<Energies, SimError>;
    /// World `w`'s last linear solve, for implicit integrators.
    fn solve_stats(&mut self, w: usize) -> Result<Option<SolveStats>, SimError>;
    /// "cpu", or the GPU adapter's name.
    fn backend_name(&self) -> String;
    /// World `w`'s first particle that f32 cannot hold (see [`Simulator::first_outside_f32`]).
    fn first_outside_f32(&mut self, _w: usize) -> Result<Option<usize>, SimError> {
        Ok(None)
    }
}

/// Worlds on the CPU reference: one simulation per world, stepped in turn (the oracle of
/// a batch, and a test double for the drivers).
pub struct CpuWorlds {
    sims: Vec<CpuSimulation>,
    /// Each world's name for its errors (`None` or missing: its index alone).
    names: Vec<Option<String>>,
}

impl CpuWorlds {
    /// The worlds `sims`, named by their index in errors.
    pub fn new(sims: Vec<CpuSimulation>) -> Self {
        Self::named(sims, Vec::new())
    }

    /// As [`Self::new`], with a name for each world that its errors give after its index
    /// (`names[w]`, e.g. "scene 'cloth'"; `None` or missing: the index alone).
    pub fn named(sims: Vec<CpuSimulation>, names: Vec<Option<String>>) -> Self {
        Self { sims, names }
    }

    /// The worlds' simulations, in order.
    pub fn sims(&self) -> &[CpuSimulation] {
        &self.sims
    }
}

impl Worlds for CpuWorlds {
    fn len(&self) -> usize {
        self.sims.len()
    }
    /// A world's failure names it (the worlds before it have stepped, the rest have not).
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        for (w, s) in self.sims.iter_mut().enumerate() {
            s.advance(n).map_err(|e| SimError::World {
                world: w,
                name: self.names.get(w).cloned().flatten(),
                source: Box::new(e.into()),
            })?;
        }
        Ok(())
    }
    fn state(&mut self, w: usize) -> Result<State, SimError> {
        Simulator::state(self.world(w)?)
    }
    fn energies(&mut self, w: usize) -> Result<Energies, SimError> {
        Simulator::energies(self.world(w)?)
    }
    fn solve_stats(&mut self, w: usize) -> Result<Option<SolveStats>, SimError> {
        Simulator::solve_stats(self.world(w)?)
    }
    fn backend_name(&self) -> String {
        "cpu".into()
    }
    fn first_outside_f32(&mut self, w: usize) -> Result<Option<usize>, SimError> {
        Simulator::first_outside_f32(self.world(w)?)
    }
}

impl CpuWorlds {
    /// World `w`, or the typed error a [`GpuBatch`] gives for a world it does not hold.
    fn world(&mut self, w: usize) -> Result<&mut CpuSimulation, SimError> {
        let len = self.sims.len();
        self.sims.get_mut(w).ok_or_else(|| no_world(w, len))
    }
}

/// The GPU batch: reads are served from one readback of every world per step (states,
/// energies and stats each read once, then sliced).
pub struct GpuBatch {
    worlds: GpuWorlds,
    cached: Cache,
}

#[derive(Default)]
struct Cache {
    step: Option<u64>,
    states: Option<Vec<State>>,
    energies: Option<Vec<Energies>>,
    stats: Option<Vec<Option<SolveStats>>>,
}

impl GpuBatch {
    pub fn new(worlds: GpuWorlds) -> Self {
        Self {
            worlds,
            cached: Cache::default(),
        }
    }

    pub fn worlds(&self) -> &GpuWorlds {
        &self.worlds
    }

    fn fresh(&mut self) -> &mut Cache {
        let step = Some(self.worlds.steps_done());
        if self.cached.step != step {
            self.cached = Cache {
                step,
                ..Cache::default()
            };
        }
        &mut self.cached
    }
}

/// Item `w` of a batch's readback, or a typed error naming the world.
fn pick<T>(items: Option<&[T]>, w: usize) -> Result<&T, SimError> {
    let items = items.unwrap_or(&[]);
    items.get(w).ok_or_else(|| no_world(w, items.len()))
}

/// World `w` asked of a batch of `len`.
fn no_world(w: usize, len: usize) -> SimError {
    crate::gpu::GpuError::Worlds(format!("world {w} of {len} asked for")).into()
}

impl Worlds for GpuBatch {
    fn len(&self) -> usize {
        self.worlds.len()
    }
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        Ok(self.worlds.advance(n)?)
    }
    fn state(&mut self, w: usize) -> Result<State, SimError> {
        if self.fresh().states.is_none() {
            let s = self.worlds.read_states()?;
            self.cached.states = Some(s);
        }
        pick(self.cached.states.as_deref(), w).cloned()
    }
    fn energies(&mut self, w: usize) -> Result<Energies, SimError> {
        if self.fresh().energies.is_none() {
            let e = self.worlds.read_energies()?;
            self.cached.energies = Some(e);
        }
        pick(self.cached.energies.as_deref(), w).copied()
    }
    fn solve_stats(&mut self, w: usize) -> Result<Option<SolveStats>, SimError> {
        if self.fresh().stats.is_none() {
            let s = self.worlds.read_solve_stats()?;
            self.cached.stats = Some(s);
        }
        pick(self.cached.stats.as_deref(), w).copied()
    }
    fn backend_name(&self) -> String {
        self.worlds
            .adapter()
            .map(|a| a.name.clone())
            .unwrap_or_default()
    }
    /// `None` for every world it holds (f32 state, see [`Simulator::first_outside_f32`]);
    /// a typed error for a world it does not.
    fn first_outside_f32(&mut self, w: usize) -> Result<Option<usize>, SimError> {
        self.worlds.world_range(w)?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddef::DdefError;

    /// The tiny torus on the CPU with DDEF; `diverging`: explicit Verlet with springs far
    /// too stiff for its time step, so its positions leave f64 within 200 steps and the
    /// DDEF grid of the next step cannot be sized.
    fn world(diverging: bool) -> CpuSimulation {
        let mut set = vec!["mesh.rings=6", "mesh.sides=3", "coulomb.method=\"ddef\""];
        if diverging {
            set.extend(["integrator.method=\"verlet\"", "material.stiffness=1e9"]);
        }
        let set: Vec<String> = set.into_iter().map(String::from).collect();
        let scene = crate::scene::load("torus", &set).unwrap();
        CpuSimulation::new(&scene.system, &scene.config).unwrap()
    }

    /// A step failure of world 2 of 4 named no world: in a batch of many worlds the one
    /// that failed had to be guessed. It names the index, and the name where the batch
    /// has names; the failure itself is kept.
    #[test]
    fn a_step_failure_names_its_world() {
        let worlds = || (0..4).map(|w| world(w == 2)).collect::<Vec<_>>();
        let names = ["a", "b", "c", "d"].map(|n| Some(format!("scene '{n}'")));
        for (mut batch, label) in [
            (CpuWorlds::new(worlds()), "world 2: "),
            (
                CpuWorlds::named(worlds(), names.into()),
                "world 2 (scene 'c'): ",
            ),
        ] {
            let e = batch.step(200).unwrap_err();
            assert!(e.to_string().starts_with(label), "{e}");
            match e {
                SimError::World {
                    world: 2, source, ..
                } => assert!(
                    matches!(*source, SimError::Ddef(DdefError::NonFinitePosition { .. })),
                    "{source}"
                ),
                e => panic!("expected world 2's error, got {e:?}"),
            }
            // The worlds before it stepped; the failing one is left at its failure.
            assert_eq!(batch.sims()[1].current().step, 200);
        }
    }
}
