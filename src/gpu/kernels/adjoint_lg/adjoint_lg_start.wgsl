// Per particle, the start of a local-global step reversed (grad::reverse's
// reverse_local_global; docs/physics.md §5, §9), at x_t: the first iterate is
// y = x_t + h v_t and the constant right-hand side c = M y + h C_L x_t + h^2 (f_field + M g),
// so with lc = h sum mu (adjoint_lg_gather) and the cotangent of y from the first
// alternation's local step (its spring rows, gathered again: bd now holds the field's)
//   ly = sum_k sign p_k + M lc / h,
//   lx += ly + C_L lc + h (d f_field / dx)^T lc,   lv += h ly,
// C_L lc = sum_k c_k (lc_i - lc_j) (symmetric), the field's transposed Jacobian from
// tangent_coulomb's transposed mode in bd[bd_b(i)] on charged rows (with ADJ_FIELD).
// Pinned rows are Dirichlet: their cotangents are dropped.

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
// (k, L, c, 0)
@group(0) @binding(3) var<storage, read> sparams: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> lc: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> lx: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> lv: array<vec4<f32>>;

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
    let h = world_dt(world_of(i));
    let c = lc[i].xyz;
    var acc = vec3<f32>(0.0);
    var cl = vec3<f32>(0.0);
    let row = adj_row(i);
    for (var at = row.at; at < row.end; at = at + row.step) {
        let k = adj_spring(at);
        let word = adj_word(row, at);
        acc = acc + entry_sign(word) * rows[k].xyz;
        cl = cl + sparams[k].z * (c - lc[entry_other(word)].xyz);
    }
    let ly = acc + (pr.x / h) * c;
    var f = vec3<f32>(0.0);
    if (has_field_transpose(pr)) {
        f = field_transpose(i);
    }
    lx[i] = vec4<f32>(lx[i].xyz + ly + cl + f, 0.0);
    lv[i] = vec4<f32>(lv[i].xyz + h * ly, 0.0);
}
