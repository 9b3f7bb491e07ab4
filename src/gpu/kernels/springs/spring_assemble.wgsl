// Per spring, once per step: unit axis n, force magnitude along n (force on i is fmag n,
// on j -fmag n) and the block W_k = s I + t n n^T of A (DESIGN section 2, seeds 002/003),
// stored as (sqrt(t) n, s) in sf[k] (see w_mul) and (n, fmag) in sf[n_springs + k]. t >= 0:
// k, c >= 0 (the model refuses others) and 1 - max(0, 1 - L/l) is in [0, 1].
// disp.mode SPRINGS_IMPLICIT: fmag = k (l - L), damping goes to W_k only.
// disp.mode SPRINGS_EXPLICIT: fmag = k (l - L) + c ((v_j - v_i) . n).

// disp.mode (gpu::kernels::springs::SpringMode).
const SPRINGS_IMPLICIT: u32 = 0u;
const SPRINGS_EXPLICIT: u32 = 1u;

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> springs: array<vec2<u32>>;
// (k, L, c, 0)
@group(0) @binding(4) var<storage, read> sparams: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> sf: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let k = flat_index(wid, nwg, lid);
    if (k >= params.n_springs) {
        return;
    }
    let ij = springs[k];
    let w = world_of(ij.x);
    let sp = sparams[k];
    let d = x[ij.y].xyz - x[ij.x].xyz;
    let l = length(d);
    var n = vec3<f32>(0.0);
    if (l > 0.0) {
        n = d / l;
    }
    // max(0, 1 - L/l): clamped so A stays SPD (not applied to the force).
    let alpha = max(0.0, transverse_factor_and_derivative(l, sp.y).x);
    let stretch = l - sp.y;
    var fmag = sp.x * stretch;
    if (disp.mode == SPRINGS_EXPLICIT) {
        fmag = fmag + sp.z * dot(v[ij.y].xyz - v[ij.x].xyz, n);
    }
    let s = world_dt2(w) * sp.x * alpha;
    let t = world_dt2(w) * sp.x * (1.0 - alpha) + world_dt(w) * sp.z;
    sf[k] = vec4<f32>(sqrt(t) * n, s);
    sf[params.n_springs + k] = vec4<f32>(n, fmag);
}
