//! `msc.bench_workload`: the standard benchmark systems of `msc bench` (the hanging
//! cloth, the all-pairs Coulomb cloud), so a timing from Python measures what the
//! command measures.

use msc::bench::workload::{cloth, coulomb, WorkloadError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::config::PyConfig;
use crate::errors::{Classify, Kind, OrRaise};
use crate::scene::PySystem;

impl Classify for WorkloadError {
    fn kind(&self) -> Kind {
        Kind::Model
    }
}

/// The workload `name` ("cloth" or "coulomb") at about `n` particles, as `msc bench`
/// builds it: (System, Config).
#[pyfunction]
#[pyo3(signature = (name, n, *, sweeps=20, charged_fraction=0.0))]
pub fn bench_workload(
    py: Python<'_>,
    name: &str,
    n: usize,
    sweeps: u32,
    charged_fraction: f64,
) -> PyResult<(PySystem, PyConfig)> {
    let built = match name {
        "cloth" => py.detach(|| cloth(n, sweeps, charged_fraction)),
        "coulomb" => py.detach(|| coulomb(n)),
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
