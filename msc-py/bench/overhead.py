"""What the Python layer adds: the time of stepping a standard workload from Python, as
`msc bench` times it (steps, then a wait for the GPU), and the time of reading its
positions. One JSON line per measurement on stdout.

    python msc-py/bench/overhead.py step --n 65536 --steps 20 --repeats 5
    python msc-py/bench/overhead.py read --n 1048576 --repeats 7

Compare the first with `msc bench --workload cloth --sizes 64K --steps 20 --repeats 5`
(its ms_per_step) on the same device, runs interleaved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import msc


def spread(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def step(args: argparse.Namespace) -> None:
    system, config = msc.bench_workload("cloth", args.n, sweeps=args.sweeps)
    sim = msc.Simulator(system, config, backend=args.backend)
    # Warm-up as msc bench's default: at least one step and 200 ms.
    start = time.perf_counter()
    while True:
        sim.step(1)
        sim.synchronize()
        if time.perf_counter() - start >= 0.2:
            break
    ms = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        sim.step(args.steps)
        sim.synchronize()
        ms.append((time.perf_counter() - t) * 1e3 / args.steps)
    print(json.dumps({"what": "python step", "n": len(sim), "backend": sim.backend,
                      "steps": args.steps, "ms_per_step": spread(ms), "samples": ms}))


def read(args: argparse.Namespace) -> None:
    system, config = msc.bench_workload("cloth", args.n, sweeps=args.sweeps)
    sim = msc.Simulator(system, config, backend=args.backend)
    sim.step(1)
    sim.positions()
    times: dict[str, list[float]] = {"float32": [], "float64": []}
    for _ in range(args.repeats):
        for name, dtype in [("float32", np.float32), ("float64", np.float64)]:
            t = time.perf_counter()
            x = sim.positions(dtype)
            times[name].append((time.perf_counter() - t) * 1e3)
            assert x.shape == (len(sim), 3)
    print(json.dumps({"what": "python positions()", "n": len(sim), "backend": sim.backend,
                      "ms": {k: spread(v) for k, v in times.items()}}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["step", "read"])
    p.add_argument("--n", type=int, default=65536)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--backend", default="gpu", choices=["gpu", "cpu", "auto"])
    args = p.parse_args()
    step(args) if args.mode == "step" else read(args)


if __name__ == "__main__":
    main()
