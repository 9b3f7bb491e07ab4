#!/usr/bin/env python3
"""The DDEF near gather's and far field's shapes against each other (benches/gpu.sh
--only gather).

Usage: gather_table.py FILE.jsonl...

Each file is one `msc bench --workload ddef --ddef-gather G --ddef-far F` run; the rows
are grouped by the two shapes and the size over the files (the rounds). Per shape and
size: the step time (median over every timed block of every round, with the smallest and
largest), the `ddef_gather` and `ddef_far` kernels' median times from the profile, and the
step time relative to the default shapes (cell/256, staged). Every shape gives the same
forces: the force error is shown to check it. Rows of the `paper` variant (`--ddef-variant
paper`, the default shapes without the `corrected` sums) are marked so; their force error
differs by design.
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
                shape = f'{r["ddef_gather"]} {r.get("ddef_far") or "staged"}'
                if r.get("ddef_variant") == "paper":
                    shape += " paper"
                rows.setdefault((shape, r["n"]), []).append(r)
    if not rows:
        print("no DDEF rows")
        return 1
    adapters = {(r.get("adapter") or {}).get("device_type") for rs in rows.values() for r in rs}
    if "Cpu" in adapters:
        print("note: a software adapter runs the gather's and far field's direct paths, which"
              " have one shape each: these rows differ by noise alone\n")
    base = {}
    out = []
    for (shape, n), rs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        steps = [s for r in rs for s in r["ms_per_step_samples"]]
        def kernel(name):
            t = [k["ms_per_step"] for r in rs for k in (r.get("kernel_times") or [])
                 if k["kernel"] == name]
            return statistics.median(t) if t else None
        med = statistics.median(steps)
        if shape == "cell/256 staged":
            base[n] = med
        out.append((n, shape, rs[0]["ddef_samples"], med, min(steps), max(steps),
                    kernel("ddef_gather"), kernel("ddef_far"), len(rs),
                    rs[0].get("force_error_mean")))
    print("| n | gather, far | m | step ms (median, min-max) | ddef_gather ms | ddef_far ms "
          "| vs default | rounds | force error |")
    print("|---|---|---|---|---|---|---|---|---|")
    ms = lambda x: f"{x:.3f}" if x is not None else "-"
    for n, shape, m, med, lo, hi, g, f, k, err in out:
        rel = f"{med / base[n]:.3f}" if n in base else "-"
        es = f"{err:.6g}" if err is not None else "-"
        print(f"| {n} | {shape} | {m} | {med:.3f} ({lo:.3f}-{hi:.3f}) | {ms(g)} | {ms(f)} "
              f"| {rel} | {k} | {es} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
