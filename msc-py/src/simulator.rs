//! `msc.Simulator`: one system stepped on the GPU solver or the CPU reference, numpy in
//! and out. Every call holds the simulator's lock with the GIL released, so two Python
//! threads on one simulator take turns (each call whole) instead of mixing their work.
//! GPU steps return once submitted; reads wait for them.

use std::sync::{Mutex, MutexGuard};

use msc::config::Config;
use msc::gpu::GpuSolver;
use msc::model::System;
use msc::run::backend::start;
use msc::run::BackendArg;
use msc::{SimError, Simulator};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::config::PyConfig;
use crate::convert::{f32_checked, f32_rows, float_dtype, scalars, vec3_array, vectors};
use crate::device::PyDevice;
use crate::errors::{class, error, poisoned, Kind, OrRaise};
use crate::scene::{PyScene, PySystem};
use crate::steps::{abandonable, count, in_chunks, Int};

/// `backend=`.
pub fn backend_arg(name: &str) -> PyResult<BackendArg> {
    match name {
        "auto" => Ok(BackendArg::Auto),
        "gpu" => Ok(BackendArg::Gpu),
        "cpu" => Ok(BackendArg::Cpu),
        other => Err(PyValueError::new_err(format!(
            "backend must be \"auto\", \"gpu\" or \"cpu\", got {other:?}"
        ))),
    }
}

/// A Scene (its system and configuration), a System (with `config` or the defaults) or a
/// (System, Config) pair.
pub fn system_and_config(
    source: &Bound<'_, PyAny>,
    config: Option<&Bound<'_, PyConfig>>,
) -> PyResult<(System, Config)> {
    let given = config.map(|c| c.get().config.clone());
    if let Ok(scene) = source.cast::<PyScene>() {
        let s = scene.get();
        let config = given.unwrap_or_else(|| s.config.get().config.clone());
        return Ok((s.system.get().system.clone(), config));
    }
    if let Ok(system) = source.cast::<PySystem>() {
        return Ok((system.get().system.clone(), given.unwrap_or_default()));
    }
    if let Ok((system, config)) = source.extract::<(Bound<'_, PySystem>, Bound<'_, PyConfig>)>() {
        // Two configurations: neither may be dropped without a word.
        if given.is_some() {
            return Err(PyTypeError::new_err(
                "a (System, Config) pair carries its configuration: pass config= only with a \
                 System or a Scene",
            ));
        }
        return Ok((system.get().system.clone(), config.get().config.clone()));
    }
    Err(PyTypeError::new_err(format!(
        "expected a msc.Scene, a msc.System or a (System, Config) pair, got {}",
        source.get_type().name()?
    )))
}

/// Emits `note` as a `msc.BackendWarning`.
pub fn warn_fallback(py: Python<'_>, note: &str) -> PyResult<()> {
    let category = class(py, "BackendWarning")?;
    let text = std::ffi::CString::new(note.trim_start_matches("note: ")).unwrap_or_default();
    PyErr::warn(py, &category, &text, 2)
}

type Backend = Box<dyn Simulator + Send>;

struct Inner {
    sim: Backend,
    /// The parameters in use (updated by set_charges, set_stiffness, set_parameters).
    system: System,
}

#[pyclass(module = "msc", name = "Simulator", frozen)]
pub struct PySimulator {
    inner: Mutex<Inner>,
    config: Config,
    backend: String,
    n: usize,
    springs: usize,
}

impl PySimulator {
    /// Runs `f` on the backend with the GIL released (the lock is taken there, so a
    /// thread waiting for it does not hold the GIL).
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, SimError> + Send,
    ) -> PyResult<T> {
        let r = py.detach(|| self.lock().map(|mut g| f(&mut g)));
        match r {
            Ok(inner) => inner.or_raise(py),
            Err(()) => Err(poisoned(py, "simulator")),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>, ()> {
        self.inner.lock().map_err(|_| ())
    }

    fn read_rows<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        velocities: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f64_out = float_dtype(py, dtype)?;
        let rows = self.with(py, move |s| {
            if velocities {
                s.sim.velocities_f32_or_f64()
            } else {
                s.sim.positions_f32_or_f64()
            }
        })?;
        match rows {
            Rows::F32(v) => f32_rows(py, v, f64_out),
            Rows::F64(v) if f64_out => vec3_array(py, &v),
            Rows::F64(v) => {
                let what = if velocities { "velocity" } else { "position" };
                f32_rows(py, f32_checked(&v, what)?, false)
            }
        }
    }

    fn update(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&System) -> Result<System, msc::model::ModelError> + Send,
    ) -> PyResult<()> {
        self.with(py, |s| {
            let next = f(&s.system)?;
            s.sim.set_parameters(&next)?;
            s.system = next;
            Ok(())
        })
    }
}

