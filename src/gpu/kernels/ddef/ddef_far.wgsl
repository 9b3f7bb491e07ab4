// DDEF step 8 (paper eq. 17; LatticeDdef::far_field): the far field at every site from
// the sources not in M_j, split over source chunks: workgroup (b, c) takes WG sites of
// block b and chunk c of their world's sorted sources, staged TILE at a time in workgroup
// memory; ddef_far_sum adds the chunks in a fixed order. M_j is the sources of the site
// stencil's tetrahedra, contiguous sorted ranges met in increasing order: each site walks
// them with a cursor as the sources stream by and skips every source inside one (exact
// exclusion: never add-then-subtract). Charges are scaled by sqrt(k_c): E / sqrt(k_c).
// STAGED (false on a CPU adapter): as in ddef_gather, lavapipe reads the sources
// directly, in the same order, instead of paying two barriers per tile.

override STAGED: bool = true;

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> sorted_src: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> far_part: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;

// The next non-empty range of M_j from site stencil entry `first` on: (begin, end, the
// entry after it); (NO_RANK, NO_RANK, SITE_ENTRIES) when none is left.
fn next_range(world: DdefWorld, p: vec3<u32>, first: u32) -> vec3<u32> {
    let dims = world.dims.xyz;
    for (var i = first; i < SITE_ENTRIES; i = i + 1u) {
        let e = tables[SITE_STENCIL + i];
        let c = ddef_offset_cell(dims, p, ddef_entry_offset(e));
        if (c.x < 0) {
            continue;
        }
        let t = world.base.x + KUHN * ddef_cell_index(dims, vec3<u32>(c)) + (e >> 12u);
        let b = starts[t];
        let en = starts[t + 1u];
        if (b < en) {
            return vec3<u32>(b, en, i + 1u);
        }
    }
    return vec3<u32>(NO_RANK, NO_RANK, SITE_ENTRIES);
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
    // The world of this block: sites are reserved in whole blocks per world.
    var w = 0u;
    var top = params.n_worlds;
    while (top - w > 1u) {
        let mid = (w + top) / 2u;
        if (ddef_worlds[mid].base.z <= wid.x * WG) {
            w = mid;
        } else {
            top = mid;
        }
    }
    let world = ddef_worlds[w];
    let chunks = u32(world.planned.w);
    if (chunk >= chunks) {
        return;
    }
    let dims = world.dims.xyz;
    let local = j - world.base.z;
    let valid = local < dims.x * dims.y * dims.z;
    // This chunk of the world's sorted sources.
    let rb = starts[world.base.x];
    let re = starts[world.base.x + world.cap.x];
    let per = ((re - rb + chunks - 1u) / chunks + TILE - 1u) / TILE * TILE;
    let cb = min(rb + chunk * per, re);
    let ce = min(cb + per, re);
    var u = vec3<f32>(0.0);
    var p = vec3<u32>(0u);
    var r = vec3<u32>(NO_RANK, NO_RANK, SITE_ENTRIES);
    if (valid) {
        p = ddef_site_point(dims, local);
        u = ddef_site(world, p);
        r = next_range(world, p, 0u);
        while (r.y <= cb) {
            r = next_range(world, p, r.z);
        }
    }
    let eps2 = world.eps2.x;
    var acc = vec3<f32>(0.0);
    if (!STAGED) {
        if (valid) {
            for (var idx = cb; idx < ce; idx = idx + 1u) {
                while (idx >= r.y) {
                    r = next_range(world, p, r.z);
                }
                if (idx < r.x) {
                    acc = far_pull(acc, u, sorted_src[idx], eps2);
                }
            }
        }
    }
    // Every invocation loads and syncs, valid or not (uniform control flow).
    for (var base = cb; base < ce && STAGED; base = base + TILE) {
        let s = base + lid;
        var src = vec4<f32>(0.0);
        if (s < ce) {
            src = sorted_src[s];
        }
        tile[lid] = src;
        workgroupBarrier();
        let count = min(TILE, ce - base);
        for (var k = 0u; k < count; k = k + 1u) {
            let idx = base + k;
            while (idx >= r.y) {
                r = next_range(world, p, r.z);
            }
            if (idx < r.x) {
                acc = far_pull(acc, u, tile[k], eps2);
            }
        }
        workgroupBarrier();
    }
    if (valid) {
        let last = ddef_worlds[params.n_worlds - 1u];
        far_part[chunk * (last.base.z + last.cap.z) + j] = vec4<f32>(acc, 0.0);
    }
}
