"""msc against peer solvers on the same `msc bench` workloads: one table of ms/step and ratios.

One workload definition: msc's own (`examples/peer_workload.rs` writes the inputs and the
f64 reference's answers as JSON). Every peer reads that file, is checked against the
reference (Coulomb forces at t = 0 to f32 accuracy, positions after one step), then timed
in steady state. Rounds interleave msc and the peers, each run a fresh process.

A peer is a class in PEERS with `coulomb(w)` and `cloth(w)` returning a `Run` (its
`forces()` and `step(k)` / `positions()`); to add one (Taichi-Vulkan, Warp, JAX) register
it there, nothing else changes. Run through `run.sh`, which builds msc and the venv.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


# ----------------------------------------------------------------------------- Taichi


class Taichi:
    """Taichi, f32, data-parallel kernels in Taichi's idiom (structure-of-arrays fields)."""

    def __init__(self, arch):
        import taichi as ti

        self.ti = ti
        threads = os.environ.get("PEER_THREADS")
        kwargs = {"default_fp": ti.f32, "offline_cache": True, "log_level": ti.WARN}
        if threads:
            kwargs["cpu_max_num_threads"] = int(threads)
        ti.init(arch=getattr(ti, arch), **kwargs)

    def coulomb(self, w):
        ti = self.ti
        n = w["n"]
        x = np.array(w["x"]).reshape(n, 3)
        px, py, pz, vx, vy, vz, q, m = (ti.field(ti.f32, n) for _ in range(8))
        fx, fy, fz = (ti.field(ti.f32, n) for _ in range(3))
        eps2 = w["softening"] ** 2
        k, h = w["coulomb_k"], w["dt"]

        @ti.kernel
        def forces():
            # The self pair adds an exact zero when eps > 0 (as in the workload).
            for i in range(n):
                xi, yi, zi = px[i], py[i], pz[i]
                ax, ay, az = 0.0, 0.0, 0.0
                for j in range(n):
                    dx, dy, dz = xi - px[j], yi - py[j], zi - pz[j]
                    r2 = dx * dx + dy * dy + dz * dz + eps2
                    s = q[j] / (r2 * ti.sqrt(r2))
                    ax += dx * s
                    ay += dy * s
                    az += dz * s
                kq = k * q[i]
                fx[i], fy[i], fz[i] = kq * ax, kq * ay, kq * az

        @ti.kernel
        def kick_drift():
            for i in range(n):
                a = h / m[i]
                vx[i] += a * fx[i]
                vy[i] += a * fy[i]
                vz[i] += a * fz[i]
                px[i] += h * vx[i]
                py[i] += h * vy[i]
                pz[i] += h * vz[i]

        def reset():
            for f, col in ((px, 0), (py, 1), (pz, 2)):
                f.from_numpy(x[:, col].astype(np.float32))
            for f in (vx, vy, vz):
                f.fill(0.0)

        q.from_numpy(np.array(w["q"], dtype=np.float32))
        m.from_numpy(np.array(w["m"], dtype=np.float32))
        reset()

        def step(count):
            for _ in range(count):
                forces()
                kick_drift()
            ti.sync()

        def get_forces():
            forces()
            return np.stack([fx.to_numpy(), fy.to_numpy(), fz.to_numpy()], 1)

        def positions():
            return np.stack([px.to_numpy(), py.to_numpy(), pz.to_numpy()], 1)

        return Run(get_forces, step, positions, reset)

    def cloth(self, w):
        ti = self.ti
        n, ns = w["n"], len(w["spring_i"])
        h, omega, sweeps = w["dt"], w["omega"], w["sweeps"]
        g = ti.Vector(w["gravity"])
        x = ti.Vector.field(3, ti.f32, n)
        v, b, vtmp, dinv = (ti.Vector.field(3, ti.f32, n) for _ in range(4))
        m = ti.field(ti.f32, n)
        pinned = ti.field(ti.i32, n)
        si, sj = ti.field(ti.i32, ns), ti.field(ti.i32, ns)
        ks, rest, cs = (ti.field(ti.f32, ns) for _ in range(3))
        fs = ti.Vector.field(3, ti.f32, ns)
        wblk = ti.Matrix.field(3, 3, ti.f32, ns)
        offs = ti.field(ti.i32, n + 1)
        nent = len(w["csr_spring"])
        esp, eoth, esgn = (ti.field(ti.i32, nent) for _ in range(3))

        @ti.kernel
        def assemble():
            # Elastic force on i and the clamped block W_k (DESIGN section 2).
            for e in range(ns):
                d = x[sj[e]] - x[si[e]]
                l = d.norm()
                nrm = ti.Vector([0.0, 0.0, 0.0])
                gt = 0.0
                if l > 0.0:
                    nrm = d / l
                    gt = ti.max(1.0 - rest[e] / l, 0.0)
                if rest[e] == 0.0:
                    gt = 1.0
                fs[e] = nrm * (ks[e] * (l - rest[e]))
                nn = nrm.outer_product(nrm)
                kh2 = h * h * ks[e]
                wblk[e] = nn * (kh2 + h * cs[e]) + (ti.Matrix.identity(ti.f32, 3) - nn) * (kh2 * gt)

        @ti.kernel
        def rhs():
            for i in range(n):
                f = ti.Vector([0.0, 0.0, 0.0])
                dg = ti.Vector([m[i], m[i], m[i]])
                for e in range(offs[i], offs[i + 1]):
                    f += fs[esp[e]] * esgn[e]
                    wk = wblk[esp[e]]
                    dg += ti.Vector([wk[0, 0], wk[1, 1], wk[2, 2]])
                b[i] = v[i] * m[i] + (f + g * m[i]) * h
                dinv[i] = 1.0 / dg

        @ti.kernel
        def sweep(vin: ti.template(), vout: ti.template()):
            # Weighted Jacobi (seed 000 eq. 48); pinned rows keep their velocity.
            for i in range(n):
                vi = vin[i]
                if pinned[i] != 0:
                    vout[i] = vi
                else:
                    av = vi * m[i]
                    for e in range(offs[i], offs[i + 1]):
                        av += wblk[esp[e]] @ (vi - vin[eoth[e]])
                    vout[i] = vi + dinv[i] * (b[i] - av) * omega

        @ti.kernel
        def drift():
            for i in range(n):
                x[i] += v[i] * h

        x0 = np.array(w["x"], dtype=np.float32).reshape(n, 3)

        def reset():
            x.from_numpy(x0)
            v.fill(0.0)

        m.from_numpy(np.array(w["m"], dtype=np.float32))
        pinned.from_numpy(np.array(w["pinned"], dtype=np.int32))
        si.from_numpy(np.array(w["spring_i"], dtype=np.int32))
        sj.from_numpy(np.array(w["spring_j"], dtype=np.int32))
        ks.from_numpy(np.array(w["stiffness"], dtype=np.float32))
        rest.from_numpy(np.array(w["rest_length"], dtype=np.float32))
        cs.from_numpy(np.array(w["damping"], dtype=np.float32))
        offs.from_numpy(np.array(w["csr_offsets"], dtype=np.int32))
        esp.from_numpy(np.array(w["csr_spring"], dtype=np.int32))
        eoth.from_numpy(np.array(w["csr_other"], dtype=np.int32))
        esgn.from_numpy(np.array(w["csr_sign"], dtype=np.int32))
        reset()

        def step(count):
            for _ in range(count):
                assemble()
                rhs()
                for s in range(sweeps):
                    if s % 2 == 0:
                        sweep(v, vtmp)
                    else:
                        sweep(vtmp, v)
                if sweeps % 2 == 1:
                    v.copy_from(vtmp)
                drift()
            ti.sync()

        return Run(None, step, x.to_numpy, reset)


