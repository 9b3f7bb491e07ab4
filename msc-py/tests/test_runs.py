"""msc.run, msc.sweep and msc.fit: the commands' outputs as Python objects, and their
failures as exceptions."""

from __future__ import annotations

import _thread
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import msc


def test_run_writes_the_folder_and_returns_the_summary(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = msc.run(tiny, out=out, backend="cpu", set={"integrator.dt": 0.005})
    assert s["steps"] == 20 and s["finite"] and s["backend"] == "cpu"
    assert s["dt"] == 0.005
    assert s == json.loads((out / "summary.json").read_text())
    assert (out / "energy.csv").exists()
    with pytest.raises(msc.SceneError, match="no-such-scene"):
        msc.run("no-such-scene", out=tmp_path / "x", backend="cpu")


def test_a_diverged_run_raises_with_its_outputs(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "blowup"
    with pytest.raises(msc.DivergenceError) as e:
        msc.run(tiny, out=out, backend="cpu", set={"integrator.method": "symplectic_euler",
                                                   "integrator.dt": 5.0, "material.stiffness": 1e6})
    assert e.value.out is not None and Path(e.value.out) == out
    assert json.loads((out / "summary.json").read_text())["finite"] is False


def test_sweep_returns_the_rows_of_runs_csv(tiny: Path, tmp_path: Path) -> None:
    rows = msc.sweep(tiny, {"material.charge": [1e-6, 2e-6], "integrator.solver.method": ["jacobi", "cg"]},
                     out=tmp_path / "sweep", backend="cpu")
    assert len(rows) == 4
    assert [r["material.charge"] for r in rows] == [1e-6, 1e-6, 2e-6, 2e-6]
    assert [r["integrator.solver.method"] for r in rows] == ["jacobi", "cg", "jacobi", "cg"]
    for r in rows:
        assert r["status"] == "ok" and r["steps"] == 20 and r["finite"] is True
        assert isinstance(r["total"], float)
    # More charge, more Coulomb energy.
    assert rows[2]["coulomb"] > rows[0]["coulomb"]


def test_a_sweep_with_diverged_runs_raises_with_its_rows(tiny: Path, tmp_path: Path) -> None:
    vary = {"integrator.dt": [1e-4, 5.0]}
    base = {"integrator.method": "symplectic_euler", "material.stiffness": 1e6}
    with pytest.raises(msc.DivergenceError) as e:
        msc.sweep(tiny, vary, out=tmp_path / "s", set=base, backend="cpu")
    rows = e.value.rows
    assert rows is not None
    assert [r["status"] for r in rows] == ["ok", "diverged"]
    # check=False returns the table instead (the complete runs are not redone).
    again = msc.sweep(tiny, vary, out=tmp_path / "s", set=base, backend="cpu", check=False)
    assert [r["status"] for r in again] == [r["status"] for r in rows]


def test_fit_recovers_the_charge_of_a_target_run(ball: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    msc.run(ball, out=target, backend="cpu")
    result = msc.fit(ball, target, "charge", init=[1e-6], out=tmp_path / "fit", backend="cpu")
    assert result["converged"] is True
    q = result["parameters"][0]["result"][0]
    assert abs(q / 2e-6 - 1) < 1e-4
    with pytest.raises(msc.FitError, match="mass"):
        msc.fit(ball, target, "mass", out=tmp_path / "fit2", backend="cpu")


def test_a_fit_started_without_gradient_raises_with_its_record(ball: Path, tmp_path: Path) -> None:
    # The ball's loss is even in its one charge: at 0 the gradient is exactly 0, so the fit
    # cannot move; that is not convergence, and the exception carries fit.json's record.
    target = tmp_path / "target"
    msc.run(ball, out=target, backend="cpu")
    with pytest.raises(msc.FitError, match="--init") as e:
        msc.fit(ball, target, "charge", init=[0.0], out=tmp_path / "fit", backend="cpu")
    assert e.value.out is not None and Path(e.value.out).name == "fit.json"
    result = e.value.result
    assert result is not None and result["reason"] == "no_gradient"
    assert result["converged"] is False and result["zero_gradient_at_start"] == ["charge"]


def test_fit_takes_each_optimizer_the_command_offers(ball: Path, tmp_path: Path) -> None:
    # The stub's Literal is what mypy checks this call against: "lbfgs" must be in it.
    target = tmp_path / "target"
    msc.run(ball, out=target, backend="cpu")
    result = msc.fit(ball, target, "charge", init=[1e-6], optimizer="lbfgs",
                     out=tmp_path / "fit", backend="cpu")
    assert result["optimizer"] == "lbfgs"
    assert result["loss"] < 1e-6 * result["initial_loss"]


def test_ctrl_c_stops_only_the_run_it_interrupts(tiny: Path, tmp_path: Path) -> None:
    """Runs on another thread, started and ended while Ctrl-C stops the main thread's run,
    neither clear that stop nor are stopped by it: each stop request is its call's own."""
    summaries: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    quit_at = time.monotonic() + 2.5

    def others() -> None:
        try:
            i = 0
            while time.monotonic() < quit_at:
                summaries.append(msc.run(tiny, out=tmp_path / f"other{i}", steps=20000, backend="cpu"))
                i += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    worker = threading.Thread(target=others)
    worker.start()
    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            # About 200 s unless stopped.
            msc.run(tiny, out=tmp_path / "main", steps=10_000_000, backend="cpu")
    finally:
        timer.cancel()
        worker.join()
    assert time.monotonic() - start < 30
    assert json.loads((tmp_path / "main" / "summary.json").read_text())["interrupted"]
    assert not errors, errors
    assert summaries
    for s in summaries:
        assert s["steps"] == 20000 and not s["interrupted"], s
