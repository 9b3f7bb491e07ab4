//! `msc.System` (particles and springs from numpy arrays, checked by the crate's
//! `System::new`, errors naming the offending index), `msc.Scene` and `msc.load_scene`
//! (a scene file or built-in name with the command line's dotted overrides).

use msc::model::{Spring, System, SystemDesc};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::config::PyConfig;
use crate::convert::{index_rows, mask, overrides, scalars, vec3_array, vectors};
use crate::errors::{error, Kind, OrRaise};
use crate::steps::{abandonable, count, Int};

#[pyclass(module = "msc", name = "System", frozen)]
pub struct PySystem {
    pub system: System,
}

fn bool_array<'py>(py: Python<'py>, v: &[bool]) -> PyResult<Bound<'py, PyAny>> {
    Ok(numpy::PyArray1::from_slice(py, v).into_any())
}

fn f64_array<'py>(py: Python<'py>, v: Vec<f64>) -> PyResult<Bound<'py, PyAny>> {
    Ok(numpy::PyArray1::from_vec(py, v).into_any())
}

fn index_array<'py>(py: Python<'py>, rows: Vec<i64>, width: usize) -> PyResult<Bound<'py, PyAny>> {
    use numpy::PyArrayMethods;
    let m = rows.len() / width;
    Ok(numpy::PyArray1::from_vec(py, rows)
        .reshape([m, width])?
        .into_any())
}

/// An optional argument that was given (not None).
fn given<'py>(o: Option<&Bound<'py, PyAny>>) -> Option<Bound<'py, PyAny>> {
    o.filter(|v| !v.is_none()).cloned()
}

#[pymethods]
impl PySystem {
    /// Builds and checks a system. `masses`, `charges`, `stiffness`, `rest_length` and
    /// `damping` take an array or one number for all; `rest_length` defaults to each
    /// spring's initial length; `pinned` is a boolean mask or a list of indices.
    #[new]
    #[pyo3(signature = (positions, masses, *, velocities=None, charges=None, springs=None, stiffness=None, rest_length=None, damping=None, pinned=None, faces=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        positions: &Bound<'_, PyAny>,
        masses: &Bound<'_, PyAny>,
        velocities: Option<&Bound<'_, PyAny>>,
        charges: Option<&Bound<'_, PyAny>>,
        springs: Option<&Bound<'_, PyAny>>,
        stiffness: Option<&Bound<'_, PyAny>>,
        rest_length: Option<&Bound<'_, PyAny>>,
        damping: Option<&Bound<'_, PyAny>>,
        pinned: Option<&Bound<'_, PyAny>>,
        faces: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let positions = vectors(positions, "positions")?;
        let n = positions.len();
        let velocities = match given(velocities) {
            Some(v) => vectors(&v, "velocities")?,
            None => Vec::new(),
        };
        let masses = scalars(masses, "masses", Some(n))?;
        let charges = match given(charges) {
            Some(q) => scalars(&q, "charges", Some(n))?,
            None => Vec::new(),
        };
        let pinned = match given(pinned) {
            Some(p) => mask(&p, "pinned", n)?,
            None => Vec::new(),
        };
        let pairs = match given(springs) {
            Some(s) => index_rows(&s, "springs", 2, n)?,
            None => Vec::new(),
        };
        let ns = pairs.len();
        let has_springs = given(springs).is_some();
        let per_spring = |o: Option<&Bound<'_, PyAny>>, what: &str| -> PyResult<Option<Vec<f64>>> {
            // Without springs= (not even an empty array) it would be dropped unread.
            if !has_springs && given(o).is_some() {
                let message = format!("{what} is given without springs (an (m, 2) index array)");
                return Err(error(py, Kind::Model, message));
            }
            given(o).map(|v| scalars(&v, what, Some(ns))).transpose()
        };
        let stiffness = per_spring(stiffness, "stiffness")?;
        let rest = per_spring(rest_length, "rest_length")?;
        let damping = per_spring(damping, "damping")?.unwrap_or_else(|| vec![0.0; ns]);
        let stiffness = match stiffness {
            Some(k) => k,
            None if ns == 0 => Vec::new(),
            None => {
                return Err(error(
                    py,
                    Kind::Model,
                    "stiffness is required with springs (N/m, one number or one per spring)",
                ))
            }
        };
        let springs = pairs
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let (i, j) = (p[0], p[1]);
                Spring {
                    i,
                    j,
                    stiffness: stiffness[k],
                    rest_length: match &rest {
                        Some(r) => r[k],
                        None => positions[i as usize].distance(positions[j as usize]),
                    },
                    damping: damping[k],
                }
            })
            .collect();
        let faces = match given(faces) {
            Some(f) => index_rows(&f, "faces", 3, n)?
                .into_iter()
                .map(|r| [r[0], r[1], r[2]])
                .collect(),
            None => Vec::new(),
        };
        let system = System::new(SystemDesc {
            positions,
            velocities,
            masses,
            charges,
            pinned,
            springs,
            faces,
        })
        .or_raise(py)?;
        Ok(Self { system })
    }

    fn __len__(&self) -> usize {
        self.system.len()
    }
    /// Initial positions (m), shape (n, 3).
    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        vec3_array(py, self.system.positions())
    }
    /// Initial velocities (m/s), shape (n, 3).
    #[getter]
    fn velocities<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        vec3_array(py, self.system.velocities())
    }
    #[getter]
    fn masses<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        f64_array(py, self.system.masses().to_vec())
    }
    #[getter]
    fn charges<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        f64_array(py, self.system.charges().to_vec())
    }
    #[getter]
    fn pinned<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        bool_array(py, self.system.pinned())
    }
    /// Spring endpoints, shape (m, 2), int64.
    #[getter]
    fn springs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let flat = self
            .system
            .springs()
            .iter()
            .flat_map(|s| [i64::from(s.i), i64::from(s.j)])
            .collect();
        index_array(py, flat, 2)
    }
    #[getter]
    fn stiffness<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        f64_array(
            py,
            self.system.springs().iter().map(|s| s.stiffness).collect(),
        )
    }
    #[getter]
    fn rest_length<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        f64_array(
            py,
            self.system
                .springs()
                .iter()
                .map(|s| s.rest_length)
                .collect(),
        )
    }
    #[getter]
    fn damping<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        f64_array(
            py,
            self.system.springs().iter().map(|s| s.damping).collect(),
        )
    }
    /// Triangles (for output), shape (f, 3), int64.
    #[getter]
    fn faces<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let flat = self
            .system
            .faces()
            .iter()
            .flat_map(|f| f.map(i64::from))
            .collect();
        index_array(py, flat, 3)
    }
    /// A copy with these charges (C, one per particle).
    fn with_charges(&self, py: Python<'_>, charges: &Bound<'_, PyAny>) -> PyResult<Self> {
        let q = scalars(charges, "charges", Some(self.system.len()))?;
        let system = self.system.with_charges(&q).or_raise(py)?;
        Ok(Self { system })
    }
    /// A copy with these spring stiffnesses (N/m, one per spring or one for all).
    fn with_stiffness(&self, py: Python<'_>, stiffness: &Bound<'_, PyAny>) -> PyResult<Self> {
        let k = scalars(stiffness, "stiffness", Some(self.system.springs().len()))?;
        let system = self.system.with_stiffnesses(&k).or_raise(py)?;
        Ok(Self { system })
    }
    fn __repr__(&self) -> String {
        format!(
            "msc.System({} particles, {} springs, {} charged, {} pinned)",
            self.system.len(),
            self.system.springs().len(),
            self.system.charged_count(),
            self.system.pinned().iter().filter(|&&p| p).count()
        )
    }
}

