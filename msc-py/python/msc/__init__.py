"""msc: charged mass-spring systems on the GPU, from Python.

Springs are integrated implicitly and Coulomb forces explicitly (IMEX); the GPU solver
runs WGSL kernels through wgpu, and an f64 CPU reference runs the same equations.
Arrays go in and come out as numpy arrays (SI units); errors are :class:`MscError`\\ s.

GPU steps are asynchronous: ``Simulator.step`` returns once the steps are submitted,
and the first read (``positions()``, ``energies()``...) or ``synchronize()`` waits for
them.
"""

from __future__ import annotations

from ._msc import (
    Config,
    Device,
    Scene,
    Simulator,
    System,
    Worlds,
    __version__,
    adapters,
    bench_workload,
    fit,
    load_scene,
    run,
    scenes,
    sweep,
)
from .errors import (
    BackendWarning,
    ConfigError,
    DivergenceError,
    FitError,
    FitHostMemoryError,
    GpuError,
    HostMemoryError,
    ModelError,
    MscError,
    SceneError,
    SceneHostMemoryError,
)

__all__ = [
    "BackendWarning",
    "Config",
    "ConfigError",
    "Device",
    "DivergenceError",
    "FitError",
    "FitHostMemoryError",
    "GpuError",
    "HostMemoryError",
    "ModelError",
    "MscError",
    "Scene",
    "SceneError",
    "SceneHostMemoryError",
    "Simulator",
    "System",
    "Worlds",
    "__version__",
    "adapters",
    "bench_workload",
    "fit",
    "load_scene",
    "run",
    "scenes",
    "sweep",
]
