//! The crate's errors as the exceptions of `msc.errors` (defined in Python, so they carry
//! docstrings and attributes): each crate error picks its class, and the message is the
//! crate's own, its causes joined on one line.

use msc::batch::BatchError;
use msc::cli::CliError;
use msc::config::ConfigError;
use msc::ddef::DdefError;
use msc::gpu::GpuError;
use msc::grad::GradError;
use msc::model::ModelError;
use msc::run::RunError;
use msc::scene::{Resource, SceneError};
use msc::SimError;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The classes of `msc.errors`, and KeyboardInterrupt for a run stopped by a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Msc,
    Scene,
    Config,
    Model,
    Gpu,
    Divergence,
    Fit,
    /// The host's memory (MemAvailable) cannot hold what a call needs: also MemoryError.
    HostMemory,
    /// A scene's mesh the host's memory cannot hold: a HostMemoryError and a SceneError.
    SceneHostMemory,
    /// A fit the host's memory cannot hold: a HostMemoryError and a FitError.
    FitHostMemory,
    Interrupt,
}

const CLASSES: [&str; 10] = [
    "MscError",
    "SceneError",
    "ConfigError",
    "ModelError",
    "GpuError",
    "DivergenceError",
    "FitError",
    "HostMemoryError",
    "SceneHostMemoryError",
    "FitHostMemoryError",
];

static TYPES: [PyOnceLock<Py<PyType>>; 10] = [const { PyOnceLock::new() }; 10];

/// The class `name` of `msc.errors` (also used for `BackendWarning`).
pub fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    py.import("msc.errors")?
        .getattr(name)?
        .cast_into()
        .map_err(Into::into)
}

/// An exception of `kind` with `message`.
pub fn error(py: Python<'_>, kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    if kind == Kind::Interrupt {
        return PyKeyboardInterrupt::new_err(message);
    }
    let i = kind as usize;
    match TYPES[i].import(py, "msc.errors", CLASSES[i]) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    }
}

/// `err` with attributes set on its exception value (best effort: a failure to set one
/// keeps the error as it is).
pub fn with_attrs<'py>(
    py: Python<'py>,
    err: PyErr,
    attrs: impl IntoIterator<Item = (&'static str, Bound<'py, PyAny>)>,
) -> PyErr {
    let value = err.value(py);
    for (name, v) in attrs {
        let _ = value.setattr(name, v);
    }
    err
}

/// The scene key of the first configuration error in `e`'s chain (a transparent
/// variant hides its inner error from `source()`, so those are unwrapped here).
fn config_key(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(x) = cur {
        let found = x
            .downcast_ref::<ConfigError>()
            .or_else(|| match x.downcast_ref::<GpuError>() {
                Some(GpuError::Config(c)) => Some(c),
                _ => None,
            })
            .or_else(|| match x.downcast_ref::<SimError>() {
                Some(SimError::Config(c)) => Some(c),
                _ => None,
            });
        if let Some(c) = found {
            return Some(c.key.clone());
        }
        cur = x.source();
    }
    None
}

/// `err` (of `kind`) with the `key` a ConfigError always carries, from `source`'s chain.
fn keyed(
    py: Python<'_>,
    err: PyErr,
    kind: Kind,
    source: &(dyn std::error::Error + 'static),
) -> PyErr {
    if kind != Kind::Config {
        return err;
    }
    match config_key(source).and_then(|k| k.into_pyobject(py).ok()) {
        Some(k) => with_attrs(py, err, [("key", k.into_any())]),
        None => err,
    }
}

/// The exception class a crate error belongs to.
pub trait Classify: std::error::Error + Sized + 'static {
    fn kind(&self) -> Kind;
    /// The exception, with the crate's message (causes joined by `: `); a ConfigError
    /// gets the key its cause names.
    fn raise(self, py: Python<'_>) -> PyErr {
        let kind = self.kind();
        keyed(
            py,
            error(py, kind, msc::run::error::one_line(&self)),
            kind,
            &self,
        )
    }
}

