#!/usr/bin/env python3
"""Builds the GPU benchmark table (markdown) from the JSON lines of `msc bench --out` and of
the peers (benches/peers: `"peer": "cuda"` / `"jax"`), and checks the throughput targets.

Usage: table.py FILE.jsonl... [--peak-tflops X] [--bandwidth-gbs Y]
Standard library only. Ratios are msc time / peer time for one Coulomb evaluation (below 1:
msc is faster). Percentages of peak use the msc record's peak (from msc's known-device table
or `--peak-tflops`), or the values given here when the records have none.
"""

import argparse
import json
import sys

MIB = 1 << 20
K256 = 256 * 1024
K16 = 16 * 1024
N20K = 20 * 1024


def load(paths):
    msc, adjoint, peers, checks = [], [], {"cuda": {}, "jax": {}}, []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit(f"table.py: {path}:{number}: not JSON ({e})")
                if r.get("check"):
                    checks.append(r)
                    continue
                peer = r.get("peer")
                if peer in peers:
                    peers[peer][r["n"]] = r
                elif "workload" in r and "backend" in r:
                    msc.append(r)
                elif "gradient_seconds" in r and "ratio" in r:
                    adjoint.append(r)
    return msc, adjoint, peers, checks


def fmt(x):
    if x is None:
        return "-"
    if x != 0 and not 1e-3 <= abs(x) < 1e5:
        return f"{x:.3e}"
    return f"{x:.4g}"


def size(n):
    if n % MIB == 0:
        return f"{n // MIB}M"
    if n % 1024 == 0:
        return f"{n // 1024}K"
    return str(n)


