// Shared declarations, prepended to every kernel (see src/gpu/shaders.rs).
// The structs below MUST match the #[repr(C)] mirrors in src/gpu/layout.rs;
// tests/shaders.rs compares their sizes and field offsets through naga.

// Invocations per workgroup of every 1D kernel (WebGPU default limit: 256).
const WG: u32 = 256u;
// Coulomb sources per workgroup-memory tile (one per invocation): 4 KiB.
const TILE: u32 = 256u;
const MAX_EXT_CHARGES: u32 = 8u;
// Bit 31 of an adjacency entry's second word: the row's particle is the spring's j.
const SIGN_BIT: u32 = 0x80000000u;
const NO_RANK: u32 = 0xffffffffu;

// Scalar slots (vec4 each) of the `scalars` buffer.
const SLOT_PQ: u32 = 0u;
const SLOT_RZ: u32 = 1u; // and 2u: ping-pong by iteration parity
const SLOT_RESIDUAL: u32 = 3u;
const SLOT_ENERGY: u32 = 4u; // and 5u

// An external point charge. Position at time t: pos0 rotated about `axis` through
// `center` by angular velocity * t (Rodrigues), as config::ExternalCharge::position_at.
struct ExtCharge {
    // xyz: position at t = 0 (m); w: charge * sqrt(k_c)
    pos0: vec4<f32>,
    // xyz: orbit center; w: angular velocity (rad/s)
    center: vec4<f32>,
    // xyz: unit orbit axis; w: 1 when orbiting, 0 when static
    axis: vec4<f32>,
}

// Constant over a run; written once at setup.
struct Params {
    n: u32,
    n_springs: u32,
    n_charged: u32,
    n_ext: u32,
    // time step h, h^2, Jacobi relaxation omega, softening eps^2
    dt: f32,
    dt2: f32,
    omega: f32,
    eps2: f32,
    // xyz: gravity (m/s^2)
    gravity: vec4<f32>,
    // field_kind 1: xyz = E (V/m); field_kind 2 (swirl), 3 (vortex): x = scale, y = min_z
    field: vec4<f32>,
    // 0 none, 1 uniform, 2 swirl, 3 vortex
    field_kind: u32,
    // workgroups of a per-particle dispatch = number of partial sums per block
    n_wg: u32,
    // 1: invert the 3x3 diagonal block (block Jacobi, Chebyshev); 0: scalar diagonal
    block_diag: u32,
    _pad0: u32,
    ext: array<ExtCharge, MAX_EXT_CHARGES>,
}

