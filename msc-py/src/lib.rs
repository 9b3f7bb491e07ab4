//! `msc._msc`, the extension module of the Python package `msc`: a thin pyo3 layer over
//! the `msc` crate. It converts numpy arrays and Python values into the crate's types,
//! checks them, runs the crate's code with the GIL released and raises the crate's
//! errors as the exceptions of `msc.errors`; the logic stays in the crate.

mod bench;
mod config;
mod convert;
mod device;
mod errors;
mod runs;
mod scene;
mod simulator;
mod steps;
mod worlds;

use pyo3::prelude::*;

#[pymodule]
fn _msc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<config::PyConfig>()?;
    m.add_class::<scene::PySystem>()?;
    m.add_class::<scene::PyScene>()?;
    m.add_class::<device::PyDevice>()?;
    m.add_class::<simulator::PySimulator>()?;
    m.add_class::<worlds::PyWorlds>()?;
    m.add_function(wrap_pyfunction!(scene::load_scene, m)?)?;
    m.add_function(wrap_pyfunction!(bench::bench_workload, m)?)?;
    m.add_function(wrap_pyfunction!(scene::scenes, m)?)?;
    m.add_function(wrap_pyfunction!(device::adapters, m)?)?;
    m.add_function(wrap_pyfunction!(runs::run, m)?)?;
    m.add_function(wrap_pyfunction!(runs::sweep, m)?)?;
    m.add_function(wrap_pyfunction!(runs::fit, m)?)?;
    Ok(())
}
