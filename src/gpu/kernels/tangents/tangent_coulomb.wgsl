// Forward sensitivities (grad::jvp::field_forces_jvp on the GPU): for direction disp.iter,
// the tangent of the explicit field forces on each active particle i (q_i != 0 or
// dq_i != 0), written to bd[bd_b(i)].xyz for tangent_forces:
//   k_c sum_j [(dq_i q_j + q_i dq_j) phi_ij + q_i q_j G_ij (dx_i - dx_j)]  (TANGENT_ALL_PAIRS)
// + k_c sum_e [(dq_i q_e + q_i dq_e) phi_ie + q_i q_e G_ie (dx_i - dx_e(t))]
// + dq_i E(x_i) + q_i (grad E) dx_i,
// phi = d / (r^2 + eps^2)^(3/2), G delta = (delta - 3 d (d . delta) / r2) / r2^(3/2),
// d = x_i - x_j, t the step clock's time, or t + h with TANGENT_LATER (Verlet's second
// force, evaluated before the clock advances). Sources and targets are the direction's
// active particles (the list actives[d n ..], disp.block of them); charges are scaled by
// sqrt(k_c) as in props. The source tile carries (x_j, qs_j) in its first half and
// (dx_j, dqs_j) in its second.
// Bank layouts (src/gpu/solver/tangent.rs): tstate[d 2n + i] = dx_i, tstate[d 2n + n + i] = dv_i;
// tdir[d s + i] = (dq_i sqrt(k_c), dq_i, 0, 0), tdir[d s + n + k] = (k, L, c, dk) per
// spring, tdir[d s + n + n_springs + e] = (dx_e(0), dq_e sqrt(k_c)), s = n + n_springs + n_ext.

// With TANGENT_TRANSPOSE (the adjoint, grad::vjp::field_forces_vjp) the external field's
// term is q_i (grad E)^T dx_i instead: the rest is the Hessian of a potential, symmetric,
// so for a zero direction the kernel gives (d f_field / dx)^T applied to dx.

// disp.mode bits (gpu::kernels::tangents::CoulombTangentBit).
const TANGENT_ALL_PAIRS: u32 = 1u;
const TANGENT_LATER: u32 = 2u;
const TANGENT_TRANSPOSE: u32 = 4u;

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> tstate: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> tdir: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> actives: array<u32>;
@group(0) @binding(6) var<storage, read> clock: array<u32>;
@group(0) @binding(7) var<storage, read_write> bd: array<vec4<f32>>;

const HALF: u32 = TILE / 2u;
var<workgroup> tile: array<vec4<f32>, TILE>;
// Targets per invocation (register blocking), set by the host at pipeline creation
// (`Kernel::cpu_targets`): a divisor of WG, at most MAX_TARGETS; the workgroup has
// WG / TARGETS invocations and still owns WG targets.
override TARGETS: u32 = 1u;
const MAX_TARGETS: u32 = 8u;

// (phi, G delta) of one pair; zero for a coincident pair without softening (r2 = 0): the
// self pair is then masked by index, and a coincident pair of charges has already made
// the forward force non-finite (inv_dist), so the run has stopped as diverged.
struct Pair {
    phi: vec3<f32>,
    gd: vec3<f32>,
}

fn pair(d: vec3<f32>, delta: vec3<f32>) -> Pair {
    let inv = inv_dist_or_zero(dot(d, d) + params.world.eps2);
    let inv3 = inv * inv * inv;
    return Pair(d * inv3, (delta - (3.0 * dot(d, delta) * inv * inv) * d) * inv3);
}

// d x_e(t) = R(t) d x_e(0): an orbiting charge's path rotates with its start.
fn ext_tangent(e: ExtCharge, t: f32, dx0: vec3<f32>) -> vec3<f32> {
    if (e.axis.w == 0.0) {
        return dx0;
    }
    let a = e.center.w * t;
    let c = cos(a);
    let s = sin(a);
    let k = e.axis.xyz;
    return dx0 * c + cross(k, dx0) * s + k * dot(k, dx0) * (1.0 - c);
}

// (grad E(x)) dx of the swirl (kind 2) and vortex (kind 3) fields; z clamped to
// |z| >= min_z, where dz = 0 (grad::jvp::field_jvp).
fn field_tangent(xi: vec3<f32>, dxi: vec3<f32>) -> vec3<f32> {
    if (params.world.field_kind != FIELD_SWIRL && params.world.field_kind != FIELD_VORTEX) {
        return vec3<f32>(0.0);
    }
    let scale = params.world.field.x;
    let min_z = params.world.field.y;
    var z = xi.z;
    var dz = dxi.z;
    if (abs(z) < min_z) {
        z = select(min_z, -min_z, z < 0.0);
        dz = 0.0;
    }
    let dy = scale * (dxi.y / z - xi.y * dz / (z * z));
    let dxz = scale * (dxi.x / z - xi.x * dz / (z * z));
    if (params.world.field_kind == FIELD_VORTEX) {
        return vec3<f32>(-dy, dxz, 0.0);
    }
    return vec3<f32>(dy, dxz, 0.0);
}

