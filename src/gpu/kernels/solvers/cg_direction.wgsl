// CG: beta = (r . z)_new / (r . z)_old; p = z + beta p on free rows.

@group(0) @binding(1) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> r: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> scalars: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> p: array<vec4<f32>>;

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
    let d = bd[bd_diag(i)];
    if (row_pinned(d)) {
        return;
    }
    let rz_old = scalars[scalar_slot(world_of(i), SLOT_RZ + disp.iter % 2u)].x;
    let rz_new = scalars[scalar_slot(world_of(i), SLOT_RZ + (disp.iter + 1u) % 2u)].x;
    let beta = select(0.0, rz_new / rz_old, rz_old > 0.0);
    var off = vec4<f32>(0.0);
    if (blocks_stored()) {
        off = bd[bd_off(i)];
    }
    let zi = inv_mul(d, off, r[i].xyz);
    p[i] = vec4<f32>(zi + beta * p[i].xyz, 0.0);
}