/// What a read returns: the GPU's f32 values, or the CPU's f64 ones.
enum Rows {
    F32(Vec<[f32; 3]>),
    F64(Vec<glam::DVec3>),
}

/// Reads with the fewest conversions: a GPU's f32 values as they are (or widened once),
/// the CPU reference's f64 state as it is (narrowed, checked, by the caller).
trait ReadRows {
    fn positions_f32_or_f64(&mut self) -> Result<Rows, SimError>;
    fn velocities_f32_or_f64(&mut self) -> Result<Rows, SimError>;
}

impl ReadRows for Backend {
    fn positions_f32_or_f64(&mut self) -> Result<Rows, SimError> {
        if self.backend_name() == "cpu" {
            return Ok(Rows::F64(self.state()?.x));
        }
        Ok(Rows::F32(self.positions_f32()?))
    }
    fn velocities_f32_or_f64(&mut self) -> Result<Rows, SimError> {
        if self.backend_name() == "cpu" {
            return Ok(Rows::F64(self.state()?.v));
        }
        Ok(Rows::F32(self.velocities_f32()?))
    }
}

/// The energy terms as a dict (J).
pub fn energies_dict<'py>(py: Python<'py>, e: &msc::Energies) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in [
        ("kinetic", e.kinetic),
        ("elastic", e.elastic),
        ("coulomb", e.coulomb),
        ("gravity", e.gravity),
        ("external", e.external),
        ("total", e.total),
    ] {
        d.set_item(k, v)?;
    }
    Ok(d)
}

#[pymethods]
impl PySimulator {
    /// Builds the simulator on `backend` ("auto": a hardware GPU, else the CPU reference
    /// with a BackendWarning; "gpu": any adapter, software ones included; "cpu"), or on
    /// `device`, a msc.Device shared with other simulators.
    #[new]
    #[pyo3(signature = (source, config=None, backend="auto", *, device=None))]
    fn new(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        config: Option<&Bound<'_, PyConfig>>,
        backend: &str,
        device: Option<&Bound<'_, PyDevice>>,
    ) -> PyResult<Self> {
        let choice = backend_arg(backend)?;
        let (system, config) = system_and_config(source, config)?;
        let (sim, note, system, config): (Backend, Option<String>, System, Config) = match device {
            Some(d) => {
                if choice == BackendArg::Cpu {
                    return Err(PyValueError::new_err(
                        "device= runs the GPU solver: use backend=\"gpu\" or \"auto\"",
                    ));
                }
                let dev = &d.get().device;
                let (device, queue) = (dev.device.clone(), dev.queue.clone());
                // Building a large system's solver takes seconds: Ctrl-C abandons it.
                let (solver, system, config) = abandonable(py, move || {
                    let solver = GpuSolver::new(&device, &queue, &system, &config);
                    (solver, system, config)
                })?;
                (Box::new(solver.or_raise(py)?), None, system, config)
            }
            None => {
                let (b, system, config) = abandonable(py, move || {
                    (start(choice, &system, &config), system, config)
                })?;
                let b = b.or_raise(py)?;
                (b.sim, b.fallback_note, system, config)
            }
        };
        if let Some(note) = note {
            warn_fallback(py, &note)?;
        }
        Ok(Self {
            backend: sim.backend_name(),
            n: system.len(),
            springs: system.springs().len(),
            inner: Mutex::new(Inner { sim, system }),
            config,
        })
    }

