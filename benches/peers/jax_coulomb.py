#!/usr/bin/env python3
"""Peer for `msc bench --workload coulomb`: all-pairs Coulomb in JAX (jit, float32).

Same workload as msc (src/bench/workload.rs): n charges uniformly in a 1 m cube centred on
the origin, drawn with SplitMix64 from the same seed in the same order (x, y, z, sign per
charge), 1 uC of total |charge|, softening 1 mm, charges scaled by sqrt(k_c). Like msc's
`coulomb_tiled` it computes the force q_i sum_j q_j d / (r^2 + eps^2)^(3/2) and the potential
(self pair excluded). Targets and sources are taken in blocks (zero-charge padding, which adds
nothing since eps > 0) so that memory stays bounded at any n.

Prints one JSON line per size (n, ms_per_eval, interactions per second, GFLOP/s at 20 flops
per interaction, the n-body convention msc uses). `--check K` adds the forces at K strided
charges against an f64 sum (numpy). Without JAX, or without a JAX GPU backend (unless
`--allow-cpu`), it prints one `skipped` line per size and exits 0.
"""

import argparse
import json
import math
import sys
import time

COULOMB_K = 8.9875517923e9
CLOUD_SIZE = 1.0
CLOUD_CHARGE = 1e-6
CLOUD_SOFTENING = 1e-3
CLOUD_SEED = 0x6D73635F62656E63
# --check: the largest relative force error accepted against the f64 sum (f32 gives ~1e-6;
# a wrong term or sign gives O(1)).
CHECK_TOLERANCE = 1e-3


def parse_size(text):
    t = text.strip()
    mult = 1
    if t[-1:] in ("K", "k"):
        mult, t = 1024, t[:-1]
    elif t[-1:] in ("M", "m"):
        mult, t = 1048576, t[:-1]
    if not t.isdigit() or int(t) * mult < 2:
        raise argparse.ArgumentTypeError(f"bad size '{text}'")
    return int(t) * mult


