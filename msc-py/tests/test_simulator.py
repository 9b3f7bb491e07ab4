"""msc.Simulator on the CPU reference and the GPU solver: reads and their dtypes, state
and parameter updates against simulators built with them, GPU against CPU, exceptions,
two threads on one simulator, and Ctrl-C between chunks of steps.

GPU against CPU: the GPU computes in float32, the CPU in float64; over 40 implicit
steps of a well-conditioned 18-particle torus their positions agree to 1e-4 of its 2.6 m
size and energies to 1e-3 of the largest term (as the Rust GPU tests compare)."""

from __future__ import annotations

import _thread
import threading
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

import msc

ENERGY_KEYS = {"kinetic", "elastic", "coulomb", "gravity", "external", "total"}


def test_cpu_reads_have_their_shapes_and_dtypes(tiny: Path) -> None:
    sim = msc.Simulator(msc.load_scene(tiny), backend="cpu")
    assert (sim.backend, len(sim), sim.step_count, sim.time) == ("cpu", 18, 0, 0.0)
    sim.step(3)
    sim.step(2)
    assert sim.step_count == 5 and sim.time == pytest.approx(0.05)
    x = sim.positions()
    assert x.shape == (18, 3) and x.dtype == np.float64
    x32 = sim.positions(np.float32)
    assert x32.dtype == np.float32
    np.testing.assert_array_equal(x32, x.astype(np.float32))
    assert sim.velocities("float64").shape == (18, 3)
    e = sim.energies()
    assert set(e) == ENERGY_KEYS
    assert e["total"] == pytest.approx(sum(v for k, v in e.items() if k != "total"))
    with pytest.raises(ValueError, match="float32 or float64"):
        sim.positions(np.int32)


def test_set_state_round_trip_and_stepping_from_it(tiny: Path) -> None:
    scene = msc.load_scene(tiny)
    a = msc.Simulator(scene, backend="cpu")
    b = msc.Simulator(scene, backend="cpu")
    a.step(10)
    x, v = a.positions(), a.velocities()
    b.set_state(x, v)
    np.testing.assert_array_equal(b.positions(), x)
    np.testing.assert_array_equal(b.velocities(), v)
    # Time stays; the motion from the state is the same.
    assert b.step_count == 0
    a.step(5)
    b.step(5)
    np.testing.assert_array_equal(a.positions(), b.positions())
    with pytest.raises(msc.ModelError, match="3 entries"):
        b.set_state(x[:3], v[:3])


def test_gpu_set_state_round_trip(tiny: Path, gpu: None) -> None:
    sim = msc.Simulator(msc.load_scene(tiny), backend="gpu")
    x = np.random.default_rng(1).normal(size=(18, 3))
    v = np.random.default_rng(2).normal(size=(18, 3))
    sim.set_state(x, v)
    np.testing.assert_array_equal(sim.positions(np.float32), x.astype(np.float32))
    np.testing.assert_array_equal(sim.velocities(), v.astype(np.float32).astype(np.float64))
    far = x.copy()
    far[5, 1] = 1e30
    with pytest.raises(msc.GpuError, match="position of particle 5"):
        sim.set_state(far, v)


def test_gpu_matches_cpu(tiny: Path, gpu: None) -> None:
    scene = msc.load_scene(tiny, steps=40)
    g = msc.Simulator(scene, backend="gpu")
    c = msc.Simulator(scene, backend="cpu")
    assert g.backend != "cpu"
    g.step(40)
    c.step(40)
    xg, xc = g.positions(), c.positions()
    size = np.linalg.norm(xc.max(axis=0) - xc.min(axis=0))
    assert np.abs(xg - xc).max() <= 1e-4 * size
    eg, ec = g.energies(), c.energies()
    scale = max(abs(v) for k, v in ec.items() if k != "total")
    for k in ENERGY_KEYS:
        assert abs(eg[k] - ec[k]) <= 1e-3 * scale, k


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_new_parameters_step_as_a_simulator_built_with_them(tiny: Path, backend: Literal["cpu", "gpu"], request: pytest.FixtureRequest) -> None:
    if backend == "gpu":
        request.getfixturevalue("gpu")
    scene = msc.load_scene(tiny)
    system = scene.system
    q = system.charges * np.linspace(0.5, 2.0, len(system))
    k = system.stiffness * 1.5
    updated = msc.Simulator(scene, backend=backend)
    updated.set_charges(q)
    updated.set_stiffness(k)
    fresh = msc.Simulator(system.with_charges(q).with_stiffness(k), scene.config, backend=backend)
    updated.step(20)
    fresh.step(20)
    np.testing.assert_array_equal(updated.positions(), fresh.positions())
    np.testing.assert_array_equal(updated.system.charges, q)
    # A particle uncharged at the start stays so (the GPU's Coulomb sources are fixed).
    uncharged = msc.Simulator(system.with_charges(np.where(np.arange(18) == 3, 0.0, q)), scene.config, backend=backend)
    with pytest.raises(msc.ModelError, match="particle 3"):
        uncharged.set_charges(q)


