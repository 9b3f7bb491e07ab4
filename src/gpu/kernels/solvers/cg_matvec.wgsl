// CG: q = A p on free rows (p is 0 on pinned rows), partial sums of p . q. The direction
// p is bound as `u`, the vector operator.wgsl multiplies.

@group(0) @binding(1) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> sf: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> adj: array<u32>;
@group(0) @binding(4) var<storage, read> u: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> q: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> partials: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    var sums = vec4<f32>(0.0);
    if (is_row(i)) {
        let d = bd[bd_diag(i)];
        var qi = vec3<f32>(0.0);
        let pi = u[i].xyz;
        if (!row_pinned(d)) {
            qi = a_row(i, pi, row_mass(d));
        }
        q[i] = vec4<f32>(qi, 0.0);
        sums = vec4<f32>(dot(pi, qi), 0.0, 0.0, 0.0);
    }
    let total = wg_sum(lid, sums);
    if (lid == 0u) {
        partials[group_index(wid, nwg)] = total;
    }
}