// Per-dispatch values, selected with a dynamic uniform offset so that a whole batch of
// steps is recorded without writing any buffer between dispatches.
struct Dispatch {
    // solver iteration index (CG: only its parity is used)
    iter: u32,
    // kernel-specific mode
    mode: u32,
    // target slot of a reduction
    slot: u32,
    // source block of a reduction
    block: u32,
    // Chebyshev weight omega_{k+1}
    weight: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// Sizes and switches of one DDEF evaluation (the ddef_* kernels read it from a storage
// buffer written with each upload, since the group count changes every evaluation).
struct DdefCounts {
    // grid sites m (+ corners), occupied tetrahedra (groups), sources (charged particles)
    n_sites: u32,
    n_groups: u32,
    n_sources: u32,
    // 1: the `corrected` variant (vertex far values minus the double-counted sources)
    corrected: u32,
    // softening eps^2
    eps2: f32,
    // ddef_gather: 0 adds q_i E to force[charged[i]]; 1 writes E / sqrt(k_c) to out[i]
    mode: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(1) @binding(0) var<uniform> disp: Dispatch;

var<workgroup> red: array<vec4<f32>, WG>;

// Linear invocation index of a 1D kernel dispatched as a 2D grid of workgroups
// (more than 65535 workgroups need the second dimension).
fn flat_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * WG + lid;
}

fn group_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// Sum of `v` over the workgroup (fixed tree order: deterministic). Every invocation
// must call it (uniform control flow); all get the total.
fn wg_sum(lid: u32, v: vec4<f32>) -> vec4<f32> {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            red[lid] = red[lid] + red[lid + s];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

// props = (mass, charge * sqrt(k_c), charge, pinned ? 1 : 0)
fn is_pinned(p: vec4<f32>) -> bool {
    return p.w != 0.0;
}

// Adjacency: adj[0..=n] are row offsets; entry e is adj[n + 1 + 2e] (spring) and
// adj[n + 2 + 2e] (other endpoint, SIGN_BIT set when the row's particle is j).
fn entry_other(word: u32) -> u32 {
    return word & ~SIGN_BIT;
}

fn entry_sign(word: u32) -> f32 {
    return select(1.0, -1.0, (word & SIGN_BIT) != 0u);
}

// W_k = s I + t n n^T (DESIGN section 2 with s = h^2 k max(0, 1 - L/l),
// t = h^2 k (1 - max(0, 1 - L/l)) + h c); sf0 = (n, fmag), sf1 = (s, t, energy, 0).
fn w_mul(sf0: vec4<f32>, sf1: vec4<f32>, d: vec3<f32>) -> vec3<f32> {
    return sf1.x * d + (sf1.y * dot(sf0.xyz, d)) * sf0.xyz;
}

// Symmetric 3x3 matrix stored as d0 = (xx, yy, zz, xy), d1 = (xz, yz, 0, 0), times r.
fn sym_mul(d0: vec4<f32>, d1: vec4<f32>, r: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(
        d0.x * r.x + d0.w * r.y + d1.x * r.z,
        d0.w * r.x + d0.y * r.y + d1.y * r.z,
        d1.x * r.x + d1.y * r.y + d0.z * r.z,
    );
}

fn ext_position(e: ExtCharge, t: f32) -> vec3<f32> {
    if (e.axis.w == 0.0) {
        return e.pos0.xyz;
    }
    let r = e.pos0.xyz - e.center.xyz;
    let a = e.center.w * t;
    let c = cos(a);
    let s = sin(a);
    let k = e.axis.xyz;
    return e.center.xyz + r * c + cross(k, r) * s + k * dot(k, r) * (1.0 - c);
}

fn field_at(x: vec3<f32>) -> vec3<f32> {
    if (params.field_kind == 1u) {
        return params.field.xyz;
    }
    if (params.field_kind == 2u) {
        let min_z = params.field.y;
        var z = x.z;
        if (abs(z) < min_z) {
            z = select(min_z, -min_z, z < 0.0);
        }
        return vec3<f32>(params.field.x * x.y / z, params.field.x * x.x / z, 0.0);
    }
    if (params.field_kind == 3u) {
        let min_z = params.field.y;
        var z = x.z;
        if (abs(z) < min_z) {
            z = select(min_z, -min_z, z < 0.0);
        }
        return vec3<f32>(-params.field.x * x.y / z, params.field.x * x.x / z, 0.0);
    }
    return vec3<f32>(0.0);
}

// +inf as an f32 (a bit pattern: WGSL has no infinite constants).
fn f32_inf() -> f32 {
    return bitcast<f32>(0x7f800000u);
}

// 1 / sqrt(r^2 + eps^2) of a pair of charges, +inf when r^2 + eps^2 is 0 or flushed to 0:
// coincident charges are never dropped (the CPU reference does the same), so the pair's
// force (inf * 0 = NaN) and energy turn non-finite and the run stops as diverged. The
// host refuses such pairs at t = 0 (src/gpu/range.rs); callers exclude the self pair by
// index, never by distance.
fn inv_dist(r2: f32) -> f32 {
    return select(inverseSqrt(r2), f32_inf(), r2 < 1.17549435e-38);
}

// 1 / sqrt(r^2 + eps^2), 0 at r2 = 0: for a DDEF grid site (not a charge; the CPU
// reference's grid fields do the same), and for tangents (tangent_coulomb), whose self
// pair is masked by a multiplication with 0 and whose coincident pairs already made the
// forward run non-finite.
fn inv_dist_or_zero(r2: f32) -> f32 {
    return select(inverseSqrt(r2), 0.0, r2 == 0.0);
}

// External point charges and field on a particle with scaled charge qs and charge q.
fn external_force(x: vec3<f32>, qs: f32, q: f32, t: f32) -> vec3<f32> {
    var f = vec3<f32>(0.0);
    if (qs == 0.0) {
        return f;
    }
    for (var k = 0u; k < params.n_ext; k = k + 1u) {
        let e = params.ext[k];
        // A 0 C external charge exerts nothing, even on a particle it sits on.
        if (e.pos0.w == 0.0) {
            continue;
        }
        let d = x - ext_position(e, t);
        let inv = inv_dist(dot(d, d) + params.eps2);
        f = f + (qs * e.pos0.w * inv * inv * inv) * d;
    }
    return f + q * field_at(x);
}

// Potential energy of a particle in the external charges and a uniform field (a swirl
// field has no potential).
fn external_potential(x: vec3<f32>, qs: f32, q: f32, t: f32) -> f32 {
    var u = 0.0;
    if (qs == 0.0) {
        return u;
    }
    for (var k = 0u; k < params.n_ext; k = k + 1u) {
        let e = params.ext[k];
        if (e.pos0.w == 0.0) {
            continue;
        }
        let d = x - ext_position(e, t);
        u = u + qs * e.pos0.w * inv_dist(dot(d, d) + params.eps2);
    }
    if (params.field_kind == 1u) {
        u = u - q * dot(params.field.xyz, x);
    }
    return u;
}