    /// Advances `n` steps (GPU: returns once they are submitted). Ctrl-C raises
    /// KeyboardInterrupt between chunks of steps; `step_count` says how many were done.
    #[pyo3(signature = (n=Int(1)))]
    fn step(&self, py: Python<'_>, n: Int) -> PyResult<()> {
        in_chunks(py, count(n, "n")?, |k| match self.lock() {
            Ok(mut g) => g.sim.step(k),
            Err(()) => Err(SimError::Unsupported(
                "stepping a simulator an earlier call panicked on".into(),
            )),
        })
    }

    /// Waits for the steps submitted so far (GPU); nothing to wait for on the CPU.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.sim.synchronize())
    }

    /// Positions (m), shape (n, 3), float64 or float32 (the GPU's values without a
    /// conversion).
    #[pyo3(signature = (dtype=None))]
    fn positions<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.read_rows(py, dtype, false)
    }

    /// Velocities (m/s), shape (n, 3), float64 or float32.
    #[pyo3(signature = (dtype=None))]
    fn velocities<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.read_rows(py, dtype, true)
    }

    /// The energy terms of the current state (J): kinetic, elastic, coulomb, gravity,
    /// external and their total.
    fn energies<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = self.with(py, |s| s.sim.energies())?;
        energies_dict(py, &e)
    }

    /// Raises DivergenceError when the energies are not finite (a non-finite position
    /// or velocity makes them so), as a run judges divergence.
    fn check_finite(&self, py: Python<'_>) -> PyResult<()> {
        let (e, step) = self.with(py, |s| Ok((s.sim.energies()?, s.sim.steps_done()?)))?;
        if e.is_finite() {
            return Ok(());
        }
        let time = msc::measures::time_at(step, self.config.dt);
        Err(error(
            py,
            Kind::Divergence,
            format!("the simulation diverged by step {step} (t = {time} s): its energies are not finite"),
        ))
    }

    /// Replaces the positions and velocities (shape (n, 3)); time and step count stay.
    fn set_state(
        &self,
        py: Python<'_>,
        positions: &Bound<'_, PyAny>,
        velocities: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let x = vectors(positions, "positions")?;
        let v = vectors(velocities, "velocities")?;
        self.with(py, move |s| s.sim.set_state(&x, &v))
    }

    /// New charges (C, one per particle) without a rebuild. A particle uncharged when the
    /// simulator was built stays uncharged.
    fn set_charges(&self, py: Python<'_>, charges: &Bound<'_, PyAny>) -> PyResult<()> {
        let q = scalars(charges, "charges", Some(self.n))?;
        self.update(py, move |s| s.with_charges(&q))
    }

    /// New spring stiffnesses (N/m, one per spring or one for all) without a rebuild.
    fn set_stiffness(&self, py: Python<'_>, stiffness: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = scalars(stiffness, "stiffness", Some(self.springs))?;
        self.update(py, move |s| s.with_stiffnesses(&k))
    }

    /// Every per-particle and per-spring parameter of `system` (masses, charges, pins,
    /// stiffness, rest length, damping) without a rebuild; its particles and springs must
    /// be the simulator's.
    fn set_parameters(&self, py: Python<'_>, system: &Bound<'_, PySystem>) -> PyResult<()> {
        let next = system.get().system.clone();
        self.update(py, move |_| Ok(next))
    }

    /// Simulated time (s).
    #[getter]
    fn time(&self, py: Python<'_>) -> PyResult<f64> {
        let steps = self.with(py, |s| s.sim.steps_done())?;
        Ok(msc::measures::time_at(steps, self.config.dt))
    }
    /// Steps done so far.
    #[getter]
    fn step_count(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |s| s.sim.steps_done())
    }
    /// "cpu", or the GPU adapter's name.
    #[getter]
    fn backend(&self) -> &str {
        &self.backend
    }
    /// The parameters in use (after any set_charges, set_stiffness, set_parameters).
    #[getter]
    fn system(&self, py: Python<'_>) -> PyResult<PySystem> {
        let system = self.with(py, |s| Ok(s.system.clone()))?;
        Ok(PySystem { system })
    }
    #[getter]
    fn config(&self) -> PyConfig {
        PyConfig {
            config: self.config.clone(),
        }
    }
    fn __len__(&self) -> usize {
        self.n
    }
    fn __repr__(&self) -> String {
        format!(
            "msc.Simulator({} particles, {}, backend='{}')",
            self.n,
            self.config.integrator.name(),
            self.backend
        )
    }
}
