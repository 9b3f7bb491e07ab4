//! `msc.Worlds`: several systems stepped together, on the GPU as one batch (the same
//! dispatches one system takes) or on the CPU reference one after another. Each world
//! is read on its own, with the results it would have alone. Locking and chunked
//! stepping as `msc.Simulator`.

use std::sync::Mutex;

use msc::config::Config;
use msc::cpu::CpuSimulation;
use msc::gpu::{GpuError, GpuWorlds, HeadlessOptions};
use msc::model::System;
use msc::run::backend::falls_back;
use msc::run::BackendArg;
use msc::simulator::{CpuWorlds, GpuBatch, Worlds};
use msc::SimError;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{f32_checked, f32_rows, float_dtype, vec3_array};
use crate::device::PyDevice;
use crate::errors::{poisoned, OrRaise};
use crate::scene::PyScene;
use crate::simulator::{backend_arg, energies_dict, system_and_config, warn_fallback};
use crate::steps::{abandonable, count, in_chunks, Int};

type Batch = Box<dyn Worlds + Send>;

struct Inner {
    batch: Batch,
    /// Steps done by each world: the same but after an error in a step, which stops the
    /// worlds at different steps (those before the failing one finished theirs).
    steps: Vec<u64>,
}

impl Inner {
    /// Each world's step count as the world itself holds it (kept where it cannot be read).
    fn resync(&mut self) {
        for (w, s) in self.steps.iter_mut().enumerate() {
            if let Ok(state) = self.batch.state(w) {
                *s = state.step;
            }
        }
    }
}

#[pyclass(module = "msc", name = "Worlds", frozen)]
pub struct PyWorlds {
    inner: Mutex<Inner>,
    dts: Vec<f64>,
    sizes: Vec<usize>,
    backend: String,
}

/// Each world's name for its errors ("scene 'cloth'"; `None`: a System, named by its
/// index alone).
type Names = [Option<String>];

