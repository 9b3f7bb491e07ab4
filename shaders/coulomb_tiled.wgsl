// All non-spring forces on each particle: tiled all-pairs Coulomb (paper eq. 8, GPU Gems 3
// ch. 31), external point charges and field at time t, and gravity. One invocation per
// target; the workgroup stages TILE sources at a time in workgroup memory.
// force = (f_coulomb + f_ext + m g, sum_j k_c q_i q_j / sqrt(r^2 + eps^2)).
// disp.mode 1 evaluates the external charges at t + h (Verlet's second force).

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> sources: array<vec4<f32>>;
// Index in `sources` of each particle (NO_RANK when uncharged): skips the self pair.
@group(0) @binding(4) var<storage, read> rank: array<u32>;
@group(0) @binding(5) var<storage, read> clock: array<u32>;
@group(0) @binding(6) var<storage, read_write> force: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    let valid = i < params.n;
    var xi = vec3<f32>(0.0);
    var pr = vec4<f32>(0.0);
    var me = NO_RANK;
    if (valid) {
        xi = x[i].xyz;
        pr = props[i];
        me = rank[i];
    }
    let nc = select(0u, params.n_charged, params.coulomb_on != 0u);
    // acc = sum_j q_j d / (r^2 + eps^2)^(3/2), pot = sum_j q_j / sqrt(r^2 + eps^2)
    // (charges scaled by sqrt(k_c)); every invocation loads and syncs, valid or not.
    var acc = vec3<f32>(0.0);
    var pot = 0.0;
    for (var base = 0u; base < nc; base = base + TILE) {
        let s = base + lid;
        var src = vec4<f32>(0.0);
        if (s < nc) {
            src = sources[s];
        }
        tile[lid] = src;
        workgroupBarrier();
        let count = min(TILE, nc - base);
        for (var k = 0u; k < count; k = k + 1u) {
            let sj = tile[k];
            let d = xi - sj.xyz;
            let inv = select(inverseSqrt(dot(d, d) + params.eps2), 0.0, base + k == me);
            let w = sj.w * inv;
            acc = acc + (w * inv * inv) * d;
            pot = pot + w;
        }
        workgroupBarrier();
    }
    if (valid) {
        let qs = pr.y;
        let t = f32(clock[0] + disp.mode) * params.dt;
        var f = select(qs * acc, vec3<f32>(0.0), qs == 0.0);
        let u = select(qs * pot, 0.0, qs == 0.0);
        f = f + external_force(xi, qs, pr.z, t) + pr.x * params.gravity.xyz;
        force[i] = vec4<f32>(f, u);
    }
}
