//! `msc.Config`: how a system is simulated, from keyword arguments named after the scene
//! file's keys (or `set=` with the dotted keys themselves). The crate builds and checks
//! it exactly as it reads a scene file's settings.

use msc::config::{Config, CoulombMethod, ExternalField};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::convert::{overrides, toml_value};
use crate::errors::{error, settings_error, with_attrs, Kind};

#[pyclass(module = "msc", name = "Config", frozen)]
pub struct PyConfig {
    pub config: Config,
}

/// Keyword arguments and the scene keys they set.
const KEYS: [(&str, &str); 14] = [
    ("integrator", "integrator.method"),
    ("dt", "integrator.dt"),
    ("steps", "integrator.steps"),
    ("duration", "integrator.duration"),
    ("solver", "integrator.solver.method"),
    ("iterations", "integrator.solver.iterations"),
    ("omega", "integrator.solver.omega"),
    ("tolerance", "integrator.solver.tolerance"),
    ("rho", "integrator.solver.rho"),
    (
        "local_global_iterations",
        "integrator.local_global_iterations",
    ),
    ("gravity", "gravity"),
    ("coulomb", "coulomb.method"),
    ("softening", "coulomb.softening"),
    ("external_field", "external_field"),
];

/// A keyword and a `set=` entry that set the same key, or where one replaces a table or
/// array holding the other's key (`scene::override_overwrites`, as `msc sweep` checks its
/// values; a table in `set=` merges, so a key it leaves out keeps the keyword's value):
/// the later would silently win, so neither is taken. `named`: (key, keyword, its
/// override).
fn check_clashes(py: Python<'_>, named: &[(&str, &str, String)], set: &[String]) -> PyResult<()> {
    for s in set {
        let key = s.split('=').next().unwrap_or_default().trim();
        let clash = named.iter().find(|(_, _, arg)| {
            msc::scene::override_overwrites(arg, s).is_some()
                || msc::scene::override_overwrites(s, arg).is_some()
        });
        if let Some((k, word, _)) = clash {
            let message = format!("{word}= sets {k} and set= sets {key}: give each setting once");
            let err = error(py, Kind::Config, message);
            return Err(with_attrs(
                py,
                err,
                [("key", PyString::new(py, k).into_any())],
            ));
        }
    }
    Ok(())
}

#[pymethods]
impl PyConfig {
    /// Settings not given take the scene file's defaults.
    #[new]
    #[pyo3(signature = (*, set=None, external_charges=None, **kwargs))]
    fn new(
        py: Python<'_>,
        set: Option<&Bound<'_, PyAny>>,
        external_charges: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut args = Vec::new();
        // The scene keys the keywords set, for the clash check below.
        let mut named: Vec<(&str, &str, String)> = Vec::new();
        if let Some(kw) = kwargs {
            for (k, v) in kw.iter() {
                let name: String = k.extract()?;
                let Some(&(word, key)) = KEYS.iter().find(|(n, _)| *n == name) else {
                    let known: Vec<&str> = KEYS.iter().map(|(n, _)| *n).collect();
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "Config() got an unexpected keyword argument '{name}' (known: {}, \
                         external_charges, set)",
                        known.join(", ")
                    )));
                };
                if !v.is_none() {
                    let arg = format!("{key}={}", toml_value(&v, key)?);
                    named.push((key, word, arg.clone()));
                    args.push(arg);
                }
            }
        }
        if let Some(ec) = external_charges.filter(|e| !e.is_none()) {
            let arg = format!("external_charges={}", toml_value(ec, "external_charges")?);
            named.push(("external_charges", "external_charges", arg.clone()));
            args.push(arg);
        }
        let set = overrides(set)?;
        check_clashes(py, &named, &set)?;
        args.extend(set);
        let config = msc::scene::config_from(&args).map_err(|e| settings_error(py, e))?;
        Ok(Self { config })
    }

    #[getter]
    fn integrator(&self) -> &'static str {
        self.config.integrator.name()
    }
    /// Time step (s).
    #[getter]
    fn dt(&self) -> f64 {
        self.config.dt
    }
    /// Steps of a run.
    #[getter]
    fn steps(&self) -> u64 {
        self.config.steps
    }
    #[getter]
    fn solver(&self) -> &'static str {
        self.config.solver.method.name()
    }
    #[getter]
    fn iterations(&self) -> u32 {
        self.config.solver.iterations
    }
    #[getter]
    fn omega(&self) -> f64 {
        self.config.solver.omega
    }
    #[getter]
    fn tolerance(&self) -> f64 {
        self.config.solver.tolerance
    }
    #[getter]
    fn rho(&self) -> Option<f64> {
        self.config.solver.rho
    }
    #[getter]
    fn local_global_iterations(&self) -> u32 {
        self.config.local_global_iterations
    }
    /// m/s^2.
    #[getter]
    fn gravity(&self) -> (f64, f64, f64) {
        self.config.gravity.into()
    }
    #[getter]
    fn coulomb(&self) -> &'static str {
        self.config.coulomb.method.name()
    }
    /// m.
    #[getter]
    fn softening(&self) -> f64 {
        self.config.coulomb.softening
    }
    /// One dict per external charge: charge (C), position (m, at t = 0), orbit or None.
    #[getter]
    fn external_charges<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.config
            .external_charges
            .iter()
            .map(|c| {
                let d = PyDict::new(py);
                d.set_item("charge", c.charge)?;
                d.set_item("position", <(f64, f64, f64)>::from(c.position))?;
                match c.orbit {
                    Some(o) => {
                        let od = PyDict::new(py);
                        od.set_item("center", <(f64, f64, f64)>::from(o.center))?;
                        od.set_item("axis", <(f64, f64, f64)>::from(o.axis))?;
                        od.set_item("angular_velocity", o.angular_velocity)?;
                        d.set_item("orbit", od)?;
                    }
                    None => d.set_item("orbit", py.None())?,
                }
                Ok(d)
            })
            .collect()
    }
    /// The external field as a dict (kind and its parameters), or None.
    #[getter]
    fn external_field<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(f) = self.config.external_field else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("kind", f.name())?;
        match f {
            ExternalField::Uniform(e) => d.set_item("value", <(f64, f64, f64)>::from(e))?,
            ExternalField::Swirl { scale, min_z } | ExternalField::Vortex { scale, min_z } => {
                d.set_item("scale", scale)?;
                d.set_item("min_z", min_z)?;
            }
        }
        Ok(Some(d))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyConfig>()
            .is_ok_and(|o| o.get().config == self.config)
    }

    fn __repr__(&self) -> String {
        let c = &self.config;
        let ddef = match c.coulomb.method {
            CoulombMethod::Ddef(d) => format!(", ddef samples={}", d.samples),
            _ => String::new(),
        };
        format!(
            "msc.Config(integrator='{}', dt={}, steps={}, solver='{}', iterations={}, \
             gravity={:?}, coulomb='{}'{ddef}, softening={}, external_charges={}, \
             external_field={})",
            c.integrator.name(),
            c.dt,
            c.steps,
            c.solver.method.name(),
            c.solver.iterations,
            c.gravity.to_array(),
            c.coulomb.method.name(),
            c.coulomb.softening,
            c.external_charges.len(),
            c.external_field.map_or("None", |f| f.name()),
        )
    }
}
