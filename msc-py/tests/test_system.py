"""msc.System, msc.Config and msc.load_scene: arrays in and out with their shapes and
dtypes, and every input error naming what is wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import msc


def chain(n: int = 4) -> msc.System:
    x = np.zeros((n, 3))
    x[:, 0] = np.arange(n)
    springs = np.array([[i, i + 1] for i in range(n - 1)])
    return msc.System(x, 0.1, charges=[1e-6, 0.0] * (n // 2), springs=springs, stiffness=5.0)


def test_import_does_not_load_numpy_or_a_gpu() -> None:
    # What keeps `import msc` fast: numpy and wgpu are loaded on first use.
    code = "import sys, msc; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_system_arrays_have_their_shapes_and_dtypes() -> None:
    s = chain(4)
    assert len(s) == 4
    assert s.positions.shape == (4, 3) and s.positions.dtype == np.float64
    assert s.velocities.shape == (4, 3) and not s.velocities.any()
    assert s.masses.dtype == np.float64 and np.all(s.masses == 0.1)
    assert s.springs.shape == (3, 2) and s.springs.dtype == np.int64
    assert s.pinned.dtype == np.bool_ and not s.pinned.any()
    # The rest length defaults to each spring's initial length.
    np.testing.assert_array_equal(s.rest_length, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(s.stiffness, [5.0] * 3)
    np.testing.assert_array_equal(s.damping, [0.0] * 3)
    assert s.faces.shape == (0, 3)


def test_pins_by_mask_or_by_index_are_the_same() -> None:
    x = np.eye(3)
    by_index = msc.System(x, 1.0, pinned=[2])
    by_mask = msc.System(x, 1.0, pinned=np.array([False, False, True]))
    np.testing.assert_array_equal(by_index.pinned, by_mask.pinned)
    np.testing.assert_array_equal(by_index.pinned, [False, False, True])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(positions=np.zeros((3, 2)), masses=1.0), "shape (n, 3), got (3, 2)"),
        (dict(positions=np.eye(3), masses=[1.0, 1.0, -1.0]), "particle 2"),
        (dict(positions=np.eye(3), masses=[1.0, 1.0]), "masses has 2 entries, expected 3"),
        (dict(positions=[[0, 0, 0], [1, 0, float("nan")]], masses=1.0), "particle 1"),
        (dict(positions=np.eye(3), masses=1.0, springs=[[0, 1], [1, 9]], stiffness=1.0), "springs 1: index 9"),
        (dict(positions=np.eye(3), masses=1.0, springs=[[0, 1], [2, 2]], stiffness=1.0), "spring 1"),
        (dict(positions=np.eye(3), masses=1.0, springs=[[0, 1]]), "stiffness is required"),
        (dict(positions=np.eye(3), masses=1.0, springs=[[0, 1]], stiffness=-1.0), "spring 0"),
        (dict(positions=np.eye(3), masses=1.0, springs=[[0.5, 1]], stiffness=1.0), "integer"),
        (dict(positions=np.eye(3), masses=1.0, pinned=[3]), "pinned[0]: index 3"),
    ],
)
def test_a_bad_system_raises_model_error_naming_the_index(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(msc.ModelError) as e:
        msc.System(**kwargs)
    assert words in str(e.value)
    assert isinstance(e.value, ValueError)


def test_config_keywords_are_scene_keys_with_their_checks() -> None:
    c = msc.Config(integrator="verlet", dt=0.002, gravity=(0, 0, -9.81), softening=1e-3)
    assert (c.integrator, c.dt, c.gravity, c.softening) == ("verlet", 0.002, (0.0, 0.0, -9.81), 1e-3)
    # What is not given is the scene file's default.
    d = msc.Config()
    assert (d.solver, d.iterations, d.coulomb) == ("jacobi", 50, "all_pairs")
    assert msc.Config(set={"integrator.solver.method": "cg"}).solver == "cg"
    e = msc.Config(external_charges=[{"charge": -1e-6, "position": [0, 0, 2]}],
                   external_field={"kind": "uniform", "value": [0, 0, 1.0]})
    assert e.external_charges[0]["charge"] == -1e-6
    assert e.external_field == {"kind": "uniform", "value": (0.0, 0.0, 1.0)}
    with pytest.raises(msc.ConfigError) as err:
        msc.Config(dt=-1.0)
    assert "integrator.dt" in str(err.value)
    with pytest.raises(msc.SceneError, match="methd"):
        msc.Config(set={"integrator.solver.methd": "cg"})
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtt'"):
        msc.Config(dtt=0.1)  # type: ignore[call-arg]


def test_load_scene_applies_overrides_and_names_bad_ones(tiny: Path) -> None:
    s = msc.load_scene(tiny, set={"integrator.dt": 0.005, "material.charge": 2e-6})
    assert s.name == "tiny" and len(s.system) == 18
    assert s.config.dt == 0.005
    assert np.all(s.system.charges == 2e-6)
    assert msc.load_scene("torus", steps=7).config.steps == 7
    assert ("torus", ) == tuple(n for n, _ in msc.scenes() if n == "torus")
    with pytest.raises(msc.SceneError, match="neither a scene file nor a built-in"):
        msc.load_scene("no-such-scene")
    with pytest.raises(msc.SceneError, match="mesh.rngs"):
        msc.load_scene(tiny, set={"mesh.rngs": 4})


def test_bench_workloads_are_those_of_msc_bench() -> None:
    system, config = msc.bench_workload("cloth", 256, sweeps=12)
    assert len(system) == 256 and int(system.pinned.sum()) == 2
    assert (config.integrator, config.solver, config.iterations) == ("imex", "jacobi", 12)
    cloud, _ = msc.bench_workload("coulomb", 100)
    assert int((cloud.charges != 0).sum()) == 100
    # `msc bench --cloud sphere`: the same charges on the sphere of radius 0.5 m.
    sphere, _ = msc.bench_workload("coulomb", 100, cloud="sphere")
    assert np.array_equal(sphere.charges, cloud.charges)
    assert np.allclose(np.linalg.norm(sphere.positions, axis=1), 0.5, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="cloud must be one of"):
        msc.bench_workload("coulomb", 100, cloud="cone")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cloth has its own shape"):
        msc.bench_workload("cloth", 256, cloud="torus")
    # What the Coulomb cloud does not read is refused, not ignored (as `msc bench` does).
    with pytest.raises(ValueError, match="shape the \"cloth\" workload"):
        msc.bench_workload("coulomb", 100, sweeps=5)
    with pytest.raises(ValueError, match="shape the \"cloth\" workload"):
        msc.bench_workload("coulomb", 100, charged_fraction=0.5)
    with pytest.raises(msc.ModelError, match="at least 4 particles"):
        msc.bench_workload("cloth", 2)
    with pytest.raises(ValueError, match="workload"):
        msc.bench_workload("fluid", 10)  # type: ignore[arg-type]