/// `result.or_raise(py)`: the crate's error as its Python exception.
pub trait OrRaise<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T, E: Classify> OrRaise<T> for Result<T, E> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| e.raise(py))
    }
}

impl Classify for ModelError {
    fn kind(&self) -> Kind {
        Kind::Model
    }
}

impl Classify for ConfigError {
    fn kind(&self) -> Kind {
        Kind::Config
    }
    fn raise(self, py: Python<'_>) -> PyErr {
        let key = self.key.clone().into_pyobject(py).map(|k| k.into_any());
        let err = error(py, Kind::Config, self.to_string());
        match key {
            Ok(k) => with_attrs(py, err, [("key", k)]),
            Err(_) => err,
        }
    }
}

impl Classify for SceneError {
    fn kind(&self) -> Kind {
        match self {
            // Told apart by the shortfall's resource: a GPU buffer limit stays a SceneError.
            SceneError::TooLarge { shortfall, .. }
                if shortfall.resource == Resource::HostMemory =>
            {
                Kind::SceneHostMemory
            }
            _ => Kind::Scene,
        }
    }
}

impl Classify for DdefError {
    fn kind(&self) -> Kind {
        match self {
            DdefError::NonFinitePosition { .. } => Kind::Divergence,
            _ => Kind::Msc,
        }
    }
}

impl Classify for GpuError {
    fn kind(&self) -> Kind {
        match self {
            GpuError::Model(_) => Kind::Model,
            GpuError::Config(_) => Kind::Config,
            GpuError::Ddef(d) => d.kind(),
            GpuError::HostMemory { .. } => Kind::HostMemory,
            // One world's error of a batch: the class of the error itself, as alone (a
            // world's DDEF or model error was a GpuError); the message names the world.
            GpuError::World { error, .. } => error.kind(),
            _ => Kind::Gpu,
        }
    }
    fn raise(self, py: Python<'_>) -> PyErr {
        match self {
            GpuError::Config(c) => c.raise(py),
            e => error(py, e.kind(), msc::run::error::one_line(&e)),
        }
    }
}

impl Classify for SimError {
    fn kind(&self) -> Kind {
        match self {
            SimError::Gpu(g) => g.kind(),
            SimError::Config(_) => Kind::Config,
            SimError::Ddef(d) => d.kind(),
            SimError::Model(_) => Kind::Model,
            // One world's error of a batch: the class of the error itself.
            SimError::World { source, .. } => source.kind(),
            _ => Kind::Msc,
        }
    }
    fn raise(self, py: Python<'_>) -> PyErr {
        match self {
            SimError::Config(c) => c.raise(py),
            SimError::Gpu(g) => g.raise(py),
            e => error(py, e.kind(), msc::run::error::one_line(&e)),
        }
    }
}

impl Classify for RunError {
    fn kind(&self) -> Kind {
        match self {
            RunError::Scene { source, .. } => source.kind(),
            RunError::Option { .. } | RunError::Config(_) => Kind::Config,
            RunError::Gpu(g) => g.kind(),
            RunError::Sim { source, .. } => source.kind(),
            _ => Kind::Msc,
        }
    }
}

impl Classify for BatchError {
    fn kind(&self) -> Kind {
        match self {
            BatchError::Plan { source, .. } => source.kind(),
            BatchError::Vary { .. } | BatchError::Manifest { .. } => Kind::Scene,
            BatchError::Interrupted { .. } => Kind::Interrupt,
            BatchError::RunsFailed {
                failed: 0,
                diverged: 1..,
                ..
            } => Kind::Divergence,
            _ => Kind::Msc,
        }
    }
}

impl Classify for GradError {
    fn kind(&self) -> Kind {
        match self {
            GradError::Gpu(g) if g.kind() == Kind::HostMemory => Kind::FitHostMemory,
            // No start point has a loss: the first start's error stands for the fit's, as
            // it sets `msc fit`'s exit status.
            GradError::NoStart { first, .. } => first.kind(),
            _ => Kind::Fit,
        }
    }
}