def cloud(n, np):
    """msc's cloud in f64: (n, 3) positions and (n,) charges. SplitMix64, vectorized: draw
    k (1-based) mixes seed + k * gamma; charge i uses draws 4i+1 .. 4i+4 (x, y, z, sign)."""
    gamma = np.uint64(0x9E3779B97F4A7C15)
    k = np.arange(1, 4 * n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(CLOUD_SEED) + k * gamma
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    z = z.reshape(n, 4)
    unit = (z[:, :3] >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    pos = (unit - 0.5) * CLOUD_SIZE
    q = CLOUD_CHARGE / n
    charges = np.where((z[:, 3] & np.uint64(1)) == 0, q, -q)
    return pos, charges


def skip(sizes, reason):
    for n in sizes:
        print(json.dumps({"peer": "jax", "workload": "coulomb", "status": "skipped",
                          "n": n, "reason": reason}))
    print(f"jax_coulomb: skipped: {reason}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4K",
                    type=lambda s: [parse_size(t) for t in s.split(",")],
                    help="charges, K = 1024, M = 1048576 (default 4K)")
    ap.add_argument("--min-seconds", type=float, default=1.0,
                    help="time at least S seconds per size (default 1)")
    ap.add_argument("--min-iters", type=int, default=3,
                    help="and at least K evaluations (default 3)")
    ap.add_argument("--block", type=int, default=8192,
                    help="target and source block (default 8192)")
    ap.add_argument("--check", type=int, default=0,
                    help="compare the forces at K strided charges with an f64 sum "
                         "(exit 1 when a relative error exceeds 1e-3)")
    ap.add_argument("--allow-cpu", action="store_true",
                    help="run on JAX's CPU backend too (slow; for trying the script)")
    args = ap.parse_args()

    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
    except ImportError as e:
        skip(args.sizes, f"no JAX ({e.name} cannot be imported)")
        return 0
    backend = jax.default_backend()
    if backend != "gpu" and not args.allow_cpu:
        skip(args.sizes, f"JAX has no GPU backend (default backend: {backend})")
        return 0
    jax.config.update("jax_enable_x64", False)
    device = str(jax.devices()[0].device_kind)
    eps2 = float(CLOUD_SOFTENING * CLOUD_SOFTENING)
    sqrt_k = math.sqrt(COULOMB_K)

    def make_eval(nb, block):
        def block_pair(tgt, src):
            # tgt (B, 4), src (B, 4): sums over the source block.
            d = tgt[:, None, :3] - src[None, :, :3]
            r2 = jnp.sum(d * d, axis=-1) + eps2
            inv = jax.lax.rsqrt(r2)
            w = src[None, :, 3] * inv
            acc = jnp.sum((w * inv * inv)[:, :, None] * d, axis=1)
            return acc, jnp.sum(w, axis=1)

        def per_target_block(tgt, src_blocks):
            def body(carry, src):
                acc, pot = carry
                a, p = block_pair(tgt, src)
                return (acc + a, pot + p), None
            init = (jnp.zeros((block, 3), jnp.float32), jnp.zeros((block,), jnp.float32))
            (acc, pot), _ = jax.lax.scan(body, init, src_blocks)
            q = tgt[:, 3]
            # The self pair's potential term q_i / eps (its force term is 0).
            pot = pot - q * jax.lax.rsqrt(jnp.float32(eps2))
            return jnp.concatenate([q[:, None] * acc, (q * pot)[:, None]], axis=1)

        @jax.jit
        def evaluate(src):
            blocks = src.reshape(nb, block, 4)
            out = jax.lax.map(lambda t: per_target_block(t, blocks), blocks)
            return out.reshape(nb * block, 4)

        return evaluate

    failed = False
    for n in args.sizes:
        block = min(args.block, n)
        nb = -(-n // block)
        pos, q = cloud(n, np)
        src = np.zeros((nb * block, 4), np.float32)
        src[:n, :3] = pos
        src[:n, 3] = q * sqrt_k
        src_d = jax.device_put(src)
        evaluate = make_eval(nb, block)
        t0 = time.perf_counter()
        out = evaluate(src_d).block_until_ready()
        compile_s = time.perf_counter() - t0
        # Warm-up by time (~0.2 s, at least 2 evaluations), which also sizes the timed run.
        warm, t0 = 0, time.perf_counter()
        while warm < 2 or time.perf_counter() - t0 < 0.2:
            out = evaluate(src_d)
            warm += 1
        out.block_until_ready()
        est = (time.perf_counter() - t0) / warm
        iters = max(args.min_iters, math.ceil(args.min_seconds / max(est, 1e-6)))
        t0 = time.perf_counter()
        for _ in range(iters):
            out = evaluate(src_d)
        out.block_until_ready()
        ms = (time.perf_counter() - t0) * 1e3 / iters
        f = np.asarray(out)[:n]
        inter = float(n) * float(n)
        ips = inter / (ms * 1e-3)
        print(json.dumps({
            "peer": "jax", "workload": "coulomb", "status": "ok", "n": n,
            "ms_per_eval": ms, "iterations": iters, "interactions_per_eval": inter,
            "interactions_per_second": ips, "flops_per_interaction": 20,
            "gflops": 20 * ips * 1e-9, "finite": bool(np.isfinite(f).all()),
            "block": block, "compile_seconds": compile_s, "backend": backend,
            "device": device, "jax_version": jax.__version__,
        }), flush=True)
        if args.check > 0:
            stride = max(n // args.check, 1)
            worst = 0.0
            for i in list(range(0, n, stride))[: args.check]:
                d = pos[i] - pos
                r2 = np.sum(d * d, axis=1) + CLOUD_SOFTENING ** 2
                s = COULOMB_K * q[i] * q / (r2 * np.sqrt(r2))
                f64 = np.sum(s[:, None] * d, axis=0)
                rel = float(np.linalg.norm(f[i, :3] - f64) / np.linalg.norm(f64))
                worst = max(worst, rel)
                print(json.dumps({
                    "peer": "jax", "check": True, "n": n, "i": i,
                    "x": pos[i].tolist(), "q": float(q[i]),
                    "force_f32": f[i, :3].astype(float).tolist(),
                    "force_f64": f64.tolist(), "rel_error": rel,
                }))
            print(f"jax_coulomb: n {n}: max relative force error {worst:.3e} at "
                  f"{args.check} charges", file=sys.stderr)
            if not worst <= CHECK_TOLERANCE:
                print(f"jax_coulomb: check failed: {worst:.3e} exceeds {CHECK_TOLERANCE:.0e}",
                      file=sys.stderr)
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
