// The adjoint solve's right-hand side (grad::reverse, IMEX): g = lv + h lx, the
// cotangent of v' (x' = x_t + h v'), into bd[bd_b(i)]. The rest of bd (the inverse
// diagonal of A at x_t) is the forward `rhs` kernel's: A is symmetric, so the adjoint
// solve is the forward solve on a new right-hand side.

@group(0) @binding(1) var<storage, read> lx: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> lv: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> bd: array<vec4<f32>>;

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
    let g = lv[i].xyz + world_dt(world_of(i)) * lx[i].xyz;
    bd[bd_b(i)] = vec4<f32>(g, 0.0);
}