impl Classify for CliError {
    fn kind(&self) -> Kind {
        match self {
            CliError::Run(r) => r.kind(),
            CliError::Diverged { .. } => Kind::Divergence,
            CliError::Interrupted { .. } => Kind::Interrupt,
            CliError::Fit(g) => g.kind(),
            CliError::FitStalled { .. } | CliError::FitNoGradient { .. } => Kind::Fit,
            CliError::Batch(b) => b.kind(),
            CliError::Ddef(d) => d.kind(),
            _ => Kind::Msc,
        }
    }
    fn raise(self, py: Python<'_>) -> PyErr {
        let message = msc::run::error::one_line(&self);
        let kind = self.kind();
        let err = keyed(py, error(py, kind, message), kind, &self);
        match self {
            CliError::Diverged {
                step, time, out, ..
            } => {
                let attrs = [
                    ("step", step.into_pyobject(py).ok().map(|o| o.into_any())),
                    ("time", time.into_pyobject(py).ok().map(|o| o.into_any())),
                    ("out", out.into_pyobject(py).ok().map(|o| o.into_any())),
                ];
                with_attrs(
                    py,
                    err,
                    attrs.into_iter().filter_map(|(k, v)| Some((k, v?))),
                )
            }
            _ => err,
        }
    }
}

/// A scene error of settings alone (`msc.Config`): a ConfigError, with the key it names
/// (a malformed `--set` names its key before the `=`).
pub fn settings_error(py: Python<'_>, e: SceneError) -> PyErr {
    let key = match &e {
        SceneError::Override { arg, .. } => arg.split('=').next().unwrap_or_default().trim(),
        other => other.key().unwrap_or_default(),
    };
    let key = key.to_string();
    let err = error(py, Kind::Config, msc::run::error::one_line(&e));
    match key.into_pyobject(py) {
        Ok(k) => with_attrs(py, err, [("key", k.into_any())]),
        Err(_) => err,
    }
}

/// An error of `msc fit`: a FitError, but for a scene that does not load and a stop; the
/// host's memory running short is a FitError that is also a MemoryError.
pub fn fit_error(py: Python<'_>, e: CliError) -> PyErr {
    match e.kind() {
        Kind::Scene | Kind::SceneHostMemory | Kind::Interrupt => e.raise(py),
        kind => {
            let message = msc::run::error::one_line(&e);
            let err = match kind {
                Kind::HostMemory | Kind::FitHostMemory => error(py, Kind::FitHostMemory, message),
                _ => error(py, Kind::Fit, message),
            };
            match e {
                CliError::FitStalled { out, .. } | CliError::FitNoGradient { out, .. } => {
                    match out.into_pyobject(py) {
                        Ok(o) => with_attrs(py, err, [("out", o.into_any())]),
                        Err(_) => err,
                    }
                }
                _ => err,
            }
        }
    }
}

