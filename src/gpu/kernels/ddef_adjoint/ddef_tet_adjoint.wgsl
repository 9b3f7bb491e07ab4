// DDEF adjoint, step 2: per tetrahedron tau its path vertices' cotangents
// cv_v(tau) = sum_{k in tau} w_v(x_k) c_k (the transpose of the interpolation's far
// values; docs/physics.md §9), its sources in sorted order: one writer per tetrahedron.
// Its walk is ddef_rank's (one loop iteration per charge of the tetrahedron; ddef_locate
// has no loop), so on a CPU adapter the forward's flags.y covers it.

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> starts: array<u32>;
@group(0) @binding(3) var<storage, read> adj_sorted: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> tet_bar: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = flat_index(wid, nwg, lid);
    let last = ddef_worlds[params.n_worlds - 1u];
    if (t >= last.base.x + last.cap.x) {
        return;
    }
    var w = 0u;
    var top = params.n_worlds;
    while (top - w > 1u) {
        let mid = (w + top) / 2u;
        if (ddef_worlds[mid].base.x <= t) {
            w = mid;
        } else {
            top = mid;
        }
    }
    let world = ddef_worlds[w];
    let kuhn = (t - world.base.x) % KUHN;
    var cv0 = vec3<f32>(0.0);
    var cv1 = vec3<f32>(0.0);
    var cv2 = vec3<f32>(0.0);
    var cv3 = vec3<f32>(0.0);
    for (var k = starts[t]; k < starts[t + 1u]; k = k + 1u) {
        let c = adj_sorted[2u * k + 1u].xyz;
        let wts = ddef_weights(kuhn, ddef_locate(world, adj_sorted[2u * k].xyz).f);
        cv0 = cv0 + wts.x * c;
        cv1 = cv1 + wts.y * c;
        cv2 = cv2 + wts.z * c;
        cv3 = cv3 + wts.w * c;
    }
    tet_bar[4u * t] = vec4<f32>(cv0, 0.0);
    tet_bar[4u * t + 1u] = vec4<f32>(cv1, 0.0);
    tet_bar[4u * t + 2u] = vec4<f32>(cv2, 0.0);
    tet_bar[4u * t + 3u] = vec4<f32>(cv3, 0.0);
}
