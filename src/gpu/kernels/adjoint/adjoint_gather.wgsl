// Per particle, the end of a reversed IMEX step (grad::reverse::reverse_imex): with mu the
// adjoint solution,
//   lx_i += sum_k sign p_k + h (dF_field/dx)^T mu |_i,   lv_i = m_i mu_i,
// the spring rows p_k from adjoint_springs gathered through the adjacency (no atomics),
// the field term from tangent_coulomb's transposed mode in bd[bd_b(i)] (charged rows, with
// ADJ_FIELD). Pinned rows are Dirichlet: their cotangents are dropped.

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
@group(0) @binding(3) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> mu: array<vec4<f32>>;
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
    let pr = props[i];
    var acc = gather_rows(i);
    if (has_field_transpose(pr)) {
        acc = acc + field_transpose(i);
    }
    let m = mu[i].xyz;
    lx[i] = vec4<f32>(lx[i].xyz + acc, 0.0);
    lv[i] = vec4<f32>(pr.x * m, 0.0);
}
