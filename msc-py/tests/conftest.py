"""Shared fixtures: small scenes written to a temporary folder, and the GPU rule of the
Rust tests (a GPU test skips without an adapter, and fails instead when
MSC_REQUIRE_GPU=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import msc

# An 18-particle charged torus: every run takes milliseconds.
TINY = """
name = "tiny"
[mesh]
kind = "torus"
major_radius = 1.0
minor_radius = 0.3
rings = 6
sides = 3
[material]
mass = 0.1
stiffness = 10.0
charge = 1e-6
[integrator]
method = "imex"
dt = 0.01
steps = 20
solver = { method = "jacobi", iterations = 20, omega = 0.5, tolerance = 0.0 }
[coulomb]
method = "all_pairs"
[output]
every = 5
frames = "none"
"""

# A charged icosphere with exact (CG) solves whose frames a fit can match.
BALL = """
name = "ball"
[mesh]
kind = "icosphere"
radius = 1.0
subdivisions = 1
[material]
mass = 0.05
stiffness = 2.5
damping = 0.05
charge = 2e-6
[integrator]
method = "imex"
dt = 0.02
steps = 60
solver = { method = "cg", iterations = 500, tolerance = 1e-12 }
[output]
every = 10
frames = "ply"
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


@pytest.fixture
def ball(tmp_path: Path) -> Path:
    path = tmp_path / "ball.toml"
    path.write_text(BALL)
    return path


@pytest.fixture(scope="session")
def gpu() -> None:
    """Skips a GPU test without an adapter; fails it under MSC_REQUIRE_GPU=1."""
    if msc.adapters():
        return
    if os.environ.get("MSC_REQUIRE_GPU") == "1":
        pytest.fail("MSC_REQUIRE_GPU=1 but wgpu found no adapter")
    pytest.skip("no GPU adapter")
