//! `msc.bench_workload`: the standard benchmark systems of `msc bench` (the hanging
//! cloth, the all-pairs Coulomb cloud), so a timing from Python measures what the
//! command measures.

use msc::bench::workload::{cloth, coulomb_on, Cloud, WorkloadError};
use msc::bench::DEFAULT_SWEEPS;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::config::PyConfig;
use crate::errors::{Classify, Kind, OrRaise};
use crate::scene::PySystem;
use crate::steps::{abandonable, count, Int};

impl Classify for WorkloadError {
    fn kind(&self) -> Kind {
        match self {
            // A size past the host's memory: MemoryError, named before anything is built.
            WorkloadError::HostMemory { .. } => Kind::HostMemory,
            _ => Kind::Model,
        }
    }
}

/// The workload `name` ("cloth" or "coulomb") at about `n` particles, as `msc bench`
/// builds it: (System, Config). `cloud` places the Coulomb charges as `--cloud` does;
/// `sweeps` and `charged_fraction` shape the cloth. A value the workload does not read
/// raises ValueError, as `msc bench` refuses it; a size the host's memory cannot hold
/// raises MemoryError (msc.HostMemoryError) before anything is allocated.
#[pyfunction]
#[pyo3(signature = (name, n, *, sweeps=Int(i128::from(DEFAULT_SWEEPS)), charged_fraction=0.0, cloud="cube"))]
pub fn bench_workload(
    py: Python<'_>,
    name: &str,
    n: Int,
    sweeps: Int,
    charged_fraction: f64,
    cloud: &str,
) -> PyResult<(PySystem, PyConfig)> {
    let n: usize = count(n, "n")?;
    let sweeps: u32 = count(sweeps, "sweeps")?;
    let Some(cloud) = Cloud::from_name(cloud) else {
        let names: Vec<_> = Cloud::ALL
            .iter()
            .map(|c| format!("{:?}", c.name()))
            .collect();
        return Err(PyValueError::new_err(format!(
            "cloud must be one of {}, got {cloud:?}",
            names.join(", ")
        )));
    };
    if name == "cloth" && cloud != Cloud::Cube {
        return Err(PyValueError::new_err(
            "cloud places the \"coulomb\" workload's charges; the cloth has its own shape",
        ));
    }
    // The ranges `msc bench` takes (--sweeps, --charged-fraction): 0 sweeps would be a
    // configuration Config() refuses, and a fraction outside [0, 1] (or NaN) is clamped.
    if sweeps == 0 {
        return Err(PyValueError::new_err("sweeps must be at least 1, got 0"));
    }
    if !(0.0..=1.0).contains(&charged_fraction) {
        return Err(PyValueError::new_err(format!(
            "charged_fraction must be a fraction from 0 to 1, got {charged_fraction}"
        )));
    }
    // As `msc bench` refuses an option no workload it runs reads: never silently ignored.
    if name == "coulomb" && (sweeps != DEFAULT_SWEEPS || charged_fraction != 0.0) {
        return Err(PyValueError::new_err(
            "sweeps and charged_fraction shape the \"cloth\" workload; the \"coulomb\" \
             cloud has no springs and every particle charged",
        ));
    }
    let built = match name {
        "cloth" => abandonable(py, move || cloth(n, sweeps, charged_fraction))?,
        "coulomb" => abandonable(py, move || coulomb_on(n, cloud))?,
        other => {
            return Err(PyValueError::new_err(format!(
                "workload must be \"cloth\" or \"coulomb\", got {other:?}"
            )))
        }
    }
    .or_raise(py)?;
    Ok((
        PySystem {
            system: built.system,
        },
        PyConfig {
            config: built.config,
        },
    ))
}
