// Jacobi-preconditioned CG (seed 004), start: r = b - A u, p = z = D^-1 r on free rows
// (0 on pinned rows: their values are known), partial sums of r . z.

@group(0) @binding(1) var<storage, read> sf: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> adj: array<u32>;
@group(0) @binding(3) var<storage, read> bd: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> u: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> r: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> p: array<vec4<f32>>;
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
        let d = bd[bd_diag(i)];
        var ri = vec3<f32>(0.0);
        var zi = vec3<f32>(0.0);
        if (!row_pinned(d)) {
            let ui = u[i].xyz;
            ri = bd[bd_b(i)].xyz - a_row(i, ui, row_mass(d));
            var off = vec4<f32>(0.0);
            if (blocks_stored()) {
                off = bd[bd_off(i)];
            }
            zi = inv_mul(d, off, ri);
        }
        r[i] = vec4<f32>(ri, 0.0);
        p[i] = vec4<f32>(zi, 0.0);
        sums = vec4<f32>(dot(ri, zi), 0.0, 0.0, 0.0);
    }
    let total = wg_sum(lid, sums);
    if (lid == 0u) {
        partials[group_index(wid, nwg)] = total;
    }
}
