"""msc against peer solvers on the same `msc bench` workloads: one table of ms/step and ratios.

One workload definition: msc's own (`examples/peer_workload.rs` writes the inputs and the
f64 reference's answers as JSON). Every peer reads that file, is checked against the
reference (Coulomb forces at t = 0 to f32 accuracy, positions after one step), then timed
in steady state. Rounds interleave msc (GPU and CPU backends) and the peers, each run a
fresh process; the number of timed steps of each runner is fixed in the first round (at
most --steps, about --seconds of work) and reused in the others.

Runners: msc-gpu and msc-cpu (`msc bench --backend gpu|cpu`), and the peers in PEERS:
Taichi's Vulkan and CPU backends, NVIDIA Warp on the CPU and on CUDA. A peer whose package
is missing or whose device is absent (no Vulkan for Taichi, no CUDA for Warp) is skipped
with the reason in the table. Taichi's Vulkan backend on a software Vulkan adapter runs on
the same device as msc-gpu: that ratio measures kernel quality on any device.

A peer is a class in PEERS with `coulomb(w)` and `cloth(w)` returning a `Run` (its
`forces()` and `step(k)` / `positions()`); to add one register it there, nothing else
changes. Run through `run.sh`, which builds msc and the venv.
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
        try:
            import taichi as ti
        except ImportError as e:
            raise Skip(f"taichi cannot be imported ({e})")

        self.ti = ti
        threads = os.environ.get("PEER_THREADS")
        kwargs = {"default_fp": ti.f32, "offline_cache": True, "log_level": ti.WARN}
        if threads:
            kwargs["cpu_max_num_threads"] = int(threads)
        ti.init(arch=getattr(ti, arch), **kwargs)
        # ti.init falls back to the CPU when the backend is missing: refuse to time that.
        got = ti.lang.impl.current_cfg().arch
        if got != getattr(ti, arch):
            raise Skip(f"taichi has no {arch} device (it fell back to {got.name})")

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
            # Elastic force on i and the clamped block W_k (docs/physics.md §4).
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
            # Weighted Jacobi (docs/physics.md (7.1)); pinned rows keep their velocity.
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

# ----------------------------------------------------------------------------- Warp


class Warp:
    """NVIDIA Warp, f32, one Warp thread per target / row, the same equations and CSR rows
    as the Taichi kernels."""

    def __init__(self, device):
        try:
            import warp as wp
        except ImportError as e:
            raise Skip(f"warp cannot be imported ({e})")
        wp.config.quiet = True
        wp.init()
        if device == "cuda" and not wp.is_cuda_available():
            raise Skip("warp finds no CUDA device")
        self.wp, self.device = wp, device

    def coulomb(self, w):
        wp, dev = self.wp, self.device
        n = w["n"]
        x0 = np.array(w["x"], dtype=np.float32).reshape(n, 3)
        k, h, eps2 = w["coulomb_k"], w["dt"], w["softening"] ** 2
        x = wp.array(x0, dtype=wp.vec3, device=dev)
        v = wp.zeros(n, dtype=wp.vec3, device=dev)
        f = wp.zeros(n, dtype=wp.vec3, device=dev)
        q = wp.array(np.array(w["q"], dtype=np.float32), dtype=float, device=dev)
        m = wp.array(np.array(w["m"], dtype=np.float32), dtype=float, device=dev)

        def forces():
            wp.launch(warp_coulomb, dim=n, inputs=[x, q, f, n, eps2, k], device=dev)

        def step(count):
            for _ in range(count):
                forces()
                wp.launch(warp_kick_drift, dim=n, inputs=[x, v, f, m, h], device=dev)
            wp.synchronize_device(dev)

        def get_forces():
            forces()
            return f.numpy()

        def reset():
            x.assign(x0)
            v.zero_()

        return Run(get_forces, step, x.numpy, reset)

    def cloth(self, w):
        wp, dev = self.wp, self.device
        n, ns = w["n"], len(w["spring_i"])
        h, omega, sweeps = w["dt"], w["omega"], w["sweeps"]
        g = wp.vec3(*w["gravity"])
        x0 = np.array(w["x"], dtype=np.float32).reshape(n, 3)

        def arr(key, dtype, npt):
            return wp.array(np.array(w[key], dtype=npt), dtype=dtype, device=dev)

        x = wp.array(x0, dtype=wp.vec3, device=dev)
        v, vtmp, b, dinv = (wp.zeros(n, dtype=wp.vec3, device=dev) for _ in range(4))
        m = arr("m", float, np.float32)
        pinned = arr("pinned", int, np.int32)
        si, sj = arr("spring_i", int, np.int32), arr("spring_j", int, np.int32)
        ks = arr("stiffness", float, np.float32)
        rest = arr("rest_length", float, np.float32)
        cs = arr("damping", float, np.float32)
        fs = wp.zeros(ns, dtype=wp.vec3, device=dev)
        wblk = wp.zeros(ns, dtype=wp.mat33, device=dev)
        offs = arr("csr_offsets", int, np.int32)
        esp, eoth = arr("csr_spring", int, np.int32), arr("csr_other", int, np.int32)
        esgn = arr("csr_sign", float, np.float32)

        def step(count):
            for _ in range(count):
                wp.launch(warp_assemble, dim=ns, inputs=[x, si, sj, ks, rest, cs, h, fs, wblk],
                          device=dev)
                wp.launch(warp_rhs, dim=n, inputs=[v, m, offs, esp, esgn, fs, wblk, g, h, b, dinv],
                          device=dev)
                for s in range(sweeps):
                    a, c = (v, vtmp) if s % 2 == 0 else (vtmp, v)
                    wp.launch(warp_sweep, dim=n,
                              inputs=[a, c, m, pinned, offs, esp, eoth, wblk, b, dinv, omega],
                              device=dev)
                if sweeps % 2 == 1:
                    wp.copy(v, vtmp)
                wp.launch(warp_drift, dim=n, inputs=[x, v, h], device=dev)
            wp.synchronize_device(dev)

        def reset():
            x.assign(x0)
            v.zero_()

        return Run(None, step, x.numpy, reset)


def define_warp_kernels():
    """Warp kernels must live at module level (Warp reads their source); defined only
    when Warp is imported."""
    import warp as wp

    g = globals()

    @wp.kernel
    def warp_coulomb(x: wp.array(dtype=wp.vec3), q: wp.array(dtype=float),
                     f: wp.array(dtype=wp.vec3), n: int, eps2: float, k: float):
        # The self pair adds an exact zero when eps > 0 (as in the workload).
        i = wp.tid()
        xi = x[i]
        a = wp.vec3(0.0, 0.0, 0.0)
        for j in range(n):
            d = xi - x[j]
            r2 = wp.dot(d, d) + eps2
            a = a + d * (q[j] / (r2 * wp.sqrt(r2)))
        f[i] = a * (k * q[i])

    @wp.kernel
    def warp_kick_drift(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                        f: wp.array(dtype=wp.vec3), m: wp.array(dtype=float), h: float):
        i = wp.tid()
        vi = v[i] + f[i] * (h / m[i])
        v[i] = vi
        x[i] = x[i] + vi * h

    @wp.kernel
    def warp_assemble(x: wp.array(dtype=wp.vec3), si: wp.array(dtype=int),
                      sj: wp.array(dtype=int), ks: wp.array(dtype=float),
                      rest: wp.array(dtype=float), cs: wp.array(dtype=float), h: float,
                      fs: wp.array(dtype=wp.vec3), wblk: wp.array(dtype=wp.mat33)):
        # Elastic force on i and the clamped block W_k (docs/physics.md §4).
        e = wp.tid()
        d = x[sj[e]] - x[si[e]]
        l = wp.length(d)
        nrm = wp.vec3(0.0, 0.0, 0.0)
        gt = float(0.0)
        if l > 0.0:
            nrm = d / l
            gt = wp.max(1.0 - rest[e] / l, 0.0)
        if rest[e] == 0.0:
            gt = 1.0
        fs[e] = nrm * (ks[e] * (l - rest[e]))
        nn = wp.outer(nrm, nrm)
        kh2 = h * h * ks[e]
        wblk[e] = nn * (kh2 + h * cs[e]) + (wp.identity(n=3, dtype=float) - nn) * (kh2 * gt)

    @wp.kernel
    def warp_rhs(v: wp.array(dtype=wp.vec3), m: wp.array(dtype=float),
                 offs: wp.array(dtype=int), esp: wp.array(dtype=int),
                 esgn: wp.array(dtype=float), fs: wp.array(dtype=wp.vec3),
                 wblk: wp.array(dtype=wp.mat33), g: wp.vec3, h: float,
                 b: wp.array(dtype=wp.vec3), dinv: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        f = wp.vec3(0.0, 0.0, 0.0)
        dg = wp.vec3(m[i], m[i], m[i])
        for e in range(offs[i], offs[i + 1]):
            f = f + fs[esp[e]] * esgn[e]
            wk = wblk[esp[e]]
            dg = dg + wp.vec3(wk[0, 0], wk[1, 1], wk[2, 2])
        b[i] = v[i] * m[i] + (f + g * m[i]) * h
        dinv[i] = wp.vec3(1.0 / dg[0], 1.0 / dg[1], 1.0 / dg[2])

    @wp.kernel
    def warp_sweep(vin: wp.array(dtype=wp.vec3), vout: wp.array(dtype=wp.vec3),
                   m: wp.array(dtype=float), pinned: wp.array(dtype=int),
                   offs: wp.array(dtype=int), esp: wp.array(dtype=int),
                   eoth: wp.array(dtype=int), wblk: wp.array(dtype=wp.mat33),
                   b: wp.array(dtype=wp.vec3), dinv: wp.array(dtype=wp.vec3), omega: float):
        # Weighted Jacobi (docs/physics.md (7.1)); pinned rows keep their velocity.
        i = wp.tid()
        vi = vin[i]
        if pinned[i] != 0:
            vout[i] = vi
        else:
            av = vi * m[i]
            for e in range(offs[i], offs[i + 1]):
                av = av + wblk[esp[e]] * (vi - vin[eoth[e]])
            vout[i] = vi + wp.cw_mul(dinv[i], b[i] - av) * omega

    @wp.kernel
    def warp_drift(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), h: float):
        i = wp.tid()
        x[i] = x[i] + v[i] * h

    g.update(warp_coulomb=warp_coulomb, warp_kick_drift=warp_kick_drift,
             warp_assemble=warp_assemble, warp_rhs=warp_rhs, warp_sweep=warp_sweep,
             warp_drift=warp_drift)


class Skip(Exception):
    """The peer cannot run here (package or device missing); the reason goes in the table."""


def warp_peer(device):
    def make():
        impl = Warp(device)
        define_warp_kernels()
        return impl

    return make


class Run:
    def __init__(self, forces, step, positions, reset):
        self.forces, self.step, self.positions, self.reset = forces, step, positions, reset


PEERS = {
    "taichi-vulkan": lambda: Taichi("vulkan"),
    "taichi-cpu": lambda: Taichi("cpu"),
    "warp-cuda": warp_peer("cuda"),
    "warp-cpu": warp_peer("cpu"),
}


# ----------------------------------------------------------------------------- worker

# A peer agrees with the f64 reference when its f32 forces are within these relative errors
# (median, max; f32 sums of 4K to 64K terms give about 1e-6 and 1e-5, a wrong term or sign
# gives order 1) and its positions after one step within X1_TOL times the largest
# coordinate (a few f32 ulps).
FORCE_TOL = (1e-5, 1e-3)
X1_TOL = 1e-6


def worker(peer, path, steps, warmup, seconds, max_steps):
    """One peer, one workload, in this process: check against the reference, then time.
    steps = 0: as many steps as fill about `seconds` (at least 1, at most `max_steps`)."""
    with open(path) as f:
        w = json.load(f)
    try:
        impl = PEERS[peer]()
        run = getattr(impl, w["workload"])(w)
    except Skip as e:
        print(json.dumps({"skipped": str(e)}))
        return
    out = {}
    n = w["n"]
    ok = True
    if run.forces is not None:
        ref = np.array(w["reference_forces"]).reshape(n, 3)
        got = run.forces().astype(np.float64)
        rel = np.linalg.norm(got - ref, axis=1) / np.maximum(np.linalg.norm(ref, axis=1), 1e-300)
        out["force_rel_err_median"] = float(np.median(rel))
        out["force_rel_err_max"] = float(np.max(rel))
        ok &= out["force_rel_err_median"] <= FORCE_TOL[0]
        ok &= out["force_rel_err_max"] <= FORCE_TOL[1]
    x1 = np.array(w["reference_x1"]).reshape(n, 3)
    run.step(1)
    got = run.positions().astype(np.float64)
    out["x1_abs_err_max"] = float(np.max(np.abs(got - x1)))
    ok &= out["x1_abs_err_max"] <= X1_TOL * max(1.0, float(np.max(np.abs(x1))))
    out["check"] = "ok" if ok else "FAILED"
    run.reset()
    run.step(warmup)
    if steps == 0:
        t = time.perf_counter()
        run.step(1)
        steps = max(1, min(max_steps, round(seconds / max(time.perf_counter() - t, 1e-9))))
    t = time.perf_counter()
    run.step(steps)
    out["ms_per_step"] = (time.perf_counter() - t) * 1e3 / steps
    out["steps"] = steps
    print(json.dumps(out))


# ----------------------------------------------------------------------------- driver


def parse_size(s):
    s = s.strip()
    scale = {"k": 1024, "m": 1 << 20}.get(s[-1].lower(), 1)
    return int(s[:-1] if scale > 1 else s) * scale


def msc_run(msc, backend, kind, n, steps, warmup, sweeps):
    cmd = [msc, "bench", "--backend", backend, "--workload", kind, "--sizes", str(n),
           "--steps", str(steps), "--warmup", str(warmup), "--sweeps", str(sweeps),
           "--profile-steps", "0", "--max-seconds", "1000", "--quiet",
           # The peers' protocol: `warmup` steps, then one timed block.
           "--warmup-ms", "0", "--repeats", "1"]
    line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[0]
    rec = json.loads(line)
    if rec["status"] != "ok":
        return {"skipped": f"msc bench: {rec['status']}: {rec.get('reason')}"}
    return rec


def spread(v):
    return f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msc", help="the msc binary")
    ap.add_argument("--exporter", help="the peer_workload example binary")
    ap.add_argument("--workloads", default="coulomb:4K,coulomb:16K,cloth:16K,cloth:64K",
                    help="KIND:SIZE list, sizes as in msc bench (cloth 16K = 128 x 128)")
    ap.add_argument("--msc-backends", default="gpu,cpu", help="msc bench backends to time")
    ap.add_argument("--peers", default=",".join(PEERS), help=f"comma list of {list(PEERS)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per run, at most")
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="fewer timed steps when a step takes longer than SECONDS / --steps")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--sweeps", type=int, default=20)
    ap.add_argument("--out", help="also write every measurement as JSON lines to this file")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS,
                    metavar=("PEER", "JSON", "STEPS", "WARMUP", "SECONDS", "MAX_STEPS"))
    a = ap.parse_args()
    if a.worker:
        peer, path, steps, warmup, seconds, max_steps = a.worker
        return worker(peer, path, int(steps), int(warmup), float(seconds), int(max_steps))
    peers = [p for p in a.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        sys.exit(f"unknown peers {unknown}; known: {list(PEERS)}")
    runners = [f"msc-{b}" for b in a.msc_backends.split(",") if b] + peers
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for item in a.workloads.split(","):
            kind, size = item.split(":")
            n = parse_size(size)
            path = os.path.join(tmp, f"{kind}_{n}.json")
            with open(path, "w") as f:
                subprocess.run([a.exporter, kind, str(n), str(a.sweeps)], check=True, stdout=f)
            jobs.append((kind, n, path))
        times = {(k, n, r): [] for k, n, _ in jobs for r in runners}
        info, steps = {}, {}
        for rnd in range(a.rounds):
            for kind, n, path in jobs:
                for r in runners:
                    key = (kind, n, r)
                    if "skipped" in info.get(key, {}):
                        continue
                    if r.startswith("msc-"):
                        backend = r[4:]
                        if key not in steps:
                            probe = msc_run(a.msc, backend, kind, n, 1, 1, a.sweeps)
                            ms = probe.get("ms_per_step", 1.0)
                            steps[key] = max(1, min(a.steps, round(a.seconds * 1e3 / ms)))
                        res = msc_run(a.msc, backend, kind, n, steps[key], a.warmup, a.sweeps)
                        if "skipped" not in res:
                            adapter = res.get("adapter") or {}
                            res = {"ms_per_step": res["ms_per_step"], "steps": steps[key],
                                   "device": adapter.get("name") or f"{res.get('threads')} threads",
                                   "driver": " ".join(filter(None, (adapter.get("driver"),
                                                                      adapter.get("driver_info"))))}
                    else:
                        cmd = [sys.executable, __file__, "--worker", r, path,
                               str(steps.get(key, 0)), str(a.warmup), str(a.seconds), str(a.steps)]
                        proc = subprocess.run(cmd, capture_output=True, text=True)
                        lines = proc.stdout.strip().splitlines()
                        if proc.returncode != 0 or not lines:
                            sys.exit(f"{r} on {kind} {n} failed:\n{proc.stderr[-3000:]}")
                        res = json.loads(lines[-1])
                        if "steps" in res:
                            steps[key] = res["steps"]
                    if "skipped" in res:
                        info[key] = res
                        print(f"{r} {kind} {n}: skipped: {res['skipped']}", file=sys.stderr)
                        continue
                    times[key].append(res.pop("ms_per_step"))
                    info[key] = res
                    records.append({"round": rnd + 1, "workload": kind, "n": n, "runner": r,
                                    "ms_per_step": times[key][-1], **res})
            print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr)
    if a.out:
        with open(a.out, "w") as f:
            f.writelines(json.dumps(rec) + "\n" for rec in records)
    bases = [r for r in runners if r.startswith("msc-")]
    head = ["workload", "n", "runner", "ms/step median [min-max]", "steps"]
    head += [f"/ {b}" for b in bases] + ["check against the f64 reference"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    failed = False
    for kind, n, _ in jobs:
        for r in runners:
            key = (kind, n, r)
            res, t = info.get(key, {}), times[key]
            if not t:
                row = [kind, str(n), r, "skipped", "-"] + ["-"] * len(bases)
                row.append(res.get("skipped", "-"))
                print("| " + " | ".join(row) + " |")
                continue
            ratios = []
            for b in bases:
                tb = times[(kind, n, b)]
                ratios.append(f"{statistics.median(t) / statistics.median(tb):.2f}" if tb else "-")
            if r.startswith("msc-"):
                note = f"{res.get('device')}" + (f", {res['driver']}" if res.get("driver") else "")
            else:
                failed |= res.get("check") != "ok"
                note = res.get("check", "?") + ": " + ", ".join(
                    f"{k} {v:.1e}" for k, v in res.items()
                    if k not in ("check", "steps") and isinstance(v, float))
            row = [kind, str(n), r, spread(t), str(res.get("steps"))] + ratios + [note]
            print("| " + " | ".join(row) + " |")
    print("\nRatios: the runner's median time over the msc backend's (above 1: msc is faster).")
    tv = "taichi-vulkan"
    if "msc-gpu" in runners and tv in runners:
        print(f"Target (issue: msc-gpu <= 0.75 x {tv} on every shared workload):")
        for kind, n, _ in jobs:
            a_, b_ = times[(kind, n, "msc-gpu")], times[(kind, n, tv)]
            if a_ and b_:
                q = statistics.median(a_) / statistics.median(b_)
                print(f"- {kind} {n}: msc-gpu / {tv} = {q:.2f}: {'PASS' if q <= 0.75 else 'FAIL'}")
            else:
                print(f"- {kind} {n}: NOT MEASURED")
    if failed:
        sys.exit("a peer disagrees with the f64 reference (see the check column)")


if __name__ == "__main__":
    main()