def peer_cell(rec):
    """(ms or None, text for the table)."""
    if rec is None:
        return None, "not run"
    if rec.get("status") != "ok":
        return None, "skipped"
    return rec["ms_per_eval"], fmt(rec["ms_per_eval"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--peak-tflops", type=float)
    ap.add_argument("--bandwidth-gbs", type=float)
    args = ap.parse_args()
    msc, adjoint, peers, checks = load(args.files)
    if not msc and not adjoint:
        sys.exit("table.py: no msc bench records in " + ", ".join(args.files))

    adapters = {(r.get("adapter") or {}).get("name") for r in msc}
    adapters |= {r.get("adapter") for r in adjoint if r["backend"] == "gpu"}
    adapters -= {None}
    drivers = {(r.get("adapter") or {}).get("driver_info") for r in msc}
    drivers |= {r.get("driver_info") for r in adjoint if r["backend"] == "gpu"}
    drivers -= {None}
    print(f"- adapter: {', '.join(sorted(adapters)) or 'unknown'}; driver: "
          f"{', '.join(sorted(drivers)) or 'unknown'}")
    for name, recs in peers.items():
        dev = {r.get("device") for r in recs.values() if r.get("status") == "ok"} - {None}
        skipped = {r.get("reason") for r in recs.values() if r.get("status") != "ok"} - {None}
        if dev:
            print(f"- {name} peer device: {', '.join(sorted(dev))}")
        if skipped:
            print(f"- {name} peer skipped: {'; '.join(sorted(skipped))}")
    print()
    print("| workload | n | msc ms/step | msc kernel ms | % of peak | CUDA ms | CUDA % FP32 "
          "| JAX ms | msc/CUDA | msc/JAX |")
    print("|---|---|---|---|---|---|---|---|---|---|")

    peak_of = lambda r: r.get("peak_tflops") or args.peak_tflops  # noqa: E731
    bw_of = lambda r: r.get("bandwidth_gbs") or args.bandwidth_gbs  # noqa: E731
    rows = sorted(msc, key=lambda r: (r["workload"], r["n_requested"]))
    for r in rows:
        wl, n = r["workload"], r.get("n") or r["n_requested"]
        label = wl if r.get("backend") == "gpu" else f"{wl} ({r.get('backend')})"
        if r.get("status") != "ok":
            reason = (r.get("reason") or "").replace("|", "/")
            print(f"| {label} | {size(r['n_requested'])} | {r.get('status')}: {reason} "
                  "| - | - | - | - | - | - | - |")
            continue
        kernel, pct, cuda_t, cuda_pct, jax_t, rc, rj = "-", "-", "-", "-", "-", "-", "-"
        if wl == "coulomb":
            ms = r.get("coulomb_ms_per_eval")
            src = r.get("coulomb_time_source")
            kernel = f"{fmt(ms)} ({'eval, ' + src if src else 'eval'})" if ms else "-"
            peak = peak_of(r)
            tflops = r.get("tflops")
            if r.get("percent_of_fp32_peak") is not None:
                pct = f"{r['percent_of_fp32_peak']:.1f}% FP32"
            elif peak and tflops:
                pct = f"{100 * tflops / peak:.1f}% FP32"
            cms, cuda_t = peer_cell(peers["cuda"].get(n))
            jms, jax_t = peer_cell(peers["jax"].get(n))
            if cms and peak:
                cuda_pct = f"{100 * peers['cuda'][n]['gflops'] / (1e3 * peak):.1f}%"
            if cms and ms:
                rc = f"{ms / cms:.2f}"
            if jms and ms:
                rj = f"{ms / jms:.2f}"
        elif wl == "cloth":
            sw = r.get("jacobi_sweep_ms")
            kernel = f"{fmt(sw)} (sweep)" if sw else "-"
            bw = bw_of(r)
            gbs = r.get("jacobi_sweep_gb_per_s")
            if r.get("percent_of_bandwidth") is not None:
                pct = f"{r['percent_of_bandwidth']:.1f}% BW"
            elif bw and gbs:
                pct = f"{100 * gbs / bw:.1f}% BW"
        elif wl == "ddef":
            label = f"{label} m={r.get('ddef_samples')}"
            if r.get("ddef_samples_auto"):
                label = f"{label} (auto)"
            host = r.get("ddef_host_ms_per_eval")
            struct = r.get("ddef_structure_bytes")
            kernel = (f"host {fmt(host)} ms/eval, structures "
                      f"{struct / 1e6:.0f} MB" if struct is not None else "-")
            err = r.get("force_error_mean")
            if err is not None:
                pct = f"{100 * err:.1f}% force error"
        elif wl == "worlds":
            n = f"{r.get('worlds')} x {r.get('n')}"
            kernel = f"{r.get('world_scene')} worlds"
            if r.get("batch_speedup") is not None:
                pct = f"{r['batch_speedup']:.1f}x sequential"
        print(f"| {label} | {n if wl == 'worlds' else size(n)} | {fmt(r.get('ms_per_step'))} "
              f"| {kernel} | {pct} "
              f"| {cuda_t} | {cuda_pct} | {jax_t} | {rc} | {rj} |")

    for name in peers:
        mine = [c for c in checks if c.get("peer") == name]
        if mine:
            worst = max(c["rel_error"] for c in mine)
            sizes = ", ".join(sorted({size(c["n"]) for c in mine}))
            print(f"\n{name} force check: n {sizes}, {len(mine)} charges, max relative error "
                  f"{worst:.2e} against the f64 sum over msc's cloud")
    if adjoint:
        adjoint_table(adjoint)
    print()
    print("Targets (H100):")
    print()
    ok = [r for r in rows if r.get("status") == "ok" and r.get("backend") == "gpu"]
    coul = [r for r in ok if r["workload"] == "coulomb"]
    cloth = [r for r in ok if r["workload"] == "cloth"]

    def line(name, verdict, detail):
        print(f"- {name}: {verdict} ({detail})")

    big = [r for r in coul if r["n"] >= K256]
    vals = []
    for r in big:
        peak, tf = peak_of(r), r.get("tflops")
        if peak and tf:
            vals.append((r["n"], 100 * tf / peak))
    if not big:
        line("Coulomb >= 60% of FP32 peak at n >= 256K", "NOT MEASURED", "no such row")
    elif not vals:
        line("Coulomb >= 60% of FP32 peak at n >= 256K", "NOT MEASURED",
             "no FP32 peak known for this adapter: give --peak-tflops")
    else:
        line("Coulomb >= 60% of FP32 peak at n >= 256K",
             "PASS" if all(v >= 60 for _, v in vals) else "FAIL",
             ", ".join(f"{size(n)}: {v:.1f}%" for n, v in vals))

    speed = []
    for r in big:
        c = peers["cuda"].get(r["n"])
        if c and c.get("status") == "ok" and r.get("coulomb_ms_per_eval"):
            speed.append((r["n"], c["ms_per_eval"] / r["coulomb_ms_per_eval"]))
    if not speed:
        line("Coulomb >= 0.9x the CUDA kernel's speed at n >= 256K", "NOT MEASURED",
             "no CUDA or msc row at n >= 256K")
    else:
        line("Coulomb >= 0.9x the CUDA kernel's speed at n >= 256K",
             "PASS" if all(s >= 0.9 for _, s in speed) else "FAIL",
             ", ".join(f"{size(n)}: {s:.2f}x" for n, s in speed))

    m1 = [r for r in cloth if r["n"] >= MIB]
    sweep = [r for r in m1 if r.get("jacobi_sweep_ms") and r.get("jacobi_sweep_bytes")]
    floors = []
    for r in sweep:
        bw = bw_of(r)
        if bw:
            floor_ms = r["jacobi_sweep_bytes"] / (bw * 1e9) * 1e3
            floors.append((r["n"], r["jacobi_sweep_ms"] / floor_ms, floor_ms))
    if not floors:
        why = "no 1M cloth row" if not m1 else (
            "no sweep time (timestamps)" if not sweep
            else "no bandwidth known for this adapter: give --bandwidth-gbs")
        line("Jacobi sweep at 1M within 1.5x of bytes / bandwidth", "NOT MEASURED", why)
    else:
        line("Jacobi sweep at 1M within 1.5x of bytes / bandwidth",
             "PASS" if all(x <= 1.5 for _, x, _ in floors) else "FAIL",
             ", ".join(f"{size(n)}: {x:.2f}x of a {f * 1e3:.0f} us floor"
                       for n, x, f in floors))

    c20 = [r for r in m1 if r.get("sweeps") == 20]
    if not c20:
        line("1M cloth, 20 sweeps: <= 3 ms per step", "NOT MEASURED", "no 1M cloth row at 20 sweeps")
    else:
        line("1M cloth, 20 sweeps: <= 3 ms per step",
             "PASS" if all(r["ms_per_step"] <= 3.0 for r in c20) else "FAIL",
             ", ".join(f"{fmt(r['ms_per_step'])} ms" for r in c20))

    k20 = [r for r in coul if r["n"] == N20K]
    if not k20:
        line("20K charges: >= 1000 steps/s", "NOT MEASURED", "no 20K Coulomb row")
    else:
        line("20K charges: >= 1000 steps/s",
             "PASS" if all(r["ms_per_step"] <= 1.0 for r in k20) else "FAIL",
             ", ".join(f"{1e3 / r['ms_per_step']:.0f} steps/s" for r in k20))

    # DDEF: a step of the cloud is one force evaluation plus the integration, so
    # ms_per_step bounds the evaluation from above.
    # The targets hold for the scenes' default m (`--samples auto` rows) when measured;
    # otherwise every row must meet them.
    ddef = [r for r in ok if r["workload"] == "ddef"]
    if any(r.get("ddef_samples_auto") for r in ddef):
        ddef = [r for r in ddef if r.get("ddef_samples_auto")]
    for n_target, ms_target in ((MIB, 12.0), (K256, 2.0)):
        name = f"DDEF at {size(n_target)} charges: <= {ms_target:g} ms per evaluation"
        rs = [r for r in ddef if r["n"] == n_target]
        if not rs:
            line(name, "NOT MEASURED", f"no DDEF row at {size(n_target)}")
        else:
            line(name, "PASS" if all(r["ms_per_step"] <= ms_target for r in rs) else "FAIL",
                 ", ".join(f"m={r.get('ddef_samples')}: {fmt(r['ms_per_step'])} ms"
                           for r in rs))
    pairs = [(d, c) for d in ddef if d["n"] >= K16 for c in coul if c["n"] == d["n"]]
    name = "DDEF faster than all-pairs from 16K"
    if not pairs:
        line(name, "NOT MEASURED", "no DDEF and Coulomb rows of one size >= 16K")
    else:
        line(name, "PASS" if all(d["ms_per_step"] < c["ms_per_step"] for d, c in pairs)
             else "FAIL",
             ", ".join(f"{size(d['n'])} m={d.get('ddef_samples')}: {fmt(d['ms_per_step'])} "
                       f"vs {fmt(c['ms_per_step'])} ms" for d, c in pairs))

    w1024 = [r for r in ok if r["workload"] == "worlds" and r.get("worlds") == 1024
             and r.get("world_scene") == "torus" and r.get("batch_speedup") is not None]
    if not w1024:
        line("1024 torus worlds batched: >= 50x sequential", "NOT MEASURED",
             "no worlds row at W = 1024")
    else:
        line("1024 torus worlds batched: >= 50x sequential",
             "PASS" if all(r["batch_speedup"] >= 50 for r in w1024) else "FAIL",
             ", ".join(f"{r['batch_speedup']:.1f}x" for r in w1024))
    adjoint_targets(adjoint, line)
    return 0


def adjoint_table(recs):
    """`msc bench --workload adjoint` rows: one gradient against one forward run."""
    print()
    print("| adjoint | n | springs | T | params | P | checkpoint | forward s | gradient s "
          "[min-max] | ratio | states (bound) | kept MB | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        g = r["gradient_seconds"]
        rss = r.get("peak_rss_bytes")
        print(f"| {r['backend']} | {size(r['particles'])} | {r['springs']} | {r['steps']} "
              f"| {r['params']} | {r['components']} | {r['policy']} "
              f"| {fmt(r['forward_seconds'][0])} | {fmt(g[0])} [{fmt(g[1])}-{fmt(g[2])}] "
              f"| {r['ratio']:.2f} | {r['peak_states']} ({r['state_bound']:.1f}) "
              f"| {r['kept_bytes'] / 1e6:.1f} | {'-' if rss is None else f'{rss / 1e6:.0f}'} |")


def adjoint_targets(recs, line):
    """The adjoint's cost targets, per scene (backend, size, horizon)."""
    gpu = [r for r in recs if r["backend"] == "gpu"]
    if not gpu:
        line("adjoint gradient <= 4x a forward run, same within 10% across P", "NOT MEASURED",
             "no GPU adjoint row")
        return
    scenes = sorted({(r["particles"], r["steps"]) for r in gpu})
    for n, t in scenes:
        rows = [r for r in gpu if (r["particles"], r["steps"]) == (n, t)]
        ratios = [r["ratio"] for r in rows]
        spread = max(ratios) / min(ratios) - 1
        name = f"adjoint {size(n)} cloth, T = {t}"
        line(f"{name}: gradient <= 4x forward", "PASS" if max(ratios) <= 4 else "FAIL",
             ", ".join(f"P = {r['components']}: {r['ratio']:.2f}x" for r in rows))
        line(f"{name}: same within 10% across P", "PASS" if spread <= 0.10 else "FAIL",
             f"ratios within {100 * spread:.1f}%")
        line(f"{name}: states <= 2 sqrt(T) + 2",
             "PASS" if all(r["peak_states"] <= r["state_bound"] for r in rows) else "FAIL",
             ", ".join(f"{r['peak_states']} ({r['policy']})" for r in rows[:1]))
        every = [r for r in rows if r["params"] == "stiffnesses"]
        if n >= 64 * 1024 and t >= 200 and every:
            g = every[0]["gradient_seconds"][0]
            line(f"{name}: all-stiffness gradient under 1 s", "PASS" if g < 1 else "FAIL",
                 f"{g:.3f} s")


if __name__ == "__main__":
    sys.exit(main())
