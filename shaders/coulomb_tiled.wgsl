// All-pairs Coulomb force on each charged particle (paper eq. 8; the GPU Gems 3 ch. 31
// n-body scheme): one invocation per charged target, the workgroup stages TILE sources at
// a time in workgroup memory. Only charged particles are sources or targets (uncharged
// ones feel no Coulomb force), so the work is (charged count)^2. Adds to the force from
// external_forces and stores sum_j k_c q_i q_j / sqrt(r^2 + eps^2) in w (for the energy).

@group(0) @binding(1) var<storage, read> sources: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> charged: array<u32>;
@group(0) @binding(3) var<storage, read_write> force: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let c = flat_index(wid, nwg, lid);
    let nc = params.n_charged;
    let valid = c < nc;
    var me = vec4<f32>(0.0);
    if (valid) {
        me = sources[c];
    }
    // acc = sum_j q_j d / (r^2 + eps^2)^(3/2), pot = sum_j q_j / sqrt(r^2 + eps^2), with
    // charges scaled by sqrt(k_c); every invocation loads and syncs, valid or not.
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
            let d = me.xyz - sj.xyz;
            // The self pair is skipped by index; a coincident pair without softening
            // gives inf (inv_dist), so the run diverges instead of dropping it.
            let inv = select(inv_dist(dot(d, d) + params.eps2), 0.0, base + k == c);
            let w = sj.w * inv;
            acc = acc + (w * inv * inv) * d;
            pot = pot + w;
        }
        workgroupBarrier();
    }
    if (valid) {
        let i = charged[c];
        force[i] = vec4<f32>(force[i].xyz + me.w * acc, me.w * pot);
    }
}
