// DDEF step 10 (LatticeDdef::evaluate_tet): the field at every charge, added as q E to
// its particle's force. One workgroup per work item of the scanned list: a cell and a
// chunk of up to WG of its targets (sorted, so a cell's targets are one range; a crowded
// cell gets several workgroups). The workgroup walks the cell's near neighbourhood, the
// union of its tetrahedra's near stencils (D cell offsets, tables), loading each
// neighbour cell's sources TILE at a time into workgroup memory; every target adds the
// sources its own tetrahedron's stencil holds (the membership table, clipped by the
// slots of N(tau) inside the lattice), its own source skipped by sorted position. For
// `corrected`, invocations 0..24 also sum, per Kuhn type and path vertex v of the cell,
// the near sources outside M_v at that vertex, subtracted from the vertex's far value
// before the targets interpolate (each source counted once, near or far). Charges are
// scaled by sqrt(k_c); w of the force (the Coulomb potential) is left alone.
//
// STAGED (false on a CPU adapter): staging the sources in workgroup memory pays on a GPU,
// while on lavapipe each barrier switches every invocation of the workgroup and cost more
// than the pairs (BENCHMARKS.md), so there each invocation reads its sources directly,
// in the same order (the same sums).

override STAGED: bool = true;

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> sorted_src: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> far: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> force: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;
var<workgroup> tile_kuhn: array<u32, TILE>;
var<workgroup> corr: array<vec4<f32>, 24>;

// One source's terms: the exact near pull on the target `me` when `near`, and the one
// on the correction's site `uc` when `co`.
fn add_source(
    acc: ptr<function, vec3<f32>>,
    cacc: ptr<function, vec3<f32>>,
    me: vec3<f32>,
    uc: vec3<f32>,
    sj: vec4<f32>,
    eps2: f32,
    near: bool,
    co: bool,
) {
    if (near) {
        let dd = me - sj.xyz;
        let inv = inv_dist(dot(dd, dd) + eps2);
        *acc = *acc + (sj.w * inv * inv * inv) * dd;
    }
    if (co) {
        let dd = uc - sj.xyz;
        let inv = inv_dist_or_zero(dot(dd, dd) + eps2);
        *cacc = *cacc + (sj.w * inv * inv * inv) * dd;
    }
}

// The sorted sources of the neighbour cell at stencil entry `entry` of cell `cp`: a
// range (empty outside the lattice).
fn neighbour_sources(world: DdefWorld, dims: vec3<u32>, cp: vec3<u32>, entry: u32) -> vec2<u32> {
    let nc = ddef_offset_cell(dims, cp, ddef_entry_offset(entry));
    if (nc.x < 0) {
        return vec2<u32>(0u, 0u);
    }
    let t0 = world.base.x + KUHN * ddef_cell_index(dims, vec3<u32>(nc));
    return vec2<u32>(starts[t0], starts[t0 + KUHN]);
}

