// DDEF adjoint, step 3: per site j its far value's cotangent e_bar_j = the sum of
// cv_v(tau) over the (tau, v) whose path vertex v is j: the site stencil's tetrahedra
// (cell, type) in its order, the one path vertex of each at j. One writer per site;
// 0 at the reserved sites past the lattice.

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> tet_bar: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> site_bar: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let j = flat_index(wid, nwg, lid);
    let last = ddef_worlds[params.n_worlds - 1u];
    if (j >= last.base.z + last.cap.z) {
        return;
    }
    var w = 0u;
    var top = params.n_worlds;
    while (top - w > 1u) {
        let mid = (w + top) / 2u;
        if (ddef_worlds[mid].base.z <= j) {
            w = mid;
        } else {
            top = mid;
        }
    }
    let world = ddef_worlds[w];
    let dims = world.dims.xyz;
    let local = j - world.base.z;
    var acc = vec3<f32>(0.0);
    if (local < dims.x * dims.y * dims.z) {
        let p = ddef_site_point(dims, local);
        for (var i = 0u; i < SITE_ENTRIES; i = i + 1u) {
            let e = tables[SITE_STENCIL + i];
            let c = ddef_offset_cell(dims, p, ddef_entry_offset(e));
            if (c.x < 0) {
                continue;
            }
            let kuhn = e >> 12u;
            let t = world.base.x + KUHN * ddef_cell_index(dims, vec3<u32>(c)) + kuhn;
            for (var v = 0u; v < 4u; v = v + 1u) {
                if (all(ddef_vertex(vec3<u32>(c), kuhn, v) == p)) {
                    acc = acc + tet_bar[4u * t + v].xyz;
                }
            }
        }
    }
    site_bar[j] = vec4<f32>(acc, 0.0);
}
