// CG iteration disp.iter: alpha = (r . z) / (p . q); u += alpha p; r -= alpha q;
// partial sums of the new r . z (z = D^-1 r). r . z of iteration k lives in slot
// SLOT_RZ + k % 2, p . q in SLOT_PQ.

@group(0) @binding(1) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> p: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> scalars: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> u: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> r: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> partials: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    var sums = vec4<f32>(0.0);
    if (is_row(i)) {
        let w = world_of(i);
        let rz = scalars[scalar_slot(w, SLOT_RZ + disp.iter % 2u)].x;
        let pq = scalars[scalar_slot(w, SLOT_PQ)].x;
        // p . q = 0 only when p = 0 (A is SPD): the solve has converged.
        let alpha = select(0.0, rz / pq, pq > 0.0);
        let d = bd[bd_diag(i)];
        if (!row_pinned(d)) {
            let ui = u[i];
            u[i] = vec4<f32>(ui.xyz + alpha * p[i].xyz, ui.w);
            let ri = r[i].xyz - alpha * q[i].xyz;
            r[i] = vec4<f32>(ri, 0.0);
            var off = vec4<f32>(0.0);
            if (blocks_stored()) {
                off = bd[bd_off(i)];
            }
            let zi = inv_mul(d, off, ri);
            sums = vec4<f32>(dot(ri, zi), 0.0, 0.0, 0.0);
        }
    }
    let total = wg_sum(lid, sums);
    if (lid == 0u) {
        partials[group_index(wid, nwg)] = total;
    }
}
