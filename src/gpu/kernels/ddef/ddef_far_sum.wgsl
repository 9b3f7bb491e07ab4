// DDEF step 9: the far field at each site, its world's source chunks (ddef_far) added in
// chunk order: a fixed order, so reruns give the same bits.

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> far_part: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> far: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let j = flat_index(wid, nwg, lid);
    let last = ddef_worlds[params.n_worlds - 1u];
    let sites = last.base.z + last.cap.z;
    if (j >= sites) {
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
    let chunks = u32(ddef_worlds[w].planned.w);
    var acc = vec4<f32>(0.0);
    for (var c = 0u; c < chunks; c = c + 1u) {
        acc = acc + far_part[c * sites + j];
    }
    far[j] = acc;
}
