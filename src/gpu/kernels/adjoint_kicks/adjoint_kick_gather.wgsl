// Per particle, the end of an explicit kick's reversal (grad::reverse's kick_vjp;
// docs/physics.md §6, §9): the spring rows of adjoint_kick_springs gathered through the
// adjacency (no atomics), dd = dx_j - dx_i and du = dv_j - dv_i seen from either end,
//   lx_i -= sum_k sign dd_bar_k,   lv_i -= sum_k du_bar_k n_ik,
// n_ik the unit vector from i to its neighbour (du_bar is along the spring), and with
// ADJ_FIELD the field's transposed Jacobian for the force cotangent h mu (tangent_coulomb's
// transposed mode, in bd[bd_b(i)] on charged rows): lx_i += h bd. lv's pass-through (the
// kick adds to v_in) is already in lv. Pinned rows are Dirichlet: their cotangents are
// dropped.

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> lx: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> lv: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    if (!free_row(i)) {
        return;
    }
    let xi = x[i].xyz;
    var ax = vec3<f32>(0.0);
    var av = vec3<f32>(0.0);
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        let word = adj_word(row, at);
        let r = rows[k];
        ax = ax - entry_sign(word) * r.xyz;
        let d = x[entry_other(word)].xyz - xi;
        let l = length(d);
        if (l > 0.0) {
            av = av - (r.w / l) * d;
        }
    }
    if (has_field_transpose(props[i])) {
        ax = ax + field_transpose(i);
    }
    lx[i] = vec4<f32>(lx[i].xyz + ax, 0.0);
    lv[i] = vec4<f32>(lv[i].xyz + av, 0.0);
}