def test_chebyshev_with_an_estimated_radius_refuses_new_parameters(tiny: Path) -> None:
    scene = msc.load_scene(tiny, set={"integrator.solver.method": "chebyshev"})
    sim = msc.Simulator(scene, backend="cpu")
    with pytest.raises(msc.ConfigError) as e:
        sim.set_stiffness(20.0)
    assert e.value.key == "integrator.solver.rho"


def test_divergence_and_gpu_errors_are_typed() -> None:
    x = np.array([[0.0, 0, 0], [1, 0, 0]])
    stiff = msc.System(x, 1e-3, springs=[[0, 1]], stiffness=1e9, rest_length=0.5)
    sim = msc.Simulator(stiff, msc.Config(integrator="symplectic_euler", dt=0.1), backend="cpu")
    sim.check_finite()
    sim.step(200)
    with pytest.raises(msc.DivergenceError, match="not finite"):
        sim.check_finite()
    # float32 cannot hold this mass on any adapter: GpuError (also without an adapter).
    heavy = msc.System(x, 1e300)
    with pytest.raises(msc.GpuError):
        msc.Simulator(heavy, backend="gpu")
    with pytest.raises(ValueError, match="backend"):
        msc.Simulator(heavy, backend="tpu")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="msc.Scene, a msc.System"):
        msc.Simulator("torus")  # type: ignore[arg-type]


def test_auto_falls_back_to_cpu_with_a_warning_when_f32_cannot_run_it() -> None:
    heavy = msc.System(np.eye(3), 1e300)
    with pytest.warns(msc.BackendWarning, match="CPU reference"):
        sim = msc.Simulator(heavy, backend="auto")
    assert sim.backend == "cpu"


def test_a_shared_device_runs_several_simulators(tiny: Path, gpu: None) -> None:
    device = msc.Device()
    assert device.name and "max_buffer_size" in device.info
    scene = msc.load_scene(tiny)
    shared = [msc.Simulator(scene, backend="gpu", device=device) for _ in range(2)]
    alone = msc.Simulator(scene, backend="gpu")
    for s in [*shared, alone]:
        s.step(10)
    for s in shared:
        np.testing.assert_array_equal(s.positions(), alone.positions())


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_two_threads_on_one_simulator_take_turns(tiny: Path, backend: Literal["cpu", "gpu"], request: pytest.FixtureRequest) -> None:
    if backend == "gpu":
        request.getfixturevalue("gpu")
    scene = msc.load_scene(tiny)
    shared = msc.Simulator(scene, backend=backend)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(25):
                shared.step(2)
                assert shared.positions().shape == (18, 3)
                shared.energies()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # Every call was whole: 100 steps, exactly as one thread doing them.
    assert shared.step_count == 100
    serial = msc.Simulator(scene, backend=backend)
    serial.step(100)
    np.testing.assert_array_equal(shared.positions(), serial.positions())


def test_ctrl_c_stops_between_chunks_and_leaves_a_usable_simulator(tiny: Path) -> None:
    sim = msc.Simulator(msc.load_scene(tiny), backend="cpu")
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sim.step(10**12)
    finally:
        timer.cancel()
    done = sim.step_count
    assert 0 < done < 10**12
    sim.step(1)
    assert sim.step_count == done + 1
    assert np.isfinite(sim.positions()).all()
