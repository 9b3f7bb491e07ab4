"""msc.Worlds: an error of one world of the batch names the world (its index, and its
scene's name where it has one), so that in a batch of many worlds the one to fix is
known. Each test puts one bad world at index 2 of 4."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest

import msc


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_a_bad_configuration_in_one_world_names_the_world(
    tiny: Path, backend: Literal["cpu", "gpu"]
) -> None:
    # A drag the scene's load accepts but its 0.1 kg particles cannot take named the key
    # but not the world, on either backend. The GPU batch checks its inputs before an
    # adapter is looked for, so this runs without a GPU.
    ok = msc.load_scene(tiny)
    bad = msc.load_scene(tiny, set={"world.drag": 1e6})
    with pytest.raises(msc.ConfigError, match=r"^world\.drag: in world 2 \(scene 'tiny'\), ") as e:
        msc.Worlds([ok, ok, bad, ok], backend=backend)
    assert e.value.key == "world.drag"


def test_a_world_of_the_wrong_type_names_the_world(tiny: Path) -> None:
    # A wrong type said what was expected and what it got, but not where in the list.
    ok = msc.load_scene(tiny)
    worlds: list[Any] = [ok, ok, "tiny", ok]
    with pytest.raises(TypeError, match=r"^world 2: expected a msc\.Scene.*got str"):
        msc.Worlds(worlds, backend="cpu")


def test_a_step_failure_in_one_world_names_the_world(tiny: Path) -> None:
    # Springs far too stiff for explicit Verlet's step: world 2's positions leave f64
    # and the next step's DDEF grid cannot be sized. The step failed without saying
    # which world; the error keeps its class and names the world.
    ddef = {"coulomb.method": "ddef"}
    ok = msc.load_scene(tiny, set=ddef)
    stiff = {**ddef, "integrator.method": "verlet", "material.stiffness": 1e9}
    bad = msc.load_scene(tiny, set=stiff)
    worlds = msc.Worlds([ok, ok, bad, ok], backend="cpu")
    with pytest.raises(
        msc.DivergenceError, match=r"^world 2 \(scene 'tiny'\): particle \d+: position is not finite"
    ):
        worlds.step(200)


@pytest.mark.parametrize(
    ("sets", "cls"),
    [
        # A configuration its particles cannot take.
        ({"world.drag": 1e6}, msc.ConfigError),
        # A stiffness past what the GPU's f32 holds.
        ({"material.stiffness": 1e39}, msc.GpuError),
    ],
)
def test_a_world_raises_the_class_its_scene_raises_alone(
    tiny: Path, sets: dict[str, Any], cls: type[msc.MscError]
) -> None:
    # One class per error, in a batch or alone; the batch's message names the world.
    # Both check their inputs before an adapter is looked for: runs without a GPU.
    ok = msc.load_scene(tiny)
    bad = msc.load_scene(tiny, set=sets)
    with pytest.raises(cls) as alone:
        msc.Simulator(bad, backend="gpu")
    with pytest.raises(cls, match=r"world 2 \(scene 'tiny'\)") as world:
        msc.Worlds([ok, ok, bad, ok], backend="gpu")
    assert type(world.value) is type(alone.value)
