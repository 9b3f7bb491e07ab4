//! `msc.adapters()` and `msc.Device`: a GPU device opened once and shared by many
//! simulators and batches (the crate's headless device, with the adapter's own limits).

use msc::gpu::{
    device_adapters, open_headless_device_on, GpuError, HeadlessDevice, HeadlessOptions,
};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::to_py;
use crate::errors::OrRaise;
use crate::steps::{abandonable, count, Int};

#[pyclass(module = "msc", name = "Device", frozen)]
pub struct PyDevice {
    pub device: HeadlessDevice,
}

#[pymethods]
impl PyDevice {
    /// Opens device `index` of `adapters(allow_software)` (honouring WGPU_BACKEND and
    /// WGPU_ADAPTER_NAME).
    #[new]
    #[pyo3(signature = (index=Int(0), *, allow_software=true))]
    fn new(py: Python<'_>, index: Int, allow_software: bool) -> PyResult<Self> {
        let index: usize = count(index, "index")?;
        let options = HeadlessOptions { allow_software };
        let device =
            abandonable(py, move || open_headless_device_on(&options, index))?.or_raise(py)?;
        Ok(Self { device })
    }
    /// The adapter's name.
    #[getter]
    fn name(&self) -> &str {
        &self.device.adapter.name
    }
    /// The adapter: name, backend, device type, driver and the limits that bound a run.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.device.adapter)
    }
    fn __repr__(&self) -> String {
        format!(
            "msc.Device('{}', backend='{}')",
            self.device.adapter.name, self.device.adapter.backend
        )
    }
}

/// The devices a Device can open, best first (one entry per physical device); empty when
/// wgpu finds none.
#[pyfunction]
#[pyo3(signature = (*, allow_software=true))]
pub fn adapters<'py>(py: Python<'py>, allow_software: bool) -> PyResult<Bound<'py, PyList>> {
    let options = HeadlessOptions { allow_software };
    let found = match py.detach(|| device_adapters(&options)) {
        Ok(a) => a,
        Err(GpuError::NoAdapter(_)) => Vec::new(),
        Err(e) => return Err(e).or_raise(py),
    };
    let items = found
        .iter()
        .map(|a| to_py(py, a))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}
