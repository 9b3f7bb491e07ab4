//! Long Rust work with the GIL released and Ctrl-C honoured. Stepping runs in chunks:
//! between chunks the calling thread takes the GIL back and checks for signals, so
//! Ctrl-C raises KeyboardInterrupt after a whole chunk (the step count says how far it
//! got). Chunks (`msc::interrupt::Chunks`) double until one takes 50 ms, so cheap steps are not slowed
//! by the checks and long runs still answer within about that time. Whole runs (`run`,
//! `sweep`, `fit`) go to a worker thread; on a signal the call's own stop scope makes them
//! finish the step under way and write every output, as the command line does. Work that
//! cannot stop part way (loading a scene, building a system or a solver) runs on a thread
//! of its own that a signal abandons.

use std::time::Duration;

use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBool;

use crate::errors::{Classify, OrRaise};

/// An integer argument (a count or an index) that refuses a bool: Python's `True` is the
/// int 1, so `step(True)` would run one step and `world(True)` read world 1 without a word.
/// NumPy integers and anything with `__index__` still convert.
pub struct Int(pub i128);

impl<'a, 'py> FromPyObject<'a, 'py> for Int {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(format!(
                "expected an integer, got the bool {}",
                obj.str()?
            )));
        }
        obj.extract::<i128>().map(Int)
    }
}

/// A count from Python (steps, an index, a size): a negative one is a ValueError (pyo3's
/// own conversion to an unsigned integer raises OverflowError for it, which `except
/// ValueError` misses).
pub fn count<T: TryFrom<i128>>(Int(n): Int, what: &str) -> PyResult<T> {
    T::try_from(n).map_err(|_| {
        if n < 0 {
            PyValueError::new_err(format!("{what} must not be negative, got {n}"))
        } else {
            PyOverflowError::new_err(format!("{what} = {n} is too large"))
        }
    })
}

/// Runs `step(k)` for chunks of k steps adding up to `n`, the GIL released.
pub fn in_chunks<E: Classify + Send>(
    py: Python<'_>,
    n: u64,
    mut step: impl FnMut(u64) -> Result<(), E> + Send,
) -> PyResult<()> {
    msc::interrupt::Chunks::new().run(n, |k| {
        py.detach(|| step(k)).or_raise(py)?;
        py.check_signals()
    })
}

/// Runs `work` on a worker thread while this one waits with the GIL released, checking
/// for signals every 50 ms. On a signal this call's own stop scope is raised, the work
/// finishes what it must write, and the signal's exception (KeyboardInterrupt) is
/// returned. The scope is this call's alone: another thread's call neither clears it nor
/// is stopped by it (the process-wide request is left to the command line).
pub fn interruptible<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    let stop = msc::interrupt::Scope::new();
    std::thread::scope(|scope| {
        let waiting = std::thread::current();
        let inside = stop.clone();
        let worker = scope.spawn(move || {
            let out = inside.run(work);
            waiting.unpark();
            out
        });
        let mut signal = None;
        while !worker.is_finished() {
            py.detach(|| std::thread::park_timeout(Duration::from_millis(50)));
            if signal.is_none() {
                if let Err(e) = py.check_signals() {
                    // The work stops after its current step and writes its outputs.
                    stop.request();
                    signal = Some(e);
                }
            }
        }
        let joined = py.detach(|| worker.join());
        match (joined, signal) {
            (Err(panic), _) => std::panic::resume_unwind(panic),
            (Ok(_), Some(e)) => Err(e),
            (Ok(v), None) => Ok(v),
        }
    })
}

/// Runs `work`, which cannot stop part way (loading a scene, building a system or a
/// solver), on a thread of its own while this one waits with the GIL released, checking
/// for signals every 50 ms. On a signal its exception (KeyboardInterrupt) is returned at
/// once; the work finishes alone and its result is dropped, as it writes nothing.
pub fn abandonable<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let waiting = std::thread::current();
    let worker = std::thread::Builder::new()
        .name("msc-build".into())
        .spawn(move || {
            let out = work();
            waiting.unpark();
            out
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    loop {
        if worker.is_finished() {
            return match worker.join() {
                Ok(v) => Ok(v),
                Err(panic) => std::panic::resume_unwind(panic),
            };
        }
        py.detach(|| std::thread::park_timeout(Duration::from_millis(50)));
        // On a signal the handle is dropped: the thread ends alone.
        py.check_signals()?;
    }
}