class Run:
    def __init__(self, forces, step, positions, reset):
        self.forces, self.step, self.positions, self.reset = forces, step, positions, reset


PEERS = {
    "taichi-cpu": lambda: Taichi("cpu"),
}


# ----------------------------------------------------------------------------- worker


def worker(peer, path, steps, warmup):
    """One peer, one workload, in this process: check against the reference, then time."""
    with open(path) as f:
        w = json.load(f)
    impl = PEERS[peer]()
    run = getattr(impl, w["workload"])(w)
    out = {}
    n = w["n"]
    if run.forces is not None:
        ref = np.array(w["reference_forces"]).reshape(n, 3)
        got = run.forces().astype(np.float64)
        err = np.linalg.norm(got - ref, axis=1)
        scale = np.linalg.norm(ref, axis=1)
        out["force_rel_err_max"] = float(np.max(err / np.maximum(scale, 1e-300)))
        out["force_rel_err_median"] = float(np.median(err / np.maximum(scale, 1e-300)))
    x0 = np.array(w["x"]).reshape(n, 3)
    x1 = np.array(w["reference_x1"]).reshape(n, 3)
    run.step(1)
    got = run.positions().astype(np.float64)
    out["x1_abs_err_max"] = float(np.max(np.abs(got - x1)))
    disp = np.linalg.norm(x1 - x0, axis=1)
    out["x1_err_over_max_displacement"] = out["x1_abs_err_max"] / max(float(np.max(disp)), 1e-300)
    run.reset()
    run.step(warmup)
    t = time.perf_counter()
    run.step(steps)
    out["ms_per_step"] = (time.perf_counter() - t) * 1e3 / steps
    print(json.dumps(out))