#[pyclass(module = "msc", name = "Scene", frozen)]
pub struct PyScene {
    pub name: String,
    pub system: Py<PySystem>,
    pub config: Py<PyConfig>,
    pub output_every: u64,
    pub resolved_toml: String,
}

#[pymethods]
impl PyScene {
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
    #[getter]
    fn system(&self, py: Python<'_>) -> Py<PySystem> {
        self.system.clone_ref(py)
    }
    #[getter]
    fn config(&self, py: Python<'_>) -> Py<PyConfig> {
        self.config.clone_ref(py)
    }
    /// Steps between the frames and energy rows of `msc.run`.
    #[getter]
    fn output_every(&self) -> u64 {
        self.output_every
    }
    /// The scene as TOML after the overrides (what `msc.run` writes as scene.toml).
    #[getter]
    fn toml(&self) -> &str {
        &self.resolved_toml
    }
    fn __repr__(&self) -> String {
        format!(
            "msc.Scene('{}', {})",
            self.name,
            self.system.get().__repr__()
        )
    }
}

/// Loads a scene file or built-in scene with `set` overrides and an optional step count.
#[pyfunction]
#[pyo3(signature = (scene, set=None, steps=None))]
pub fn load_scene(
    py: Python<'_>,
    scene: &Bound<'_, PyAny>,
    set: Option<&Bound<'_, PyAny>>,
    steps: Option<Int>,
) -> PyResult<PyScene> {
    let steps = steps.map(|n| count(n, "steps")).transpose()?;
    let name = path_or_name(scene, "scene")?;
    let set = overrides(set)?;
    // A large mesh loads for seconds: Ctrl-C abandons it.
    let loaded = abandonable(py, move || msc::run::load::load(&name, &set, steps))?.or_raise(py)?;
    Ok(PyScene {
        name: loaded.name,
        system: Py::new(
            py,
            PySystem {
                system: loaded.system,
            },
        )?,
        config: Py::new(
            py,
            PyConfig {
                config: loaded.config,
            },
        )?,
        output_every: loaded.output.every,
        resolved_toml: loaded.resolved_toml,
    })
}

/// A path argument `what` (a scene also a built-in name): a string or an
/// os.PathLike of one; anything else a TypeError naming `what`. A str that is not UTF-8
/// (lone surrogates, as os.fsdecode gives for other bytes) or holds a NUL byte, which no
/// file name can, is a ValueError naming `what`.
pub fn path_or_name(p: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let text = if p.is_instance_of::<PyString>() {
        p.clone()
    } else {
        match p.py().import("os")?.call_method1("fspath", (p,)) {
            Ok(f) if f.is_instance_of::<PyString>() => f,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "{what} must be a str or os.PathLike[str] path, got {}",
                    p.get_type().name()?
                )))
            }
        }
    };
    let refused = |why: &str| {
        PyValueError::new_err(format!(
            "{what}: {} {why}",
            text.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    let s: String = text
        .extract()
        .map_err(|_| refused("is not UTF-8 text (msc paths must be)"))?;
    if s.contains('\0') {
        return Err(refused("contains a NUL byte, which no path can"));
    }
    Ok(s)
}

/// The built-in scenes: (name, description) pairs.
#[pyfunction]
pub fn scenes<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, msc::scene::builtin_names())
}
