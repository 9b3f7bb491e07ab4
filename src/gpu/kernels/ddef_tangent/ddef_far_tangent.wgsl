// DDEF tangents, step 2: the derivative of ddef_far (paper eq. 17) with the structure
// frozen (LatticeDdef::far_field_jvp): at every site u_j (fixed),
// dE_far(u_j) = sum_{s not in M_j} [dqs_s phi(u_j - x_s) - qs_s G(u_j - x_s) dx_s],
// over the same source chunks, M_j walk (far_walk.wgsl), exclusion and tile fast path
// as ddef_far, from the sources and tangents of ddef_tangent_sources; ddef_far_sum adds
// the chunks.

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> tan_sorted: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> far_part: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;
var<workgroup> tile_t: array<vec4<f32>, TILE>;

// The tangent of tile source k's field at site u.
fn far_jvp(u: vec3<f32>, k: u32, eps2: f32) -> vec3<f32> {
    let sj = tile[k];
    let tj = tile_t[k];
    return point_field_jvp(u - sj.xyz, -tj.xyz, sj.w, tj.w, eps2);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let j = wid.x * WG + lid;
    let chunk = wid.y;
    let world = ddef_worlds[far_world(wid.x)];
    let dims = world.dims.xyz;
    // A block past the world's sites, or a chunk past its chunks: nothing to do.
    if (chunk >= u32(world.planned.w) || wid.x * WG - world.base.z >= dims.x * dims.y * dims.z) {
        return;
    }
    let local = j - world.base.z;
    let valid = local < dims.x * dims.y * dims.z;
    let span = far_chunk(world, chunk);
    var u = vec3<f32>(0.0);
    var p = vec3<u32>(0u);
    var r = vec3<u32>(0u);
    if (valid) {
        p = ddef_site_point(dims, local);
        u = ddef_site(world, p);
        r = far_start(world, p, span.x);
    }
    let eps2 = world.eps2.x;
    var acc = vec3<f32>(0.0);
    // Every invocation loads and syncs, valid or not (uniform control flow).
    for (var base = span.x; base < span.y; base = base + TILE) {
        let s = base + lid;
        var src = vec4<f32>(0.0);
        var tan = vec4<f32>(0.0);
        if (s < span.y) {
            src = tan_sorted[2u * s];
            tan = tan_sorted[2u * s + 1u];
        }
        tile[lid] = src;
        tile_t[lid] = tan;
        workgroupBarrier();
        let count = min(TILE, span.y - base);
        if (valid) {
            r = far_cursor(world, p, r, base);
            if (r.x >= base + count) {
                for (var k = 0u; k < count; k = k + 1u) {
                    acc = acc + far_jvp(u, k, eps2);
                }
            } else {
                for (var k = 0u; k < count; k = k + 1u) {
                    r = far_cursor(world, p, r, base + k);
                    if (base + k < r.x) {
                        acc = acc + far_jvp(u, k, eps2);
                    }
                }
            }
        }
        workgroupBarrier();
    }
    if (valid) {
        let last = ddef_worlds[params.n_worlds - 1u];
        far_part[chunk * (last.base.z + last.cap.z) + j] = vec4<f32>(acc, 0.0);
    }
}
