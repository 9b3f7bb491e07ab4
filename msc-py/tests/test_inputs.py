"""Awkward inputs through the Python API: array layouts, paths and values that look like
options, negative counts, arguments given twice, out-of-range sizes. Each is read right
or refused with a typed exception (never a panic, a silently dropped argument or an
OverflowError that `except ValueError` misses), and the stub types what the code takes."""

from __future__ import annotations

import _thread
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import msc

X = np.array([[0.0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 1, 0]])


def test_fortran_ordered_and_transposed_arrays_are_read_by_index() -> None:
    # Their memory runs down the columns: read in memory order, they scramble the axes.
    for layout in [np.asfortranarray(X), np.ascontiguousarray(X.T).T, X[:, ::-1][:, ::-1]]:
        s = msc.System(layout, 1.0, velocities=layout)
        np.testing.assert_array_equal(s.positions, X)
        np.testing.assert_array_equal(s.velocities, X)
    sim = msc.Simulator(msc.System(X + 5, 1.0), backend="cpu")
    sim.set_state(np.asfortranarray(X), np.asfortranarray(2 * X))
    np.testing.assert_array_equal(sim.positions(), X)
    np.testing.assert_array_equal(sim.velocities(), 2 * X)


def test_a_pair_and_a_config_are_two_configurations() -> None:
    system = msc.System(X, 1.0)
    with pytest.raises(TypeError, match="carries its configuration"):
        msc.Simulator((system, msc.Config(dt=0.5)), msc.Config(dt=0.02), backend="cpu")
    # A Scene's configuration is replaced by config= (what config= is for).
    scene = msc.load_scene("torus")
    assert msc.Simulator(scene, msc.Config(dt=0.02), backend="cpu").config.dt == 0.02


def test_config_keywords_and_set_must_not_set_the_same_key() -> None:
    with pytest.raises(msc.ConfigError, match="give each setting once") as e:
        msc.Config(dt=0.1, set={"integrator.dt": 0.2})
    assert e.value.key == "integrator.dt"
    # A table in set= that holds the keyword's key.
    with pytest.raises(msc.ConfigError, match="give each setting once"):
        msc.Config(integrator="verlet", set={"integrator": {"method": "imex", "dt": 0.5}})
    # One that leaves it out merges, as `msc run --set` does: both are taken.
    c = msc.Config(integrator="verlet", set={"integrator": {"dt": 0.5}})
    assert (c.integrator, c.dt) == ("verlet", 0.5)
    with pytest.raises(msc.ConfigError, match="give each setting once"):
        msc.Config(external_field={"kind": "uniform", "value": [0, 0, 1]},
                   set=["external_field.kind=\"vortex\""])
    # Neighbouring keys are not the same key.
    c = msc.Config(coulomb="ddef", softening=1e-3, set={"coulomb.samples": 4000})
    assert (c.coulomb, c.softening) == ("ddef", 1e-3)


def test_config_takes_gravity_as_an_array() -> None:
    # What mypy checks against the stub, which took only a Sequence[float].
    g = msc.Config(gravity=np.array([0.0, 0.0, -9.81]))
    assert g.gravity == (0.0, 0.0, -9.81)


def test_config_errors_carry_the_key_they_name(tiny: Path, tmp_path: Path) -> None:
    with pytest.raises(msc.ConfigError) as e:
        msc.load_scene(tiny, steps=0)
    assert e.value.key == "integrator.steps"
    with pytest.raises(msc.ConfigError) as e:
        msc.run(tiny, out=tmp_path / "r", steps=0, backend="cpu")
    assert e.value.key == "integrator.steps"
    with pytest.raises(msc.ConfigError) as e:
        msc.Config(set={"mesh.resolution": [4, 4]})
    assert e.value.key == "mesh.resolution"
    coincident = msc.System(np.zeros((2, 3)), 1.0, charges=1e-6)
    with pytest.raises(msc.ConfigError) as e:
        msc.Simulator(coincident, backend="cpu")
    assert e.value.key == "coulomb.softening"


