// Energy terms per particle, reduced per workgroup (docs/physics.md §10): block 0 holds
// (kinetic, elastic, coulomb, gravity), block 1 (external, 0, 0, 0). Each spring's
// k (l - L)^2 / 2 is split between its endpoints, each Coulomb pair likewise
// (force.w holds sum_j k_c q_i q_j / sqrt(r^2 + eps^2) from coulomb_tiled).

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> force: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sparams: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> adj: array<u32>;
@group(0) @binding(7) var<storage, read> clock: array<u32>;
@group(0) @binding(8) var<storage, read_write> partials: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    var e0 = vec4<f32>(0.0);
    var e1 = vec4<f32>(0.0);
    if (is_row(i)) {
        let w = world_of(i);
        let pr = props[i];
        let xi = x[i].xyz;
        let vi = v[i].xyz;
        var elastic = 0.0;
        let row = adj_row(i);
        for (var at = row.at; at < row.end; at = at + row.step) {
            let k = adj_spring(at);
            let other = entry_other(adj_word(row, at));
            let sp = sparams[k];
            let stretch = length(x[other].xyz - xi) - sp.y;
            elastic = elastic + 0.25 * sp.x * stretch * stretch;
        }
        let t = clock_time(clock[0], clock[1], 0u, world_dt(w));
        e0 = vec4<f32>(
            0.5 * pr.x * dot(vi, vi),
            elastic,
            0.5 * force[i].w,
            -pr.x * dot(world_gravity(w), xi),
        );
        e1 = vec4<f32>(external_potential(w, xi, pr.y, pr.z, t), 0.0, 0.0, 0.0);
    }
    let t0 = wg_sum(lid, e0);
    let t1 = wg_sum(lid, e1);
    if (lid == 0u) {
        let g = group_index(wid, nwg);
        partials[g] = t0;
        partials[params.n_wg + g] = t1;
    }
}