// The membership rows `row` (the target's) and `row_c` (the correction's) as bit masks
// over the source's Kuhn type, read once per neighbour cell rather than once per source:
// (near, correction), each 0 when `has` / `corr_on` is off.
fn member_bits(row: u32, row_c: u32, valid: u32, valid_c: u32, v: u32, has: bool, corr_on: bool) -> vec2<u32> {
    var near_bits = 0u;
    var corr_bits = 0u;
    for (var t = 0u; t < KUHN; t = t + 1u) {
        if (has && (tables[row + t] & valid) != 0u) {
            near_bits = near_bits | (1u << t);
        }
        let mc = tables[row_c + t];
        if (corr_on && (mc & valid_c) != 0u && ((mc >> v) & 1u) == 0u) {
            corr_bits = corr_bits | (1u << t);
        }
    }
    return vec2<u32>(near_bits, corr_bits);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = group_index(wid, nwg);
    let last = ddef_worlds[params.n_worlds - 1u];
    let tets = last.base.x + last.cap.x;
    let cells = last.base.y + last.cap.y;
    // The cells' work list follows the tetrahedra's starts.
    let cs = tets + 1u;
    if (g >= starts[cs + cells]) {
        return;
    }
    // The cell whose work holds g (the last one starting at or before it).
    var cell = 0u;
    var top = cells;
    while (top - cell > 1u) {
        let mid = (cell + top) / 2u;
        if (starts[cs + mid] <= g) {
            cell = mid;
        } else {
            top = mid;
        }
    }
    let chunk = g - starts[cs + cell];
    var w = 0u;
    top = params.n_worlds;
    while (top - w > 1u) {
        let mid = (w + top) / 2u;
        if (ddef_worlds[mid].base.y <= cell) {
            w = mid;
        } else {
            top = mid;
        }
    }
    let world = ddef_worlds[w];
    let dims = world.dims.xyz;
    let cp = ddef_cell_point(dims, cell - world.base.y);
    let tb = starts[KUHN * cell] + chunk * WG;
    let te = min(tb + WG, starts[KUHN * cell + KUHN]);
    let eps2 = world.eps2.x;
    let corrected = world.quanta.w != 0;

    // This invocation's target.
    let k = tb + lid;
    let has = k < te;
    var me = vec4<f32>(0.0);
    var kuhn = 0u;
    var valid = 0u;
    var wts = vec4<f32>(0.0);
    var particle = 0u;
    if (has) {
        me = sorted_src[k];
        let key = sorted_key[k];
        particle = key.x;
        kuhn = key.y % KUHN;
        wts = ddef_weights(kuhn, ddef_locate(world, me.xyz).f);
        valid = ddef_valid_slots(dims, cp, kuhn);
    }
    // Its correction: Kuhn type kc, path vertex v.
    let corr_on = corrected && lid < 24u;
    let kc = min(lid / 4u, KUHN - 1u);
    let v = lid % 4u;
    let valid_c = ddef_valid_slots(dims, cp, kc);
    let uc = ddef_site(world, ddef_vertex(cp, kc, v));

    let nd = tables[0u];
    let doff = tables[1u];
    let moff = tables[2u];
    var acc = vec3<f32>(0.0);
    var cacc = vec3<f32>(0.0);
    if (!STAGED) {
        // Invocations without a target or a correction skip the walk (whole SIMD
        // batches of a sparse cell's workgroup on a CPU adapter).
        if (has || corr_on) {
            for (var d = 0u; d < nd; d = d + 1u) {
                let r = neighbour_sources(world, dims, cp, tables[doff + d]);
                let bits = member_bits(moff + (kuhn * nd + d) * KUHN, moff + (kc * nd + d) * KUHN, valid, valid_c, v, has, corr_on);
                if ((bits.x | bits.y) == 0u) {
                    continue;
                }
                for (var s = r.x; s < r.y; s = s + 1u) {
                    let t2 = sorted_key[s].y % KUHN;
                    let near = ((bits.x >> t2) & 1u) != 0u && s != k;
                    let co = ((bits.y >> t2) & 1u) != 0u;
                    add_source(&acc, &cacc, me.xyz, uc, sorted_src[s], eps2, near, co);
                }
            }
        }
    }
    for (var d = 0u; d < nd && STAGED; d = d + 1u) {
        let r = neighbour_sources(world, dims, cp, tables[doff + d]);
        let bits = member_bits(moff + (kuhn * nd + d) * KUHN, moff + (kc * nd + d) * KUHN, valid, valid_c, v, has, corr_on);
        for (var base = r.x; base < r.y; base = base + TILE) {
            let s = base + lid;
            if (s < r.y) {
                tile[lid] = sorted_src[s];
                tile_kuhn[lid] = sorted_key[s].y % KUHN;
            }
            workgroupBarrier();
            let count = min(TILE, r.y - base);
            for (var i = 0u; i < count; i = i + 1u) {
                let t2 = tile_kuhn[i];
                let near = ((bits.x >> t2) & 1u) != 0u && base + i != k;
                let co = ((bits.y >> t2) & 1u) != 0u;
                add_source(&acc, &cacc, me.xyz, uc, tile[i], eps2, near, co);
            }
            workgroupBarrier();
        }
    }
    if (lid < 24u) {
        corr[lid] = vec4<f32>(cacc, 0.0);
    }
    workgroupBarrier();
    if (!has) {
        return;
    }
    var field = acc;
    for (var x = 0u; x < 4u; x = x + 1u) {
        let site = world.base.z + ddef_site_index(dims, ddef_vertex(cp, kuhn, x));
        field = field + wts[x] * (far[site].xyz - corr[kuhn * 4u + x].xyz);
    }
    let f = force[particle];
    force[particle] = vec4<f32>(f.xyz + me.w * field, f.w);
}