def test_error_attributes_exist_when_a_call_does_not_set_them() -> None:
    stiff = msc.System(X[:2], 1e-3, springs=[[0, 1]], stiffness=1e9, rest_length=0.5)
    sim = msc.Simulator(stiff, msc.Config(integrator="symplectic_euler", dt=0.1), backend="cpu")
    sim.step(200)
    with pytest.raises(msc.DivergenceError) as e:
        sim.check_finite()
    assert (e.value.out, e.value.step, e.value.time, e.value.rows) == (None, None, None, None)
    assert (msc.FitError("x").out, msc.FitError("x").result) == (None, None)


def test_paths_and_values_that_start_with_a_dash_are_values(tiny: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("-tiny.toml").write_text(tiny.read_text())
    s = msc.run("-tiny.toml", out="-run", backend="cpu",
                set={"gravity": [0, 0, -1.0], "output.frames": "ply"})
    assert s["steps"] == 20 and Path("-run", "summary.json").exists()
    rows = msc.sweep("-tiny.toml", {"material.charge": [-1e-6]}, out="-sweep", steps=2, backend="cpu")
    assert [r["material.charge"] for r in rows] == [-1e-6]
    # An option's name as the scene is a scene name, not the command's --help.
    with pytest.raises(msc.SceneError, match="--help"):
        msc.run("--help", out="x", backend="cpu")
    # A negative number reaches the fit's own check.
    with pytest.raises(msc.FitError, match="learning-rate"):
        msc.fit(tiny, "-run", "charge", optimizer="adam", learning_rate=-1.0, out="-fit", backend="cpu")


def test_one_string_where_a_list_of_values_goes_is_refused(tiny: Path, tmp_path: Path) -> None:
    # Iterated, "none" would be four runs named n, o, n, e.
    with pytest.raises(TypeError, match="not one string"):
        msc.sweep(tiny, {"coulomb.method": "none"}, out=tmp_path / "s", backend="cpu")
    with pytest.raises(TypeError, match="not one string"):
        msc.fit(tiny, tmp_path, "charge", init="1e-6", backend="cpu")  # type: ignore[arg-type]


def test_negative_step_counts_are_value_errors(tiny: Path, tmp_path: Path) -> None:
    sim = msc.Simulator(msc.load_scene(tiny), backend="cpu")
    worlds = msc.Worlds([msc.load_scene(tiny)], backend="cpu")
    calls: list[Callable[[], object]] = [
        lambda: sim.step(-1), lambda: worlds.step(-1), lambda: msc.load_scene(tiny, steps=-1),
        lambda: msc.run(tiny, out=tmp_path / "r", steps=-1, backend="cpu")]
    for call in calls:
        with pytest.raises(ValueError, match="must not be negative"):
            call()
    assert sim.step_count == 0 and not (tmp_path / "r").exists()
    with pytest.raises(OverflowError):
        sim.step(2**64)


def test_worlds_take_any_sequence_and_refuse_a_negative_index(tiny: Path) -> None:
    scenes: list[msc.Scene] = [msc.load_scene(tiny), msc.load_scene(tiny)]
    worlds = msc.Worlds(scenes, backend="cpu")  # list[Scene]: the stub's Sequence takes it
    again = msc.Worlds(tuple(scenes), backend="cpu")
    worlds.step(2)
    again.step(2)
    np.testing.assert_array_equal(worlds.positions(1), again.positions(1))
    calls: list[Callable[[], object]] = [
        lambda: worlds.positions(-1), lambda: worlds.velocities(-1),
        lambda: worlds.energies(-1), lambda: worlds.time(-1)]
    for call in calls:
        with pytest.raises(IndexError, match="world -1 of a batch of 2"):
            call()
    with pytest.raises(TypeError, match="sequence of Scenes"):
        msc.Worlds(scenes[0], backend="cpu")  # type: ignore[arg-type]


def test_bench_workload_takes_the_ranges_msc_bench_takes() -> None:
    with pytest.raises(ValueError, match="sweeps must be at least 1"):
        msc.bench_workload("cloth", 256, sweeps=0)
    for f in [-0.5, 1.5, float("nan")]:
        with pytest.raises(ValueError, match="fraction from 0 to 1"):
            msc.bench_workload("cloth", 256, charged_fraction=f)
    system, _ = msc.bench_workload("cloth", 256, charged_fraction=1.0)
    assert int((system.charges != 0).sum()) == 256


def test_a_coulomb_workload_larger_than_a_system_is_a_model_error() -> None:
    # Refused before its buffers are allocated (a capacity overflow panicked there).
    for n in [2**31, 2**62]:
        with pytest.raises(msc.ModelError, match="particles"):
            msc.bench_workload("coulomb", n)


def _mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes, as the crate reads it; None where unknown."""
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def test_a_workload_past_the_host_memory_is_a_memory_error() -> None:
    # 2047 Mi charges (under the particle limit) at the loader's 600 bytes each: about
    # 1.3 TB, refused by its size before the cloud's arrays are allocated. Unchecked where
    # MemAvailable is unknown (the allocation would abort the process), so skipped there.
    n = 2047 * 2**20
    needed = n * 600
    available = _mem_available()
    if available is None or available >= needed:
        pytest.skip(f"MemAvailable is {available} bytes: not past it")
    with pytest.raises(MemoryError, match=f"size {n}: .*needs {needed} bytes") as e:
        msc.bench_workload("coulomb", n)
    assert isinstance(e.value, msc.HostMemoryError)
    assert isinstance(e.value, msc.MscError)
    # The size the host holds is built as before.
    system, _ = msc.bench_workload("coulomb", 64)
    assert len(system) == 64


def test_a_scene_past_the_host_memory_is_a_memory_error_and_still_a_scene_error() -> None:
    # A 40000 x 40000 cloth: 1.6e9 particles (under the particle limit) at the loader's 600
    # bytes each, without its springs, is at least 960 GB. It raised SceneError alone,
    # which 'except MemoryError' misses; it stays one for the callers that catch it.
    needed = 40000**2 * 600
    available = _mem_available()
    if available is None or available >= needed:
        pytest.skip(f"MemAvailable is {available} bytes: not past it")
    with pytest.raises(MemoryError, match="mesh.resolution: the grid mesh has 1600000000 "
                       "particles .*host memory") as e:
        msc.load_scene("cloth", set={"mesh.resolution": [40000, 40000]})
    assert isinstance(e.value, msc.SceneHostMemoryError)
    assert isinstance(e.value, msc.HostMemoryError)
    assert isinstance(e.value, msc.SceneError)
    assert isinstance(e.value, ValueError)
    # Any other scene error is not a MemoryError.
    with pytest.raises(msc.SceneError, match="mesh.resolution") as other:
        msc.load_scene("cloth", set={"mesh.resolution": [1]})
    assert not isinstance(other.value, MemoryError)


def test_a_fit_short_of_host_memory_is_caught_as_a_fit_error_and_a_memory_error() -> None:
    # No Python fit reaches it here (the GPU adjoint's kept steps; the Rust test
    # errors::tests::a_host_memory_shortfall_inside_a_fit_is_a_memory_error picks the
    # class): the class both handlers catch, with FitError's attributes unset.
    e = msc.FitHostMemoryError("keeping the starts of 1000000 more steps: needs 2 bytes")
    for handler in [msc.FitError, msc.HostMemoryError, MemoryError, msc.MscError]:
        assert isinstance(e, handler)
    assert not isinstance(e, ValueError)
    assert e.out is None and e.result is None


def test_per_spring_values_without_springs_are_refused() -> None:
    for kw in ["stiffness", "rest_length", "damping"]:
        with pytest.raises(msc.ModelError, match=f"{kw} is given without springs"):
            msc.System(X, 1.0, **{kw: 1.0})
    # An empty springs array is springs given: a builder may pass its stiffness anyway.
    s = msc.System(X, 1.0, springs=np.zeros((0, 2), dtype=int), stiffness=5.0)
    assert s.springs.shape == (0, 2)


def test_ragged_or_unrepresentable_arrays_are_model_errors_naming_the_argument() -> None:
    with pytest.raises(msc.ModelError, match="positions: not an array of numbers"):
        msc.System([[0, 0, 0], [1, 0]], 1.0)
    with pytest.raises(msc.ModelError, match="springs: not an array"):
        msc.System(X, 1.0, springs=[[0, 1], [1]], stiffness=1.0)
    with pytest.raises(msc.ModelError, match="masses: not an array of numbers"):
        msc.System(X, 10**400)
    with pytest.raises(TypeError, match="positions: expected an array of numbers, got dict"):
        msc.System({}, 1.0)  # type: ignore[arg-type]


def test_sweep_and_fit_take_numpy_arrays_of_values(tiny: Path, tmp_path: Path) -> None:
    # What mypy checks against the stub, which took only sequences.
    rows = msc.sweep(tiny, {"material.charge": np.array([1e-6, 2e-6])}, out=tmp_path / "s",
                     steps=2, backend="cpu")
    assert [r["material.charge"] for r in rows] == [1e-6, 2e-6]
    # The init array is taken; the fit goes on to find that this folder has no frames.
    with pytest.raises(msc.FitError, match="no frames"):
        msc.fit(tiny, tmp_path, "charge", init=np.array([1e-6]), backend="cpu")


def test_string_values_of_a_sweep_come_back_as_strings(tiny: Path, tmp_path: Path) -> None:
    # runs.csv has no types: "007" read back as a number was 7, "true" True.
    names = ["007", "true", "1e3"]
    rows = msc.sweep(tiny, {"name": names, "material.charge": [1e-6]}, out=tmp_path / "s",
                     steps=2, backend="cpu")
    assert [r["name"] for r in rows] == names
    assert [r["material.charge"] for r in rows] == [1e-6] * 3


def test_other_negative_counts_are_value_errors(tiny: Path) -> None:
    calls: list[Callable[[], object]] = [
        lambda: msc.Device(-1), lambda: msc.bench_workload("cloth", -1),
        lambda: msc.bench_workload("cloth", 256, sweeps=-1),
        lambda: msc.fit(tiny, tiny, "charge", starts=-1),
        lambda: msc.fit(tiny, tiny, "charge", max_iters=-1),
        lambda: msc.fit(tiny, tiny, "charge", window=-1)]
    for call in calls:
        with pytest.raises(ValueError, match="must not be negative"):
            call()


def test_a_bool_is_not_a_count_or_an_index(tiny: Path, tmp_path: Path) -> None:
    # True is the int 1 to Python: step(True) ran one step, positions(True) read world 1.
    sim = msc.Simulator(msc.load_scene(tiny), backend="cpu")
    worlds = msc.Worlds([msc.load_scene(tiny), msc.load_scene(tiny)], backend="cpu")
    calls: list[Callable[[], object]] = [
        lambda: sim.step(True), lambda: worlds.step(True), lambda: worlds.positions(True),
        lambda: worlds.velocities(False), lambda: worlds.energies(True), lambda: worlds.time(True),
        lambda: msc.load_scene(tiny, steps=True), lambda: msc.Device(False),
        lambda: msc.bench_workload("cloth", True), lambda: msc.bench_workload("cloth", 256, sweeps=True),
        lambda: msc.run(tiny, out=tmp_path / "r", steps=True, backend="cpu"),
        lambda: msc.fit(tiny, tiny, "charge", starts=True),
        lambda: msc.fit(tiny, tiny, "charge", max_iters=True),
        lambda: msc.fit(tiny, tiny, "charge", window=True)]
    for call in calls:
        with pytest.raises(TypeError, match="got the bool (True|False)"):
            call()
    assert sim.step_count == 0 and worlds.step_count == 0 and not (tmp_path / "r").exists()
    # NumPy integers are still counts (the stub types the plain int).
    sim.step(np.int64(2))  # type: ignore[arg-type]
    assert sim.step_count == 2


def test_worlds_keep_each_worlds_time_after_a_step_fails() -> None:
    # World 1 diverges under DDEF partway through a chunk of steps: world 0 has finished
    # that chunk; the batch's step count was the count before it, for every world.
    ok = msc.load_scene("torus")
    bad = msc.load_scene("torus", set={"coulomb.method": "ddef", "material.charge": 1e-3,
                                       "integrator.method": "symplectic_euler", "integrator.dt": 50.0})
    worlds = msc.Worlds([ok, bad], backend="cpu")
    with pytest.raises(msc.DivergenceError):
        worlds.step(200)
    done = round(worlds.time(0) / ok.config.dt)
    alone = msc.Simulator(ok, backend="cpu")
    alone.step(done)
    np.testing.assert_array_equal(worlds.positions(0), alone.positions())
    assert worlds.step_count == round(worlds.time(1) / bad.config.dt) < done


def test_complex_arrays_and_huge_unsigned_indices_are_named() -> None:
    pos = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]])
    # numpy casts complex to float dropping the imaginary part, with only a warning.
    with pytest.raises(msc.ModelError, match="positions must be real numbers"):
        msc.System(pos + 1j, np.ones(3))
    with pytest.raises(msc.ModelError, match="charges must be real numbers"):
        msc.System(pos, np.ones(3), charges=np.ones(3, dtype=complex))
    # An index past int64 wrapped negative in the message.
    springs = np.array([[0, 1], [1, 2**63]], dtype=np.uint64)
    with pytest.raises(msc.ModelError, match=f"springs 1: index {2**63} is out of range"):
        msc.System(pos, np.ones(3), springs=springs, stiffness=1.0)


def test_ctrl_c_abandons_a_long_build() -> None:
    # A 4M-particle cloth takes seconds to build; Ctrl-C answered only once it was built.
    timer = threading.Timer(0.3, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            msc.bench_workload("cloth", 4_000_000)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 1.5
    system, _ = msc.bench_workload("cloth", 100)
    assert len(system) == 100


def test_values_numpy_would_reinterpret_as_numbers_are_type_errors() -> None:
    # numpy reads None as NaN, "1.5" as 1.5, True as 1 and a date as its tick count: each
    # was taken as a number (masses=None failed as "got NaN", a string array of
    # positions was parsed, a boolean mask passed as masses weighed 1 kg).
    sim = msc.Simulator(msc.System(X, 1.0, springs=[[0, 1]], stiffness=1.0), backend="cpu")
    bad: list[tuple[str, Callable[[], object]]] = [
        ("masses", lambda: msc.System(X, None)),  # type: ignore[arg-type]
        ("masses", lambda: msc.System(X, "1.5")),
        ("masses", lambda: msc.System(X, b"1.5")),
        ("masses", lambda: msc.System(X, True)),
        ("masses", lambda: msc.System(X, np.ones(4, dtype=bool))),
        ("masses", lambda: msc.System(X, ["1", "2", "3", "4"])),
        ("positions", lambda: msc.System(None, 1.0)),  # type: ignore[arg-type]
        ("positions", lambda: msc.System(X.astype(str), 1.0)),
        ("positions", lambda: msc.System(X.astype(bool), 1.0)),
        ("positions", lambda: msc.System(np.zeros((4, 3), dtype="datetime64[s]"), 1.0)),
        ("positions", lambda: msc.System(np.ones((4, 3), dtype="timedelta64[s]"), 1.0)),
        ("positions", lambda: msc.System(np.array([[None, 0, 0]] * 4, dtype=object), 1.0)),
        ("positions", lambda: msc.System(np.array([["1", 0, 0]] * 4, dtype=object), 1.0)),
        ("velocities", lambda: msc.System(X, 1.0, velocities=X.astype(str))),
        ("charges", lambda: msc.System(X, 1.0, charges="1e-6")),
        ("charges", lambda: msc.System(X, 1.0).with_charges(None)),  # type: ignore[arg-type]
        ("charges", lambda: sim.set_charges(None)),  # type: ignore[arg-type]
        ("stiffness", lambda: sim.set_stiffness("3")),
        ("stiffness", lambda: msc.System(X, 1.0, springs=[[0, 1]], stiffness=True)),
        ("positions", lambda: sim.set_state(None, X)),  # type: ignore[arg-type]
        ("velocities", lambda: sim.set_state(X, X.astype(bool))),
    ]
    for what, call in bad:
        with pytest.raises(TypeError, match=f"^{what}: expected numbers, got "):
            call()
    assert sim.system.stiffness.tolist() == [1.0] and sim.step_count == 0
    # Integer, float32, object (of numbers) and strided arrays are numbers.
    for pos in [X.astype(int), X.astype(np.float32), X.astype(object), np.repeat(X, 2, 0)[::2]]:
        s = msc.System(pos, np.array([1, 2, 3, 4], dtype=np.uint8), charges=np.float32(1e-6))
        np.testing.assert_array_equal(s.positions, X)
        np.testing.assert_array_equal(s.masses, [1, 2, 3, 4])


def test_a_value_beyond_f32_in_one_world_names_the_world() -> None:
    # The GPU batch named the particle but not which world of the batch held it. The
    # inputs are checked before an adapter is looked for, so this runs without a GPU.
    ok = msc.System(X, 1.0)
    far = msc.System(np.where(X == 2, 1e30, X), 1.0)
    with pytest.raises(msc.GpuError, match=r"^world 2, position of particle 2 \(x\) = 1e30 "):
        msc.Worlds([ok, ok, far, ok], backend="gpu")


def test_empty_vary_and_params_name_the_python_argument(tiny: Path, tmp_path: Path) -> None:
    # They raised the command-line parser's message, naming --vary and --param.
    empty: list[tuple[str, Callable[[], object]]] = [
        ("vary is empty", lambda: msc.sweep(tiny, {}, out=tmp_path / "s", backend="cpu")),
        ('vary\\["material.charge"\\] is empty', lambda: msc.sweep(
            tiny, {"material.charge": []}, out=tmp_path / "s", backend="cpu")),
        ("params is empty", lambda: msc.fit(tiny, tmp_path, [], backend="cpu")),
        ("params is empty", lambda: msc.fit(tiny, tmp_path, (), backend="cpu")),
        ("params\\[1\\] is an empty name", lambda: msc.fit(tiny, tmp_path, ["charge", ""],
                                                         backend="cpu")),
    ]
    for what, call in empty:
        with pytest.raises(ValueError, match=f"^{what}") as e:
            call()
        assert "--" not in str(e.value)
    assert not (tmp_path / "s").exists()


def test_settings_and_arguments_of_the_wrong_type_are_named(tiny: Path, tmp_path: Path) -> None:
    # Each raised Python's own message, naming neither the argument nor the key.
    too_large: list[tuple[str, Callable[[], object]]] = [
        ("integrator.steps", lambda: msc.Config(steps=2**70)),
        ("integrator.steps", lambda: msc.load_scene(tiny, set={"integrator.steps": 2**70})),
        ("integrator.steps", lambda: msc.sweep(tiny, {"integrator.steps": [2**64]},
                                               out=tmp_path / "s", backend="cpu")),
    ]
    for key, call in too_large:
        with pytest.raises(OverflowError, match=f"^{key} = .* is too large"):
            call()
    wrong_type: list[tuple[str, Callable[[], object]]] = [
        ("set= keys", lambda: msc.Config(set={1: 2})),  # type: ignore[dict-item]
        ("vary keys", lambda: msc.sweep(tiny, {1: [1]}, out=tmp_path / "s", backend="cpu")),  # type: ignore[dict-item]
        ('vary\\["material.charge"\\]', lambda: msc.sweep(
            tiny, {"material.charge": None}, out=tmp_path / "s", backend="cpu")),  # type: ignore[dict-item]
        ("params", lambda: msc.fit(tiny, tmp_path, 5, backend="cpu")),  # type: ignore[arg-type]
        ("scene", lambda: msc.load_scene(b"torus")),  # type: ignore[arg-type]
        ("scene", lambda: msc.run(None, out=tmp_path / "r", backend="cpu")),  # type: ignore[arg-type]
        ("out", lambda: msc.run(tiny, out=5, backend="cpu")),  # type: ignore[arg-type]
        ("out", lambda: msc.sweep(tiny, {"material.charge": [1e-6]}, out=None)),  # type: ignore[arg-type]
        ("target", lambda: msc.fit(tiny, None, "charge", backend="cpu")),  # type: ignore[arg-type]
    ]
    for what, call in wrong_type:
        with pytest.raises(TypeError, match=f"^{what}"):
            call()
    assert not (tmp_path / "s").exists() and not (tmp_path / "r").exists()


def test_a_float32_read_of_values_float32_cannot_hold_is_refused() -> None:
    # The CPU reference's f64 state was cast to float32 on the way out: 1e300 came back
    # as inf (the Simulator without a word, Worlds with only numpy's RuntimeWarning).
    far = X * 1e300
    sim = msc.Simulator(msc.System(far, 1.0, velocities=-far), backend="cpu")
    worlds = msc.Worlds([msc.System(far, 1.0, velocities=-far)], backend="cpu")
    calls: list[tuple[str, Callable[[], object]]] = [
        ("position", lambda: sim.positions(np.float32)),
        ("velocity", lambda: sim.velocities("float32")),
        ("position", lambda: worlds.positions(0, np.float32)),
        ("velocity", lambda: worlds.velocities(0, np.float32)),
    ]
    for what, call in calls:
        with pytest.raises(ValueError, match=f"{what} of particle 1 \\(x\\) = -?1e300 does not fit float32"):
            call()
    # float64 reads them as they are; float32 reads what it can hold.
    np.testing.assert_array_equal(sim.positions(), far)
    np.testing.assert_array_equal(worlds.velocities(0), -far)
    sim.set_state(np.where(X == 1, np.float32(3.5), 0.0), np.zeros((4, 3)))
    assert sim.positions(np.float32).tolist() == np.where(X == 1, 3.5, 0.0).tolist()


def test_huge_arrays_are_refused_before_they_are_copied() -> None:
    # A broadcast view costs no memory, but its copy did: 2**40 rows aborted the
    # interpreter ("memory allocation of 26388279066624 bytes failed"), no exception.
    rows = np.broadcast_to(np.zeros(3), (2**40, 3))
    with pytest.raises(msc.ModelError, match=f"positions has {2**40} rows: more than the limit"):
        msc.System(rows, 1.0)
    sim = msc.Simulator(msc.System(X, 1.0), backend="cpu")
    with pytest.raises(msc.ModelError, match=f"velocities has {2**40} rows: more than the limit"):
        sim.set_state(X, rows)
    # numpy's own copy of the indices refuses them first.
    pairs = np.broadcast_to(np.array([0, 1]), (2**40, 2))
    with pytest.raises(MemoryError):
        msc.System(X, 1.0, springs=pairs, stiffness=1.0)
    mask = np.broadcast_to(True, (2**40,))
    with pytest.raises(msc.ModelError, match=f"pinned has {2**40} entries, expected 4"):
        msc.System(X, 1.0, pinned=mask)


@pytest.mark.filterwarnings("error")
def test_masked_entries_are_refused_naming_the_argument_and_the_entry() -> None:
    # numpy.asarray drops the mask: the values under it were read as if given.
    masses = np.ma.masked_array([1.0, 2.0, 3.0, 4.0], mask=[False, False, True, False])
    with pytest.raises(msc.ModelError, match=r"masses: a masked array with 1 masked entries \(the first at \[2\]\)"):
        msc.System(X, masses)
    positions = np.ma.masked_array(X, mask=np.arange(12).reshape(4, 3) == 4)
    with pytest.raises(msc.ModelError, match=r"positions: a masked array with 1 .*\[1, 1\]"):
        msc.System(positions, 1.0)
    with pytest.raises(msc.ModelError, match="masses: a masked array"):
        msc.System(X, np.ma.masked)
    springs = np.ma.masked_array([[0, 1], [1, 2]], mask=[[False, False], [False, True]])
    with pytest.raises(msc.ModelError, match=r"springs: a masked array .*\[1, 1\]"):
        msc.System(X, 1.0, springs=springs, stiffness=1.0)
    pinned = np.ma.masked_array([True, False, False, False], mask=[True, False, False, False])
    with pytest.raises(msc.ModelError, match=r"pinned: a masked array .*\[0\]"):
        msc.System(X, 1.0, pinned=pinned)
    sim = msc.Simulator(msc.System(X, 1.0), backend="cpu")
    with pytest.raises(msc.ModelError, match="velocities: a masked array"):
        sim.set_state(X, np.ma.masked_array(X, mask=X == 1))
    # With nothing masked, a masked array is its values.
    s = msc.System(np.ma.masked_array(X), np.ma.masked_array([1.0, 2, 3, 4]))
    np.testing.assert_array_equal(s.positions, X)
    np.testing.assert_array_equal(s.masses, [1.0, 2, 3, 4])


def test_a_pinned_index_past_int64_is_named() -> None:
    # Its conversion to int64 raised pyo3's OverflowError, naming neither.
    pinned = np.array([1, 2**64 - 1], dtype=np.uint64)
    with pytest.raises(msc.ModelError, match=f"pinned\\[1\\]: index {2**64 - 1} is out of range"):
        msc.System(X, 1.0, pinned=pinned)
    assert msc.System(X, 1.0, pinned=np.array([3], dtype=np.uint64)).pinned.tolist() == [
        False, False, False, True]


def test_a_world_index_past_int64_is_an_index_error() -> None:
    # It raised pyo3's OverflowError "Python int too large to convert to C long".
    system = msc.System(X, 1.0)
    worlds = msc.Worlds([system, system], backend="cpu")
    calls: list[Callable[[], object]] = [
        lambda: worlds.positions(2**70), lambda: worlds.velocities(2**70),
        lambda: worlds.energies(2**70), lambda: worlds.time(2**70)]
    for call in calls:
        with pytest.raises(IndexError, match=f"world {2**70} of a batch of 2"):
            call()


@pytest.mark.filterwarnings("error")
def test_long_double_settings_are_read_as_floats() -> None:
    # numpy.longdouble's tolist() is another longdouble: converting it recursed until
    # the stack overflowed and the interpreter died (a segfault).
    assert msc.Config(dt=np.longdouble(0.01)).dt == 0.01  # type: ignore[arg-type]
    gravity = np.array([0.0, 0.0, -9.75], dtype=np.longdouble)
    assert msc.Config(gravity=gravity).gravity == (0.0, 0.0, -9.75)
    assert msc.Config(set={"integrator.dt": np.longdouble(0.02)}).dt == 0.02
    with pytest.raises(TypeError, match="integrator.dt: a clongdouble has no scene-file"):
        msc.Config(dt=np.clongdouble(0.01))  # type: ignore[arg-type]


def test_a_setting_that_holds_itself_or_bytes_is_refused() -> None:
    # A list or dict holding itself recursed until the stack overflowed (a segfault).
    cyclic: list[object] = [0.0, 0.0]
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="gravity: nested more than 64 levels deep"):
        msc.Config(gravity=cyclic)  # type: ignore[arg-type]
    table: dict[str, object] = {"dt": 0.01}
    table["solver"] = table
    with pytest.raises(ValueError, match="nested more than 64 levels deep"):
        msc.Config(set={"integrator": table})
    # Iterated, bytes were numbers: gravity=b"abc" was (97, 98, 99).
    with pytest.raises(TypeError, match="gravity: bytes have no scene-file"):
        msc.Config(gravity=b"abc")


def test_a_path_with_a_nul_byte_or_not_utf8_is_a_value_error_naming_it(tmp_path: Path) -> None:
    # A NUL byte reached the message raw ("cannot load scene 'tor\0us'") or the file
    # system; a lone surrogate (os.fsdecode of other bytes) was "must be a str, got str".
    with pytest.raises(ValueError, match=r"^scene: 'tor\\x00us' contains a NUL byte"):
        msc.load_scene("tor\x00us")
    with pytest.raises(ValueError, match=r"^out: .* contains a NUL byte"):
        msc.run("torus", out=tmp_path / "a\x00b", steps=1, backend="cpu")
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match=r"^scene: '\\udcff.toml' is not UTF-8 text"):
        msc.load_scene("\udcff.toml")
    with pytest.raises(ValueError, match=r"^target: .* is not UTF-8 text"):
        msc.fit("torus", tmp_path / "\udcff", "charge")


def test_masked_entries_in_a_setting_are_named() -> None:
    # Their tolist() is None: the error said "gravity: a NoneType has no scene-file form".
    gravity = np.ma.masked_array([0.0, 0.0, -9.8], mask=[False, False, True])
    with pytest.raises(ValueError, match=r"^gravity: a masked array with 1 masked entries \(the first at \[2\]\)"):
        msc.Config(gravity=gravity)
    assert msc.Config(gravity=np.ma.masked_array([0.0, 0.0, -9.5])).gravity == (0.0, 0.0, -9.5)