# ----------------------------------------------------------------------------- driver


def parse_size(s):
    s = s.strip()
    scale = {"k": 1024, "m": 1 << 20}.get(s[-1].lower(), 1)
    return int(s[:-1] if scale > 1 else s) * scale


def msc_run(msc, kind, n, steps, warmup, sweeps):
    cmd = [msc, "bench", "--backend", "cpu", "--workload", kind, "--sizes", str(n),
           "--steps", str(steps), "--warmup", str(warmup), "--sweeps", str(sweeps), "--quiet",
           # The peers' protocol: `warmup` steps, then one timed block.
           "--warmup-ms", "0", "--repeats", "1"]
    line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[0]
    rec = json.loads(line)
    if rec["status"] != "ok":
        sys.exit(f"msc bench {kind} {n}: {rec['status']}: {rec.get('reason')}")
    return rec


def spread(v):
    return f"{statistics.median(v):9.2f} [{min(v):.2f}-{max(v):.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msc", help="the msc binary")
    ap.add_argument("--exporter", help="the peer_workload example binary")
    ap.add_argument("--workloads", default="coulomb:4K,coulomb:16K,cloth:16K,cloth:64K",
                    help="KIND:SIZE list, sizes as in msc bench (cloth 16K = 128 x 128)")
    ap.add_argument("--peers", default="taichi-cpu", help=f"comma list of {sorted(PEERS)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--sweeps", type=int, default=20)
    ap.add_argument("--worker", nargs=4, metavar=("PEER", "JSON", "STEPS", "WARMUP"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        peer, path, steps, warmup = a.worker
        return worker(peer, path, int(steps), int(warmup))
    peers = a.peers.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for item in a.workloads.split(","):
            kind, size = item.split(":")
            n = parse_size(size)
            path = os.path.join(tmp, f"{kind}_{n}.json")
            with open(path, "w") as f:
                subprocess.run([a.exporter, kind, str(n), str(a.sweeps)], check=True, stdout=f)
            jobs.append((kind, n, path))
        times = {(k, n, p): [] for k, n, _ in jobs for p in ["msc"] + peers}
        checks, threads = {}, {}
        for r in range(a.rounds):
            for kind, n, path in jobs:
                rec = msc_run(a.msc, kind, n, a.steps, a.warmup, a.sweeps)
                times[(kind, n, "msc")].append(rec["ms_per_step"])
                threads[(kind, n)] = rec.get("threads")
                for p in peers:
                    out = subprocess.run(
                        [sys.executable, __file__, "--worker", p, path, str(a.steps), str(a.warmup)],
                        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
                    res = json.loads(out)
                    times[(kind, n, p)].append(res.pop("ms_per_step"))
                    checks[(kind, n, p)] = res
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(f"{'workload':9} {'n':>7} {'peer':12} {'ms/step median [min-max]':>28} "
          f"{'peer/msc':>9}  check")
    for kind, n, _ in jobs:
        base = statistics.median(times[(kind, n, "msc")])
        print(f"{kind:9} {n:7} {'msc-cpu':12} {spread(times[(kind, n, 'msc')]):>28} {1.0:9.2f}  "
              f"threads {threads[(kind, n)]}")
        for p in peers:
            t = times[(kind, n, p)]
            c = checks[(kind, n, p)]
            note = ", ".join(f"{k} {v:.1e}" for k, v in c.items())
            print(f"{'':9} {'':7} {p:12} {spread(t):>28} {statistics.median(t) / base:9.2f}  {note}")


if __name__ == "__main__":
    main()
