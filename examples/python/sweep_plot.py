"""Sweep the built-in torus over its charge and plot what the charge does.

Runs `msc.sweep` (one run folder per charge, and the table runs.csv), then draws each
run's total energy over time (from its energy.csv) and the final energy terms against
the charge, with matplotlib.

    pip install ./msc-py matplotlib
    python examples/python/sweep_plot.py --out out/charge-sweep
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no window
import matplotlib.pyplot as plt

import msc


def energy_log(run_dir: Path) -> tuple[list[float], list[float]]:
    """The time and total energy columns of a run's energy.csv."""
    with open(run_dir / "energy.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return [float(r["time"]) for r in rows], [float(r["total"]) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/charge-sweep"))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--backend", default="auto", choices=["auto", "gpu", "cpu"])
    args = parser.parse_args()

    charges = [2e-6, 4e-6, 6e-6, 8e-6]
    rows = msc.sweep(
        "torus",
        {"material.charge": charges},
        out=args.out,
        steps=args.steps,
        backend=args.backend,
        set={"output.frames": "none"},
    )

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for row in rows:
        t, total = energy_log(args.out / row["run"])
        left.plot(t, total, label=f"q = {row['material.charge']:.0e} C")
    left.set(xlabel="time (s)", ylabel="total energy (J)", title="energy over time")
    left.legend()

    q = [row["material.charge"] for row in rows]
    for term in ["coulomb", "elastic", "kinetic"]:
        right.plot(q, [row[term] for row in rows], "o-", label=term)
    right.set(xlabel="charge per particle (C)", ylabel="final energy (J)",
              title=f"after {args.steps} steps on {rows[0]['backend']}")
    right.legend()

    fig.tight_layout()
    png = args.out / "sweep.png"
    fig.savefig(png, dpi=120)
    print(f"{len(rows)} runs in {args.out}; plot in {png}")


if __name__ == "__main__":
    main()
