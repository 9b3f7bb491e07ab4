// DDEF step 8 (paper eq. 17; LatticeDdef::far_field): the far field at every site from
// the sources not in M_j, split over source chunks: workgroup (b, c) takes WG sites of
// block b and chunk c of their world's sorted sources, staged TILE at a time in workgroup
// memory; ddef_far_sum adds the chunks in a fixed order. Each site walks M_j's ranges
// with a cursor as the sources stream by and skips every source inside one (exact
// exclusion: never add-then-subtract); a tile no range meets takes a loop without the
// test, adding the same terms in the same order. Charges are scaled by sqrt(k_c):
// E / sqrt(k_c). STAGED (false on a CPU adapter): as in ddef_gather, lavapipe reads the
// sources directly, in the same order, instead of paying two barriers per tile.

override STAGED: bool = true;

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> sorted_src: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> far_part: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;

// Source k of the tile from sorted source `base` on.
fn far_src(base: u32, k: u32) -> vec4<f32> {
    if (STAGED) {
        return tile[k];
    }
    return sorted_src[base + k];
}

// `acc` plus the pull of source `sj` at site `u`.
fn far_pull(acc: vec3<f32>, u: vec3<f32>, sj: vec4<f32>, eps2: f32) -> vec3<f32> {
    let d = u - sj.xyz;
    let inv = inv_dist_or_zero(dot(d, d) + eps2);
    return acc + (sj.w * inv * inv * inv) * d;
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
    // A block past the world's sites (about half of them are reserved for re-plans), or a
    // chunk past its chunks: nothing to do (uniform per workgroup).
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
    }
    let eps2 = world.eps2.x;
    var acc = vec3<f32>(0.0);
    // Every invocation loads and syncs, valid or not (uniform control flow).
    for (var base = span.x; base < span.y; base = base + TILE) {
        if (STAGED) {
            let s = base + lid;
            var src = vec4<f32>(0.0);
            if (s < span.y) {
                src = sorted_src[s];
            }
            tile[lid] = src;
            workgroupBarrier();
        }
        let count = min(TILE, span.y - base);
        if (valid) {
            r = far_cursor(world, p, r, base);
            if (r.x >= base + count) {
                for (var k = 0u; k < count; k = k + 1u) {
                    acc = far_pull(acc, u, far_src(base, k), eps2);
                }
            } else {
                for (var k = 0u; k < count; k = k + 1u) {
                    r = far_cursor(world, p, r, base + k);
                    if (base + k < r.x) {
                        acc = far_pull(acc, u, far_src(base, k), eps2);
                    }
                }
            }
        }
        if (STAGED) {
            workgroupBarrier();
        }
    }
    if (valid) {
        let last = ddef_worlds[params.n_worlds - 1u];
        far_part[chunk * (last.base.z + last.cap.z) + j] = vec4<f32>(acc, 0.0);
    }
}
