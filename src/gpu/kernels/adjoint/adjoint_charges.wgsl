// The per-charge cotangent of the all-pairs Coulomb force in one tiled pass
// (grad::pair_cotangent): for every particle p (a target; an uncharged one's charge has
// a gradient too),
//   part[p].w += h sum_{i charged, i != p} qs_i (mu_i - mu_p) . (x_i - x_p) / (r^2 + eps^2)^(3/2),
// the field at p dotted with mu_p plus p's share of every other charge's force; the host
// multiplies by sqrt(k_c). Sources are the charged particles (`charged` lists them),
// loaded a tile at a time into workgroup memory: (x_i, qs_i) in the first half and mu_i
// in the second. The self pair is skipped by index.

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> charged: array<u32>;
@group(0) @binding(4) var<storage, read> mu: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> part: array<vec4<f32>>;

const HALF: u32 = TILE / 2u;
var<workgroup> tile: array<vec4<f32>, TILE>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let p = flat_index(wid, nwg, lid);
    let valid = is_row(p);
    var xp = vec3<f32>(0.0);
    var mp = vec3<f32>(0.0);
    if (valid) {
        xp = x[p].xyz;
        mp = mu[p].xyz;
    }
    let nc = params.n_charged;
    let eps2 = world_eps2(0u);
    var acc = 0.0;
    // Every invocation loads and syncs, valid or not (uniform control flow).
    for (var base = 0u; base < nc; base = base + HALF) {
        let s = base + (lid % HALF);
        var entry = vec4<f32>(0.0);
        var src = NO_RANK;
        if (s < nc) {
            src = charged[s];
            if (lid < HALF) {
                entry = vec4<f32>(x[src].xyz, props[src].y);
            } else {
                entry = vec4<f32>(mu[src].xyz, 0.0);
            }
        }
        tile[lid] = entry;
        workgroupBarrier();
        let count = min(HALF, nc - base);
        for (var k = 0u; k < count; k = k + 1u) {
            let sx = tile[k];
            let sm = tile[HALF + k].xyz;
            let d = sx.xyz - xp;
            let inv = inv_dist_or_zero(dot(d, d) + eps2);
            let on = select(1.0, 0.0, charged[base + k] == p);
            acc = acc + on * sx.w * dot(sm - mp, d) * inv * inv * inv;
        }
        workgroupBarrier();
    }
    if (valid) {
        let h = world_dt(world_of(p));
        part[p] = part[p] + vec4<f32>(0.0, 0.0, 0.0, h * acc);
    }
}
