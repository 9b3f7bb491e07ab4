// The DDEF far field's walk (ddef_far, ddef_far_tangent; LatticeDdef::far_field): which
// world and chunk of sorted sources a workgroup takes, and the cursor over M_j, the sources
// of the site stencil's tetrahedra: a few contiguous ranges of the sorted sources, met in
// increasing order. Reads its kernel's `ddef_worlds`, `tables` and `starts`.

// The world of site block `block`: sites are reserved in whole blocks per world.
fn far_world(block: u32) -> u32 {
    var w = 0u;
    var top = params.n_worlds;
    while (top - w > 1u) {
        let mid = (w + top) / 2u;
        if (ddef_worlds[mid].base.z <= block * WG) {
            w = mid;
        } else {
            top = mid;
        }
    }
    return w;
}

// Chunk `chunk` of the world's sorted sources, [begin, end): the sources split evenly over
// its chunks in whole tiles.
fn far_chunk(world: DdefWorld, chunk: u32) -> vec2<u32> {
    let chunks = u32(world.planned.w);
    let rb = starts[world.base.x];
    let re = starts[world.base.x + world.cap.x];
    let per = ((re - rb + chunks - 1u) / chunks + TILE - 1u) / TILE * TILE;
    let cb = min(rb + chunk * per, re);
    return vec2<u32>(cb, min(cb + per, re));
}

// The next non-empty range of M_j from site stencil entry `first` on: (begin, end, the
// entry after it); (NO_RANK, NO_RANK, SITE_ENTRIES) when none is left.
fn far_next_range(world: DdefWorld, p: vec3<u32>, first: u32) -> vec3<u32> {
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

// Cursor `r` of site p moved to the first range of M_j that ends after source `idx`:
// idx is in M_j iff r.x <= idx, and no source of [idx, e) is when r.x >= e.
fn far_cursor(world: DdefWorld, p: vec3<u32>, r: vec3<u32>, idx: u32) -> vec3<u32> {
    var c = r;
    while (idx >= c.y) {
        c = far_next_range(world, p, c.z);
    }
    return c;
}

// far_cursor of site p from the start to source `first`, without walking M_j's ranges when
// they all end at or before `first` (most chunks of a far site, whose walk read up to 48
// stencil entries): the stencil's last tetrahedron in the lattice ends after every range,
// as its ranges come in increasing order. The same cursor either way.
fn far_start(world: DdefWorld, p: vec3<u32>, first: u32) -> vec3<u32> {
    let dims = world.dims.xyz;
    for (var i = SITE_ENTRIES; i > 0u; i = i - 1u) {
        let e = tables[SITE_STENCIL + i - 1u];
        let c = ddef_offset_cell(dims, p, ddef_entry_offset(e));
        if (c.x < 0) {
            continue;
        }
        let t = world.base.x + KUHN * ddef_cell_index(dims, vec3<u32>(c)) + (e >> 12u);
        if (starts[t + 1u] <= first) {
            return vec3<u32>(NO_RANK, NO_RANK, SITE_ENTRIES);
        }
        break;
    }
    return far_cursor(world, p, vec3<u32>(0u), first);
}
