"""msc.Worlds: a batch of worlds reads as each world alone (CPU exactly; the GPU batch
bit for bit as the GPU solver on that world alone)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pytest

import msc


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_each_world_steps_as_it_would_alone(tiny: Path, backend: Literal["cpu", "gpu"], request: pytest.FixtureRequest) -> None:
    if backend == "gpu":
        request.getfixturevalue("gpu")
    a = msc.load_scene(tiny)
    b = msc.load_scene(tiny, set={"material.charge": 3e-6, "integrator.dt": 0.005})
    worlds = msc.Worlds([a, b], backend=backend)
    assert len(worlds) == 2 and (worlds.backend == "cpu") == (backend == "cpu")
    worlds.step(12)
    assert worlds.step_count == 12
    assert worlds.time(1) == pytest.approx(12 * 0.005)
    for w, scene in enumerate([a, b]):
        alone = msc.Simulator(scene, backend=backend)
        alone.step(12)
        np.testing.assert_array_equal(worlds.positions(w), alone.positions())
        np.testing.assert_array_equal(worlds.velocities(w), alone.velocities())
        assert worlds.energies(w) == alone.energies()
    assert worlds.positions(0, np.float32).dtype == np.float32
    with pytest.raises(IndexError, match="world 2"):
        worlds.positions(2)


def test_worlds_that_cannot_share_a_gpu_batch_are_refused(tiny: Path, gpu: None) -> None:
    a = msc.load_scene(tiny)
    b = msc.load_scene(tiny, set={"integrator.method": "verlet"})
    with pytest.raises(msc.GpuError, match="batch"):
        msc.Worlds([a, b], backend="gpu")
