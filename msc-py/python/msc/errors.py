"""The exceptions msc raises.

Every error is a :class:`MscError`; each subclass names a kind of failure and carries
the library's own message, which names what is wrong: the scene key, the particle or
spring index, the limit and its size. Input errors are also :class:`ValueError`\\ s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from pathlib import Path


class MscError(Exception):
    """Base class of every error msc raises.

    From :func:`msc.sweep` with runs that failed or diverged, ``rows`` is the rows of
    ``runs.csv``; None otherwise.
    """

    rows: Optional[list[dict[str, Any]]] = None


class SceneError(MscError, ValueError):
    """A scene file, a built-in scene name or an override (``set=``) is wrong."""


class ConfigError(SceneError):
    """A simulation setting is out of range, or forbids the operation asked for.

    ``key`` is the scene file's dotted key (``integrator.dt``, ``coulomb.method``).
    """

    key: str = ""


class ModelError(MscError, ValueError):
    """A system's arrays are wrong (shape, length, value); the message names the index."""


class GpuError(MscError, RuntimeError):
    """The GPU solver failed or cannot take the input: no adapter, a device limit, a
    value outside float32's range, a lost device."""


class DivergenceError(MscError, ArithmeticError):
    """The simulation became non-finite.

    From :func:`msc.run`: ``step`` and ``time`` say where, ``out`` holds the outputs so
    far (``summary.json`` has ``"finite": false``); None from the other calls.
    """

    step: Optional[int] = None
    time: Optional[float] = None
    out: Optional[Path] = None


class FitError(MscError):
    """A fit could not run (parameters, target frames) or stopped without converging.

    When it stopped, ``out`` is its ``fit.json`` and ``result`` that file's contents;
    both are None when it could not run.
    """

    out: Optional[Path] = None
    result: Optional[dict[str, Any]] = None


class HostMemoryError(MscError, MemoryError):
    """This machine's memory cannot hold what the call needs (a workload's size, a table
    of kept steps): the message names it, the bytes it needs and the bytes available.
    Found before the memory is allocated, so nothing was built and the process goes on."""


class SceneHostMemoryError(HostMemoryError, SceneError):
    """A scene whose mesh this machine's memory cannot hold, refused from its size before
    the mesh is built: a :class:`HostMemoryError` (``except MemoryError``) that is still
    the :class:`SceneError` (``ValueError``) it was before. A mesh past a GPU adapter's
    buffer limits is a plain :class:`SceneError`."""


class FitHostMemoryError(HostMemoryError, FitError):
    """A fit that needs more of this machine's memory than there is (the GPU adjoint's
    table of kept steps): a :class:`HostMemoryError` (``except MemoryError``) that is still
    the :class:`FitError` it was before; ``out`` and ``result`` are None."""


class BackendWarning(UserWarning):
    """``backend="auto"`` found no GPU able to run the system and used the CPU reference."""


__all__ = [
    "BackendWarning",
    "ConfigError",
    "DivergenceError",
    "FitError",
    "FitHostMemoryError",
    "GpuError",
    "HostMemoryError",
    "ModelError",
    "MscError",
    "SceneError",
    "SceneHostMemoryError",
]
