#!/usr/bin/env python3
"""The DDEF near gather's shapes against each other (benches/gpu.sh --only gather).

Usage: gather_table.py FILE.jsonl...

Each file is one `msc bench --workload ddef --ddef-gather SHAPE` run; the rows are grouped
by shape and size over the files (the rounds). Per shape and size: the step time (median
over every timed block of every round, with the smallest and largest), the `ddef_gather`
kernel's median time from the profile, and the step time relative to the default shape
(cell/256). Every shape gives the same forces: the force error is shown to check it.
"""
import json
import statistics
import sys


def main(paths):
    rows = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                r = json.loads(line)
                if r.get("workload") != "ddef" or r.get("status") != "ok":
                    continue
                rows.setdefault((r["ddef_gather"], r["n"]), []).append(r)
    if not rows:
        print("no DDEF rows")
        return 1
    adapters = {(r.get("adapter") or {}).get("device_type") for rs in rows.values() for r in rs}
    if "Cpu" in adapters:
        print("note: a software adapter runs the gather's direct path, which has one shape:"
              " these rows differ by noise alone\n")
    base = {}
    out = []
    for (shape, n), rs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        steps = [s for r in rs for s in r["ms_per_step_samples"]]
        gather = [k["ms_per_step"] for r in rs for k in (r.get("kernel_times") or [])
                  if k["kernel"] == "ddef_gather"]
        med = statistics.median(steps)
        if shape == "cell/256":
            base[n] = med
        out.append((n, shape, rs[0]["ddef_samples"], med, min(steps), max(steps),
                    statistics.median(gather) if gather else None, len(rs),
                    rs[0].get("force_error_mean")))
    print("| n | shape | m | step ms (median, min-max) | ddef_gather ms | vs cell/256 | rounds | force error |")
    print("|---|---|---|---|---|---|---|---|")
    for n, shape, m, med, lo, hi, g, k, err in out:
        rel = f"{med / base[n]:.3f}" if n in base else "-"
        gs = f"{g:.3f}" if g is not None else "-"
        es = f"{err:.6g}" if err is not None else "-"
        print(f"| {n} | {shape} | {m} | {med:.3f} ({lo:.3f}-{hi:.3f}) | {gs} | {rel} | {k} | {es} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