fn cpu_worlds(worlds: &[(System, Config)], names: &Names) -> Result<Batch, SimError> {
    let sims = (worlds.iter().enumerate())
        .map(|(w, (s, c))| {
            // Named as the GPU batch names a world's error (the same configuration
            // error: the key kept).
            CpuSimulation::new(s, c).map_err(|e| {
                let name = names.get(w).and_then(Option::as_deref);
                match GpuWorlds::in_world(w, name, e.into()) {
                    GpuError::Config(c) => SimError::Config(c),
                    e => SimError::Gpu(e),
                }
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Box::new(CpuWorlds::named(sims, names.to_vec())))
}

fn gpu_worlds(
    worlds: &[(System, Config)],
    names: &Names,
    allow_software: bool,
) -> Result<Batch, GpuError> {
    let refs: Vec<(&System, &Config)> = worlds.iter().map(|(s, c)| (s, c)).collect();
    let options = HeadlessOptions { allow_software };
    let batch = GpuWorlds::headless_named(&refs, names, &options)?;
    Ok(Box::new(GpuBatch::new(batch)))
}

/// Why a batch was not built: the GPU's error or the CPU reference's.
enum BuildError {
    Gpu(GpuError),
    Sim(SimError),
}

/// The batch on the caller's device or on `choice` of backend, with the note of an
/// "auto" that fell back to the CPU.
fn build(
    device: Option<(wgpu::Device, wgpu::Queue)>,
    choice: BackendArg,
    list: &[(System, Config)],
    names: &Names,
) -> Result<(Batch, Option<String>), BuildError> {
    let cpu = |list| cpu_worlds(list, names).map_err(BuildError::Sim);
    let batch: Batch = match (device, choice) {
        (Some((device, queue)), _) => {
            let refs: Vec<(&System, &Config)> = list.iter().map(|(s, c)| (s, c)).collect();
            let b = GpuWorlds::new_named(&device, &queue, &refs, names).map_err(BuildError::Gpu)?;
            Box::new(GpuBatch::new(b))
        }
        (None, BackendArg::Cpu) => cpu(list)?,
        (None, BackendArg::Gpu) => gpu_worlds(list, names, true).map_err(BuildError::Gpu)?,
        (None, BackendArg::Auto) => match gpu_worlds(list, names, false) {
            Ok(b) => b,
            Err(e) if falls_back(&e) => {
                let note = format!("{e}; running the CPU reference instead");
                return Ok((cpu(list)?, Some(note)));
            }
            Err(e) => return Err(BuildError::Gpu(e)),
        },
    };
    Ok((batch, None))
}

impl PyWorlds {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, SimError> + Send,
    ) -> PyResult<T> {
        match py.detach(|| self.inner.lock().map(|mut g| f(&mut g)).map_err(|_| ())) {
            Ok(r) => r.or_raise(py),
            Err(()) => Err(poisoned(py, "batch of worlds")),
        }
    }

    /// `w` as a world index; a negative or huge one is out of range (not an OverflowError).
    fn world(&self, Int(w): Int) -> PyResult<usize> {
        match usize::try_from(w) {
            Ok(i) if i < self.sizes.len() => Ok(i),
            _ => Err(PyIndexError::new_err(format!(
                "world {w} of a batch of {}",
                self.sizes.len()
            ))),
        }
    }
}

#[pymethods]
impl PyWorlds {
    /// Builds the batch from Scenes, Systems or (System, Config) pairs. On the GPU the
    /// worlds must share the integrator, the solver and its iteration count, and the
    /// Coulomb method (DDEF on the lattice grid included); anything else may differ.
    #[new]
    #[pyo3(signature = (worlds, backend="auto", *, device=None))]
    fn new(
        py: Python<'_>,
        worlds: &Bound<'_, PyAny>,
        backend: &str,
        device: Option<&Bound<'_, PyDevice>>,
    ) -> PyResult<Self> {
        let choice = backend_arg(backend)?;
        // Any sequence (a tuple, a list[Scene]), as the stub's Sequence says.
        let items = worlds.try_iter().map_err(|_| {
            let got = worlds.get_type().name().map(|n| n.to_string());
            PyTypeError::new_err(format!(
                "worlds must be a sequence of Scenes, Systems or (System, Config) pairs, got {}",
                got.unwrap_or_default()
            ))
        })?;
        let mut list = Vec::new();
        let mut names = Vec::new();
        for (w, item) in items.enumerate() {
            let item = item?;
            // A wrong type names its world, as the batch's own errors do.
            let pair = system_and_config(&item, None).map_err(|e| {
                if e.is_instance_of::<PyTypeError>(py) {
                    PyTypeError::new_err(format!("world {w}: {}", e.value(py)))
                } else {
                    e
                }
            })?;
            list.push(pair);
            names.push(
                item.cast::<PyScene>()
                    .ok()
                    .map(|s| format!("scene '{}'", s.get().name)),
            );
        }
        if list.is_empty() {
            return Err(PyValueError::new_err("Worlds needs at least one world"));
        }
        if let (Some(_), BackendArg::Cpu) = (device, choice) {
            return Err(PyValueError::new_err(
                "device= runs the GPU batch: use backend=\"gpu\" or \"auto\"",
            ));
        }
        let device = device.map(|d| {
            let dev = &d.get().device;
            (dev.device.clone(), dev.queue.clone())
        });
        // Building many large worlds takes seconds: Ctrl-C abandons it.
        let (built, list) = abandonable(py, move || (build(device, choice, &list, &names), list))?;
        let (batch, note) = match built {
            Ok(b) => b,
            Err(BuildError::Gpu(e)) => return Err(e).or_raise(py),
            Err(BuildError::Sim(e)) => return Err(e).or_raise(py),
        };
        if let Some(n) = note {
            warn_fallback(py, &n)?;
        }
        Ok(Self {
            backend: batch.backend_name(),
            dts: list.iter().map(|(_, c)| c.dt).collect(),
            sizes: list.iter().map(|(s, _)| s.len()).collect(),
            inner: Mutex::new(Inner {
                batch,
                steps: vec![0; list.len()],
            }),
        })
    }

    fn __len__(&self) -> usize {
        self.sizes.len()
    }

    /// Advances every world `n` steps; Ctrl-C raises KeyboardInterrupt between chunks.
    #[pyo3(signature = (n=Int(1)))]
    fn step(&self, py: Python<'_>, n: Int) -> PyResult<()> {
        in_chunks(py, count(n, "n")?, |k| match self.inner.lock() {
            Ok(mut g) => match g.batch.step(k) {
                Ok(()) => {
                    g.steps.iter_mut().for_each(|s| *s += k);
                    Ok(())
                }
                Err(e) => {
                    g.resync();
                    Err(e)
                }
            },
            Err(_) => Err(SimError::Unsupported(
                "stepping a batch an earlier call panicked on".into(),
            )),
        })
    }

    /// World `w`'s positions (m), shape (n_w, 3).
    #[pyo3(signature = (w, dtype=None))]
    fn positions<'py>(
        &self,
        py: Python<'py>,
        w: Int,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let w = self.world(w)?;
        let f64_out = float_dtype(py, dtype)?;
        let x = self.with(py, move |b| Ok(b.batch.state(w)?.x))?;
        if f64_out {
            vec3_array(py, &x)
        } else {
            f32_rows(py, f32_checked(&x, "position")?, false)
        }
    }

    /// World `w`'s velocities (m/s), shape (n_w, 3).
    #[pyo3(signature = (w, dtype=None))]
    fn velocities<'py>(
        &self,
        py: Python<'py>,
        w: Int,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let w = self.world(w)?;
        let f64_out = float_dtype(py, dtype)?;
        let v = self.with(py, move |b| Ok(b.batch.state(w)?.v))?;
        if f64_out {
            vec3_array(py, &v)
        } else {
            f32_rows(py, f32_checked(&v, "velocity")?, false)
        }
    }

    /// World `w`'s energy terms (J).
    fn energies<'py>(&self, py: Python<'py>, w: Int) -> PyResult<Bound<'py, PyDict>> {
        let w = self.world(w)?;
        let e = self.with(py, move |b| b.batch.energies(w))?;
        energies_dict(py, &e)
    }

    /// Steps done by every world (after an error in `step`, some may have done more).
    #[getter]
    fn step_count(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |b| Ok(b.steps.iter().copied().min().unwrap_or(0)))
    }

    /// World `w`'s simulated time (s): its own time step times its own step count.
    fn time(&self, py: Python<'_>, w: Int) -> PyResult<f64> {
        let w = self.world(w)?;
        let steps = self.with(py, move |b| Ok(b.steps[w]))?;
        Ok(msc::measures::time_at(steps, self.dts[w]))
    }

    /// "cpu", or the GPU adapter's name.
    #[getter]
    fn backend(&self) -> &str {
        &self.backend
    }

    fn __repr__(&self) -> String {
        format!(
            "msc.Worlds({} worlds, backend='{}')",
            self.sizes.len(),
            self.backend
        )
    }
}
