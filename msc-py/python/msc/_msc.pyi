"""Type stubs of the extension module msc._msc (re-exported by msc)."""

from __future__ import annotations

import os
from typing import Any, Literal, Mapping, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str

Backend = Literal["auto", "gpu", "cpu"]
PathLike = Union[str, "os.PathLike[str]"]
Overrides = Union[Mapping[str, Any], Sequence[str], None]
Float64 = npt.NDArray[np.float64]
Float32 = npt.NDArray[np.float32]
DType = Union[type, np.dtype[Any], str, None]
Vec3 = Tuple[float, float, float]

class Config:
    """How a system is simulated. Keywords are named after the scene file's keys
    (``dt`` is ``integrator.dt``, ``solver`` is ``integrator.solver.method``...);
    ``set`` takes any dotted key. What is not given takes the scene file's default."""

    def __init__(
        self,
        *,
        set: Overrides = None,
        external_charges: Optional[Sequence[Mapping[str, Any]]] = None,
        integrator: Optional[
            Literal["imex", "local_global", "symplectic_euler", "verlet"]
        ] = None,
        dt: Optional[float] = None,
        steps: Optional[int] = None,
        duration: Optional[float] = None,
        solver: Optional[Literal["jacobi", "block_jacobi", "chebyshev", "cg"]] = None,
        iterations: Optional[int] = None,
        omega: Optional[float] = None,
        tolerance: Optional[float] = None,
        rho: Optional[float] = None,
        local_global_iterations: Optional[int] = None,
        gravity: Union[Sequence[float], npt.NDArray[Any], None] = None,
        coulomb: Optional[Literal["all_pairs", "none", "ddef"]] = None,
        softening: Optional[float] = None,
        external_field: Optional[Mapping[str, Any]] = None,
    ) -> None: ...
    @property
    def integrator(self) -> str: ...
    @property
    def dt(self) -> float: ...
    @property
    def steps(self) -> int: ...
    @property
    def solver(self) -> str: ...
    @property
    def iterations(self) -> int: ...
    @property
    def omega(self) -> float: ...
    @property
    def tolerance(self) -> float: ...
    @property
    def rho(self) -> Optional[float]: ...
    @property
    def local_global_iterations(self) -> int: ...
    @property
    def gravity(self) -> Vec3: ...
    @property
    def coulomb(self) -> str: ...
    @property
    def softening(self) -> float: ...
    @property
    def external_charges(self) -> list[dict[str, Any]]: ...
    @property
    def external_field(self) -> Optional[dict[str, Any]]: ...

class System:
    """Particles and springs (SI units), checked on construction: an error names the
    offending particle or spring index."""

    def __init__(
        self,
        positions: npt.ArrayLike,
        masses: Union[float, npt.ArrayLike],
        *,
        velocities: Optional[npt.ArrayLike] = None,
        charges: Union[float, npt.ArrayLike, None] = None,
        springs: Optional[npt.ArrayLike] = None,
        stiffness: Union[float, npt.ArrayLike, None] = None,
        rest_length: Union[float, npt.ArrayLike, None] = None,
        damping: Union[float, npt.ArrayLike, None] = None,
        pinned: Optional[npt.ArrayLike] = None,
        faces: Optional[npt.ArrayLike] = None,
    ) -> None: ...
    def __len__(self) -> int: ...
    @property
    def positions(self) -> Float64: ...
    @property
    def velocities(self) -> Float64: ...
    @property
    def masses(self) -> Float64: ...
    @property
    def charges(self) -> Float64: ...
    @property
    def pinned(self) -> npt.NDArray[np.bool_]: ...
    @property
    def springs(self) -> npt.NDArray[np.int64]: ...
    @property
    def stiffness(self) -> Float64: ...
    @property
    def rest_length(self) -> Float64: ...
    @property
    def damping(self) -> Float64: ...
    @property
    def faces(self) -> npt.NDArray[np.int64]: ...
    def with_charges(self, charges: Union[float, npt.ArrayLike]) -> System: ...
    def with_stiffness(self, stiffness: Union[float, npt.ArrayLike]) -> System: ...

class Scene:
    """A scene file or built-in scene, loaded with its overrides."""

    @property
    def name(self) -> str: ...
    @property
    def system(self) -> System: ...
    @property
    def config(self) -> Config: ...
    @property
    def output_every(self) -> int: ...
    @property
    def toml(self) -> str: ...