// (grad E(x))^T w, the transpose of field_tangent, from it along each axis
// (ExternalField::vjp).
fn field_vjp(xi: vec3<f32>, w: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(
        dot(field_tangent(xi, vec3<f32>(1.0, 0.0, 0.0)), w),
        dot(field_tangent(xi, vec3<f32>(0.0, 1.0, 0.0)), w),
        dot(field_tangent(xi, vec3<f32>(0.0, 0.0, 1.0)), w),
    );
}

@compute @workgroup_size(WG / TARGETS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lanes = WG / TARGETS;
    let na = disp.block;
    let n = params.n;
    let sbase = disp.iter * 2u * n;
    let dbase = disp.iter * (n + params.n_springs + params.world.n_ext);
    let abase = disp.iter * n;
    // Target r of this invocation: active index first + lid + r lanes. Each target sums its
    // sources in index order, whatever TARGETS is.
    let first = group_index(wid, nwg) * WG;
    var ti: array<u32, MAX_TARGETS>;
    var xs: array<vec3<f32>, MAX_TARGETS>;
    var dxs: array<vec3<f32>, MAX_TARGETS>;
    // a1 = sum_j qs_j phi_j, a2 = sum_j (dqs_j phi_j + qs_j G_j delta_j).
    var a1: array<vec3<f32>, MAX_TARGETS>;
    var a2: array<vec3<f32>, MAX_TARGETS>;
    for (var r = 0u; r < TARGETS; r = r + 1u) {
        let c = first + lid + r * lanes;
        var i = 0u;
        if (c < na) {
            i = actives[abase + c];
        }
        ti[r] = i;
        xs[r] = x[i].xyz;
        dxs[r] = tstate[sbase + i].xyz;
        a1[r] = vec3<f32>(0.0);
        a2[r] = vec3<f32>(0.0);
    }
    if ((disp.mode & TANGENT_ALL_PAIRS) != 0u) {
        // Every invocation loads and syncs, valid or not (uniform control flow).
        for (var base = 0u; base < na; base = base + HALF) {
            for (var r = 0u; r < TARGETS; r = r + 1u) {
                let e = lid + r * lanes;
                let s = base + (e % HALF);
                var entry = vec4<f32>(0.0);
                if (s < na) {
                    let j = actives[abase + s];
                    if (e < HALF) {
                        entry = vec4<f32>(x[j].xyz, props[j].y);
                    } else {
                        entry = vec4<f32>(tstate[sbase + j].xyz, tdir[dbase + j].x);
                    }
                }
                tile[e] = entry;
            }
            workgroupBarrier();
            if ((base >= first && base < first + WG) || base + HALF > na) {
                // The tiles holding this workgroup's own targets and the last, partial
                // one: the self pair is skipped by index, the loop stops at the last source.
                let count = min(HALF, na - base);
                for (var k = 0u; k < count; k = k + 1u) {
                    let src = tile[k];
                    let tan = tile[HALF + k];
                    for (var r = 0u; r < TARGETS; r = r + 1u) {
                        let p = pair(xs[r] - src.xyz, dxs[r] - tan.xyz);
                        let on = select(1.0, 0.0, base + k == first + lid + r * lanes);
                        a1[r] = a1[r] + (on * src.w) * p.phi;
                        a2[r] = a2[r] + on * (tan.w * p.phi + src.w * p.gd);
                    }
                }
            } else {
                // A full tile of other targets' sources: a constant trip count, no test.
                for (var k = 0u; k < HALF; k = k + 1u) {
                    let src = tile[k];
                    let tan = tile[HALF + k];
                    for (var r = 0u; r < TARGETS; r = r + 1u) {
                        let p = pair(xs[r] - src.xyz, dxs[r] - tan.xyz);
                        a1[r] = a1[r] + src.w * p.phi;
                        a2[r] = a2[r] + (tan.w * p.phi + src.w * p.gd);
                    }
                }
            }
            workgroupBarrier();
        }
    }
    let t = clock_time(clock[0], clock[1], select(0u, 1u, (disp.mode & TANGENT_LATER) != 0u), params.world.dt);
    let ebase = dbase + n + params.n_springs;
    for (var r = 0u; r < TARGETS; r = r + 1u) {
        if (first + lid + r * lanes >= na) {
            continue;
        }
        let i = ti[r];
        let xi = xs[r];
        let dxi = dxs[r];
        let pr = props[i];
        let td = tdir[dbase + i];
        let qs = pr.y;
        let dqs = td.x;
        var f = dqs * a1[r] + qs * a2[r];
        for (var k = 0u; k < params.world.n_ext; k = k + 1u) {
            let e = params.world.ext[k];
            let te = tdir[ebase + k];
            let p = pair(xi - ext_position(e, t), dxi - ext_tangent(e, t, te.xyz));
            f = f + (dqs * e.pos0.w + qs * te.w) * p.phi + (qs * e.pos0.w) * p.gd;
        }
        var fd = field_tangent(xi, dxi);
        if ((disp.mode & TANGENT_TRANSPOSE) != 0u) {
            fd = field_vjp(xi, dxi);
        }
        f = f + td.y * field_at(0u, xi) + pr.z * fd;
        bd[bd_b(i)] = vec4<f32>(f, 0.0);
    }
}
