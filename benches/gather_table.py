#!/usr/bin/env python3
"""The DDEF near gather's and far field's shapes against each other (benches/gpu.sh
--only gather), and the default shapes on crowded clouds (--only crowded).

Usage: gather_table.py FILE.jsonl...

Each file is one `msc bench --workload ddef --ddef-gather G --ddef-far F` run; the rows
are grouped by the two shapes, the size and m over the files (the rounds). Per shape and
size: the step time (median over every timed block of every round, with the smallest and
largest), the `ddef_gather` and `ddef_far` kernels' median times from the profile, and the
step time relative to the default shapes (cell/256/unrolled, staged). Every shape gives the
same forces: the force error is shown to check it. A shape `auto` picked (the default,
`--ddef-gather auto`) shows as auto:SHAPE. Rows of the `paper` variant
(`--ddef-variant paper`, the default shapes without the `corrected` sums) are marked so;
their force error differs by design. Rows of a crowded cloud (`--cloud
sphere|torus|sheet`) are marked with it; the gather's time per near pair in picoseconds
(its kernel time over n times the mean near sources per target) compares a crowded
cloud's gather with the cube's: a heavy cell that serialized its workgroups would show as
a much higher figure. Rows of a variant's kernel bodies (`gpu.sh --variants`: records with
`kernel_files`) are marked files:V[kernels]; with only the default shapes run, their ratio
is to the built-in kernels' row of the same size and m (the one unmarked row).
"""
import json
import os
import statistics
import sys

DEFAULT = "cell/256/unrolled staged"


def main(paths):
    rows = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                r = json.loads(line)
                if r.get("workload") != "ddef" or r.get("status") != "ok":
                    continue
                gather = r["ddef_gather"]
                if r.get("ddef_gather_auto"):
                    gather = f"auto:{gather}"
                shape = f'{gather} {r.get("ddef_far") or "staged"}'
                if r.get("ddef_variant") == "paper":
                    shape += " paper"
                if r.get("cloud") not in (None, "cube"):
                    shape += f' {r["cloud"]}'
                if r.get("kernel_files"):
                    # A variant's kernel bodies (gpu.sh --variants): its folder and kernels.
                    folder, _, kernels = r["kernel_files"].partition(": ")
                    shape += f" files:{os.path.basename(folder.rstrip('/'))}[{kernels}]"
                rows.setdefault((shape, r["n"], r["ddef_samples"]), []).append(r)
    if not rows:
        print("no DDEF rows")
        return 1
    adapters = {(r.get("adapter") or {}).get("device_type") for rs in rows.values() for r in rs}
    if "Cpu" in adapters:
        print("note: a software adapter runs the gather's and far field's direct paths, which"
              " have one shape each: rows of different shapes differ by noise alone\n")
    plain = {}
    out = []
    for (shape, n, m), rs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        steps = [s for r in rs for s in r["ms_per_step_samples"]]
        def kernel(name):
            t = [k["ms_per_step"] for r in rs for k in (r.get("kernel_times") or [])
                 if k["kernel"] == name]
            return statistics.median(t) if t else None
        med = statistics.median(steps)
        # Rows of the uniform cloud and the corrected variant (no mark after the shapes):
        # the ratio's base is the default shapes' row, else (records of an older default)
        # the only such row.
        if len(shape.split()) == 2:
            plain.setdefault((n, m), {})[shape] = med
        near, gather = rs[0].get("ddef_near_per_target"), kernel("ddef_gather")
        per_pair = gather * 1e9 / (n * near) if gather and near else None
        out.append((n, shape, m, med, min(steps), max(steps),
                    gather, kernel("ddef_far"), per_pair, len(rs),
                    rs[0].get("force_error_mean")))
    print("| n | gather, far | m | step ms (median, min-max) | ddef_gather ms | ddef_far ms "
          "| gather ps/near pair | vs default | rounds | force error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ms = lambda x: f"{x:.3f}" if x is not None else "-"
    base = {k: v.get(DEFAULT, next(iter(v.values())) if len(v) == 1 else None)
            for k, v in plain.items()}
    for n, shape, m, med, lo, hi, g, f, pp, k, err in out:
        rel = f"{med / base[n, m]:.3f}" if base.get((n, m)) else "-"
        es = f"{err:.6g}" if err is not None else "-"
        ps = f"{pp:.2f}" if pp is not None else "-"
        print(f"| {n} | {shape} | {m} | {med:.3f} ({lo:.3f}-{hi:.3f}) | {ms(g)} | {ms(f)} "
              f"| {ps} | {rel} | {k} | {es} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