class Device:
    """A GPU device opened once, shared by many simulators and batches."""

    def __init__(self, index: int = 0, *, allow_software: bool = True) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def info(self) -> dict[str, Any]: ...

Source = Union[Scene, System, Tuple[System, Config]]

class Simulator:
    """One system on the GPU solver or the CPU reference. GPU steps return once
    submitted; reads wait for them. Calls from several threads take turns."""

    def __init__(
        self,
        source: Source,
        config: Optional[Config] = None,
        backend: Backend = "auto",
        *,
        device: Optional[Device] = None,
    ) -> None: ...
    def __len__(self) -> int: ...
    def step(self, n: int = 1) -> None: ...
    def synchronize(self) -> None: ...
    @overload
    def positions(self) -> Float64: ...
    @overload
    def positions(self, dtype: DType) -> npt.NDArray[Any]: ...
    @overload
    def velocities(self) -> Float64: ...
    @overload
    def velocities(self, dtype: DType) -> npt.NDArray[Any]: ...
    def energies(self) -> dict[str, float]: ...
    def check_finite(self) -> None: ...
    def set_state(self, positions: npt.ArrayLike, velocities: npt.ArrayLike) -> None: ...
    def set_charges(self, charges: Union[float, npt.ArrayLike]) -> None: ...
    def set_stiffness(self, stiffness: Union[float, npt.ArrayLike]) -> None: ...
    def set_parameters(self, system: System) -> None: ...
    @property
    def time(self) -> float: ...
    @property
    def step_count(self) -> int: ...
    @property
    def backend(self) -> str: ...
    @property
    def system(self) -> System: ...
    @property
    def config(self) -> Config: ...

class Worlds:
    """Several systems stepped together (one GPU batch, or the CPU reference in turn)."""

    def __init__(
        self,
        worlds: Sequence[Source],
        backend: Backend = "auto",
        *,
        device: Optional[Device] = None,
    ) -> None: ...
    def __len__(self) -> int: ...
    def step(self, n: int = 1) -> None: ...
    @overload
    def positions(self, w: int) -> Float64: ...
    @overload
    def positions(self, w: int, dtype: DType) -> npt.NDArray[Any]: ...
    @overload
    def velocities(self, w: int) -> Float64: ...
    @overload
    def velocities(self, w: int, dtype: DType) -> npt.NDArray[Any]: ...
    def energies(self, w: int) -> dict[str, float]: ...
    def time(self, w: int) -> float: ...
    @property
    def step_count(self) -> int: ...
    @property
    def backend(self) -> str: ...

def adapters(*, allow_software: bool = True) -> list[dict[str, Any]]: ...
def bench_workload(
    name: Literal["cloth", "coulomb"],
    n: int,
    *,
    sweeps: int = 20,
    charged_fraction: float = 0.0,
    cloud: Literal["cube", "sphere", "torus", "sheet"] = "cube",
) -> Tuple[System, Config]: ...
def scenes() -> list[Tuple[str, str]]: ...
def load_scene(
    scene: PathLike, set: Overrides = None, steps: Optional[int] = None
) -> Scene: ...
def run(
    scene: PathLike,
    *,
    out: Optional[PathLike] = None,
    set: Overrides = None,
    steps: Optional[int] = None,
    backend: Backend = "auto",
) -> dict[str, Any]: ...
def sweep(
    scene: PathLike,
    vary: Mapping[str, Union[Sequence[Any], npt.NDArray[Any]]],
    *,
    out: PathLike,
    set: Overrides = None,
    steps: Optional[int] = None,
    backend: Backend = "auto",
    batch: bool = True,
    check: bool = True,
) -> list[dict[str, Any]]: ...
def fit(
    scene: PathLike,
    target: PathLike,
    params: Union[str, Sequence[str]],
    *,
    init: Union[
        Sequence[Union[float, Sequence[float], npt.NDArray[Any]]], npt.NDArray[Any], None
    ] = None,
    set: Overrides = None,
    frames: Literal["all", "last"] = "all",
    starts: int = 1,
    max_iters: int = 50,
    optimizer: Literal["auto", "lm", "lbfgs", "adam"] = "auto",
    learning_rate: Optional[float] = None,
    window: Optional[int] = None,
    exact_solves: bool = False,
    backend: Backend = "auto",
    out: Optional[PathLike] = None,
) -> dict[str, Any]: ...
