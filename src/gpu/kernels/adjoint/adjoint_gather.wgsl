// Per particle, the end of a reversed IMEX step (grad::reverse::reverse_imex): with mu the
// adjoint solution,
//   lx_i += sum_k sign p_k + h (dF_field/dx)^T mu |_i,   lv_i = m_i mu_i,
// the spring rows p_k from adjoint_springs gathered through the adjacency (no atomics),
// the field term from tangent_coulomb's transposed mode in bd[bd_b(i)] (charged rows, with
// ADJ_FIELD). Pinned rows are Dirichlet: their cotangents are dropped.

// disp.mode bits (gpu::kernels::adjoint::AdjointBit).
const ADJ_STIFFNESS: u32 = 1u;
const ADJ_MASSES: u32 = 2u;
const ADJ_CHARGES: u32 = 4u;
const ADJ_EXTERNALS: u32 = 8u;
const ADJ_FIELD: u32 = 16u;
const ADJ_HALF_KICK: u32 = 32u;
const ADJ_LATER: u32 = 64u;

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
    if (!is_row(i)) {
        return;
    }
    let pr = props[i];
    if (is_pinned(pr)) {
        lx[i] = vec4<f32>(0.0);
        lv[i] = vec4<f32>(0.0);
        return;
    }
    var acc = vec3<f32>(0.0);
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        acc = acc + entry_sign(adj_word(row, at)) * rows[k].xyz;
    }
    if ((disp.mode & ADJ_FIELD) != 0u && pr.y != 0.0) {
        acc = acc + world_dt(world_of(i)) * bd[bd_b(i)].xyz;
    }
    let m = mu[i].xyz;
    lx[i] = vec4<f32>(lx[i].xyz + acc, 0.0);
    lv[i] = vec4<f32>(pr.x * m, 0.0);
}