/// A poisoned lock: a call on this object panicked earlier.
pub fn poisoned(py: Python<'_>, what: &str) -> PyErr {
    error(
        py,
        Kind::Msc,
        format!("this {what} is unusable: an earlier call on it panicked"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A world's error of a GPU batch (GpuError::World) raised a GpuError whatever it
    /// wrapped; it raises the class the wrapped error raises alone, as a step failure of
    /// one world of a CPU batch (SimError::World) does. No Python input reaches it today
    /// (the batch names a configuration or range error in place), so it is checked here.
    #[test]
    fn a_world_error_has_the_class_of_the_error_it_wraps() {
        let inner = [
            GpuError::Ddef(DdefError::NonFinitePosition { index: 3 }),
            GpuError::Ddef(DdefError::NoCharges),
            GpuError::Model(msc::model::ModelError::NonFinite {
                index: 3,
                what: "position",
            }),
            GpuError::DeviceLost("gone".into()),
        ];
        for e in inner {
            let alone = e.kind();
            let world = GpuError::World {
                world: "world 2 (scene 'tiny')".into(),
                error: Box::new(e),
            };
            assert_eq!(world.kind(), alone, "{world}");
        }
    }

    /// The GPU layer's host memory shortfall (GpuAdjoint's kept steps; no Python call
    /// reaches it today) is a MemoryError, alone and as one world's error, not a GpuError.
    #[test]
    fn a_host_memory_shortfall_of_the_gpu_layer_is_a_memory_error() {
        let e = || GpuError::HostMemory {
            what: "the table of kept steps".into(),
            needed: 1 << 40,
            available: Some(1 << 34),
        };
        assert_eq!(e().kind(), Kind::HostMemory);
        let world = GpuError::World {
            world: "world 0".into(),
            error: Box::new(e()),
        };
        assert_eq!(world.kind(), Kind::HostMemory);
        assert_eq!(SimError::Gpu(e()).kind(), Kind::HostMemory);
        assert_eq!(CLASSES[Kind::HostMemory as usize], "HostMemoryError");
    }

    /// A scene refused by its size raised SceneError whatever ran short; the host's memory
    /// is now SceneHostMemoryError (a MemoryError, still a SceneError), a GPU buffer limit
    /// still SceneError: by the shortfall's resource, alone and through the run layer.
    #[test]
    fn a_scene_too_large_for_the_host_is_a_memory_error_and_for_the_device_is_not() {
        use msc::scene::Shortfall;
        for (resource, kind) in [
            (Resource::HostMemory, Kind::SceneHostMemory),
            (Resource::Device, Kind::Scene),
        ] {
            // The built-in cloth fits the host: the shortfall is the device closure's.
            let e = msc::scene::load_checked("cloth", &[], |_, _| {
                Err(Shortfall {
                    resource,
                    what: "the test's resource".into(),
                    needed: 2,
                    available: 1,
                })
            })
            .unwrap_err();
            assert!(matches!(e, SceneError::TooLarge { .. }), "{e}");
            assert_eq!(e.kind(), kind, "{e}");
            let run = RunError::Scene {
                scene: "cloth".into(),
                source: Box::new(e),
            };
            assert_eq!(run.kind(), kind, "{run}");
            assert_eq!(CliError::Run(run).kind(), kind);
        }
        assert_eq!(
            CLASSES[Kind::SceneHostMemory as usize],
            "SceneHostMemoryError"
        );
    }

    /// The GPU adjoint's host memory shortfall inside a fit raised a plain FitError, which
    /// 'except MemoryError' misses; it is FitHostMemoryError (a FitError and a
    /// MemoryError), also as one world's error and as the first start's error of a fit
    /// whose starts all failed. Other fit failures stay FitError.
    #[test]
    fn a_host_memory_shortfall_inside_a_fit_is_a_memory_error() {
        let short = || {
            GradError::Gpu(GpuError::HostMemory {
                what: "the table of kept steps".into(),
                needed: 1 << 40,
                available: Some(1 << 34),
            })
        };
        let world = GradError::Gpu(GpuError::World {
            world: "world 0".into(),
            error: Box::new(GpuError::HostMemory {
                what: "the table of kept steps".into(),
                needed: 1 << 40,
                available: None,
            }),
        });
        let no_start = |first| GradError::NoStart {
            count: 2,
            failures: "start 0: ..".into(),
            first: Box::new(first),
        };
        for e in [short(), world, no_start(short())] {
            assert_eq!(e.kind(), Kind::FitHostMemory, "{e}");
            assert_eq!(CliError::Fit(Box::new(e)).kind(), Kind::FitHostMemory);
        }
        for e in [
            GradError::Param("charge".into()),
            GradError::Gpu(GpuError::DeviceLost("gone".into())),
            no_start(GradError::NonFiniteLoss),
        ] {
            assert_eq!(CliError::Fit(Box::new(e)).kind(), Kind::Fit);
        }
        assert_eq!(CLASSES[Kind::FitHostMemory as usize], "FitHostMemoryError");
    }
}
