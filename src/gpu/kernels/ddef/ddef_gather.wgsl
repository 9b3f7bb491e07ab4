// DDEF field at each source (target), one invocation per source: the exact near field
// over its group's list S(tau) (its own source skipped) plus the four vertex far values
// of ddef_vertex_far interpolated with its barycentric weights. Mirrors
// `Ddef::evaluate_groups` in src/ddef/field.rs. counts.mode 0 (the solver): adds
// q_i E to force[charged[i]] after external_forces, like coulomb_tiled (w, the Coulomb
// potential, is left alone: the energy diagnostic stays exact all-pairs). mode 1
// (standalone): writes E / sqrt(k_c) to out[i].

@group(0) @binding(1) var<storage, read> counts: DdefCounts;
@group(0) @binding(2) var<storage, read> sources: array<vec4<f32>>;
// CSR S(tau) per group, as in ddef_vertex_far.
@group(0) @binding(3) var<storage, read> near: array<u32>;
@group(0) @binding(4) var<storage, read> target_group: array<u32>;
@group(0) @binding(5) var<storage, read> target_weights: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> vertex_far: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> charged: array<u32>;
@group(0) @binding(8) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let s = flat_index(wid, nwg, lid);
    if (s >= counts.n_sources) {
        return;
    }
    let ng = counts.n_groups;
    let eps2 = counts.eps2;
    let me = sources[s];
    let g = target_group[s];
    var acc = vec3<f32>(0.0);
    for (var e = near[g]; e < near[g + 1u]; e = e + 1u) {
        let src = near[ng + 1u + 2u * e];
        if (src != s) {
            let sj = sources[src];
            let d = me.xyz - sj.xyz;
            let inv = inv_dist(dot(d, d) + eps2);
            acc = acc + (sj.w * inv * inv * inv) * d;
        }
    }
    let w = target_weights[s];
    let field = acc + w.x * vertex_far[4u * g].xyz + w.y * vertex_far[4u * g + 1u].xyz
        + w.z * vertex_far[4u * g + 2u].xyz + w.w * vertex_far[4u * g + 3u].xyz;
    if (counts.mode == 0u) {
        let i = charged[s];
        let f = out[i];
        out[i] = vec4<f32>(f.xyz + me.w * field, f.w);
    } else {
        out[s] = vec4<f32>(field, 0.0);
    }
}
