// DDEF step 10 (LatticeDdef::evaluate_tet): the field at every charge, added as q E to
// its particle's force. One workgroup per work item of the scanned list: a cell and a
// chunk of up to WG of its targets (sorted, so a cell's targets are one range; a crowded
// cell gets several workgroups). The workgroup walks the cell's near neighbourhood, the
// union of its tetrahedra's near stencils (D cell offsets, tables), loading each
// neighbour cell's sources TILE at a time into workgroup memory; every target adds the
// sources its own tetrahedron's stencil holds (the membership table, clipped by the
// slots of N(tau) inside the lattice), its own source skipped by sorted position. For
// `corrected`, 24 invocations (staged: see near_correction; `unstaged`: one per cell
// corner) also sum, per Kuhn type and path vertex v of the cell, the near sources outside
// M_v at that vertex, subtracted from the vertex's far value before the targets
// interpolate (each source counted once, near or far). Charges are scaled by sqrt(k_c);
// w of the force (the Coulomb potential) is left alone.
//
// STAGED (false on a CPU adapter): staging the sources in workgroup memory pays on a GPU,
// while on lavapipe each barrier switches every invocation of the workgroup and cost more
// than the pairs (BENCHMARKS.md), so there `unstaged` reads the sources directly, blocked
// so that one read serves several sums (a read costs lavapipe more than a pair): BLOCK
// targets of one tetrahedron per invocation, and the corrections of one cell corner per
// invocation. Every sum adds the same terms in the same order as the staged walk (its
// sources by (tetrahedron, particle) within each neighbour cell): the same bits.
//
// The staged path's shape (`DdefGather`, fixed at pipeline creation; every shape adds the
// same terms in the same order, so gives the same bits): LANES invocations per workgroup,
// a divisor of WG of at least 64, a work item's WG targets split over WG / LANES
// workgroups (a workgroup past its item's targets returns at once), each reading its
// neighbourhood's tetrahedron starts and per-type membership bits once into workgroup
// memory (`item_tables`) rather than each warp at each neighbour cell; PACKED stages the
// neighbourhood's sources as one list, the neighbour cells' sorted ranges one after
// another in entry order, so a tile holds several small cells (per neighbour cell, a tile
// holds one cell's: at 110 sources a cell, 43% of it, and two barriers per cell); UNROLLED
// (per-cell staging only) adds the sources of a cell other than the item's own, where no
// target meets its own source, without that test and four per loop trip; DUAL (with
// UNROLLED, LANES at most WG / 2) gives each invocation two consecutive targets, which
// share each staged source read, the loop and, when of one Kuhn type (all but at most
// five invocations of a cell), the membership bits: a workgroup takes 2 LANES targets.
// Every staged shape lays a cell's targets out by Kuhn type in near_walk's KUHN_ORDER.

override STAGED: bool = true;
override LANES: u32 = WG;
override PACKED: bool = false;
override UNROLLED: bool = false;
override DUAL: bool = false;

// Entries of the near neighbourhood a PACKED workgroup holds (the tables' 63, checked on
// the host).
const NEAR_CELLS: u32 = 64u;

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> sorted_src: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> far: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> force: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;
var<workgroup> corr: array<vec4<f32>, 24>;
// Per neighbourhood entry d, the sorted starts of its tetrahedra (seg_st[8 d + t], t =
// 0..KUHN; all 0 outside the lattice) and per Kuhn type k the tetrahedra a target of type
// k takes there (`near_mask`, byte i % 4 of word i / 4, i = NEAR_CELLS k + d): read once
// per workgroup, not once per warp and entry (cached reads the gather is sensitive to:
// on an H100 it slowed 3x when more workgroup memory left less L1 cache; BENCHMARKS.md,
// "Registers, occupancy and the gather's workgroup tables"). PACKED
// also: the end of entry d's part of the list (inclusive prefix of the source counts)
// and the list's length.
var<workgroup> seg_st: array<u32, 8u * NEAR_CELLS>;
var<workgroup> seg_end: array<u32, NEAR_CELLS>;
var<workgroup> near_mask: array<u32, KUHN * NEAR_CELLS / 4u>;
var<workgroup> seg_total: u32;

// Source sj's exact near pull on the target `me`, added unless it is the target itself
// (`other` false: the term is never added, as when skipped).
fn near_pull(acc: vec3<f32>, me: vec3<f32>, sj: vec4<f32>, eps2: f32, other: bool) -> vec3<f32> {
    let dd = me - sj.xyz;
    let inv = pair_inv_dist(soft_r2(dd, eps2));
    return select(acc, acc + point_field(dd, sj.w, inv), other);
}

// UNROLLED: `acc` plus the near pulls on `me` of tile slots [lo, hi), none of them the
// target's own source, four per loop trip: the same terms in the same order as one per
// trip.
fn near_run4(acc0: vec3<f32>, me: vec3<f32>, lo: u32, hi: u32, eps2: f32) -> vec3<f32> {
    var acc = acc0;
    var j = lo;
    for (; j + 4u <= hi; j = j + 4u) {
        acc = near_pull(acc, me, tile[j], eps2, true);
        acc = near_pull(acc, me, tile[j + 1u], eps2, true);
        acc = near_pull(acc, me, tile[j + 2u], eps2, true);
        acc = near_pull(acc, me, tile[j + 3u], eps2, true);
    }
    for (; j < hi; j = j + 1u) {
        acc = near_pull(acc, me, tile[j], eps2, true);
    }
    return acc;
}

// DUAL: tile slot j's near pulls on two targets (neither its source), one read.
fn near_pull2(acc: ptr<function, vec3<f32>>, acc2: ptr<function, vec3<f32>>, me: vec3<f32>, me2: vec3<f32>, j: u32, eps2: f32) {
    let sj = tile[j];
    *acc = near_pull(*acc, me, sj, eps2, true);
    *acc2 = near_pull(*acc2, me2, sj, eps2, true);
}

// DUAL: near_run4 for two targets at once.
fn near_run4x2(acc: ptr<function, vec3<f32>>, acc2: ptr<function, vec3<f32>>, me: vec3<f32>, me2: vec3<f32>, lo: u32, hi: u32, eps2: f32) {
    var j = lo;
    for (; j + 4u <= hi; j = j + 4u) {
        near_pull2(acc, acc2, me, me2, j, eps2);
        near_pull2(acc, acc2, me, me2, j + 1u, eps2);
        near_pull2(acc, acc2, me, me2, j + 2u, eps2);
        near_pull2(acc, acc2, me, me2, j + 3u, eps2);
    }
    for (; j < hi; j = j + 1u) {
        near_pull2(acc, acc2, me, me2, j, eps2);
    }
}

// The staged near pulls on target `tg` (at `me`) of the tile [base, ..)'s sorted positions
// [b, e): outside the item's own cell (`other`) as near_run4 when UNROLLED, else one
// source per trip, skipping the target's own.
fn near_run(acc: vec3<f32>, me: vec3<f32>, k: u32, b: u32, e: u32, base: u32, other: bool, eps2: f32) -> vec3<f32> {
    if (UNROLLED && other) {
        // (A tetrahedron wholly before this tile has e < base.)
        return near_run4(acc, me, b - base, max(b, e) - base, eps2);
    }
    var a = acc;
    for (var j = b; j < e; j = j + 1u) {
        a = near_pull(a, me, tile[j - base], eps2, j != k);
    }
    return a;
}

// Adds target `tg`'s field (its near sum `acc`, the interpolated far values less the
// `corrected` sums) times its charge to its particle's force.
fn add_field(it: NearItem, tg: NearTarget, me: vec4<f32>, wts: vec4<f32>, acc: vec3<f32>) {
    if (!tg.has) {
        return;
    }
    var field = acc;
    for (var x = 0u; x < 4u; x = x + 1u) {
        let site = it.world.base.z + ddef_site_index(it.dims, ddef_vertex(it.cp, tg.kuhn, x));
        field = field + wts[x] * (far[site].xyz - corr[tg.kuhn * 4u + x].xyz);
    }
    let f = force[tg.particle];
    force[tg.particle] = vec4<f32>(f.xyz + me.w * field, f.w);
}

// Source sj's pull on a `corrected` sum's site `uc`: a source outside M_v, so never at
// the site (see ddef_far's far_pull).
fn site_pull(acc: vec3<f32>, uc: vec3<f32>, sj: vec4<f32>, eps2: f32) -> vec3<f32> {
    let dd = uc - sj.xyz;
    let inv = pair_inv_dist(soft_r2(dd, eps2));
    return acc + point_field(dd, sj.w, inv);
}

// Targets per invocation of `unstaged` (its near loop is written out for each).
// Targets per invocation on a CPU adapter (`near_sums` writes the sums out for each).
const BLOCK: u32 = 4u;

// The !STAGED gather (see the header). Invocation `lid` < WG - 8 takes up to BLOCK
// consecutive targets of one tetrahedron of the work item's range tb..te (the groups in
// sorted order: at most WG / BLOCK + KUHN of them); invocation WG - 8 + c the `corrected`
// sums of cell corner c. Adds the forces of its targets.
fn unstaged(world: DdefWorld, dims: vec3<u32>, cp: vec3<u32>, cell: u32, tb: u32, te: u32, lid: u32, eps2: f32, corrected: bool) {
    var first = 0u;
    var count = 0u;
    var kuhn = 0u;
    var g = 0u;
    for (var t = 0u; t < KUHN; t = t + 1u) {
        let b = max(starts[KUHN * cell + t], tb);
        let e = min(starts[KUHN * cell + t + 1u], te);
        if (b < e) {
            let n = (e - b + BLOCK - 1u) / BLOCK;
            if (lid >= g && lid < g + n) {
                first = b + (lid - g) * BLOCK;
                count = min(BLOCK, e - first);
                kuhn = t;
            }
            g = g + n;
        }
    }
    var acc = array<vec3<f32>, BLOCK>();
    if (count > 0u) {
        acc = near_sums(world, dims, cp, kuhn, first, te - 1u, eps2);
    }
    let corner = lid + 8u - WG;
    if (lid >= WG - 8u) {
        var sums = array<vec3<f32>, KUHN>();
        if (corrected) {
            sums = corner_sums(world, dims, cp, corner, eps2);
        }
        for (var i = 0u; i < KUHN; i = i + 1u) {
            if (passes(cp, i, corner)) {
                corr[i * 4u + countOneBits(corner)] = vec4<f32>(sums[i], 0.0);
            }
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < count; i = i + 1u) {
        let k = first + i;
        let src = sorted_src[k];
        let wts = ddef_weights(kuhn, ddef_locate(world, src.xyz).f);
        var field = acc[i];
        for (var x = 0u; x < 4u; x = x + 1u) {
            let site = world.base.z + ddef_site_index(dims, ddef_vertex(cp, kuhn, x));
            field = field + wts[x] * (far[site].xyz - corr[kuhn * 4u + x].xyz);
        }
        let particle = sorted_key[k].x;
        let f = force[particle];
        force[particle] = vec4<f32>(f.xyz + src.w * field, f.w);
    }
}

// The near sums of the BLOCK targets from sorted position `first` (clamped at `last`), all
// of Kuhn type `kuhn` in cell `cp`: only the stencil's tetrahedra, each a sorted range
// walked in order, every source read once for the BLOCK targets, each skipping itself.
fn near_sums(world: DdefWorld, dims: vec3<u32>, cp: vec3<u32>, kuhn: u32, first: u32, last: u32, eps2: f32) -> array<vec3<f32>, BLOCK> {
    let me0 = sorted_src[min(first, last)].xyz;
    let me1 = sorted_src[min(first + 1u, last)].xyz;
    let me2 = sorted_src[min(first + 2u, last)].xyz;
    let me3 = sorted_src[min(first + 3u, last)].xyz;
    var a0 = vec3<f32>(0.0);
    var a1 = vec3<f32>(0.0);
    var a2 = vec3<f32>(0.0);
    var a3 = vec3<f32>(0.0);
    let nd = tables[0u];
    let valid = ddef_valid_slots(dims, cp, kuhn);
    for (var d = 0u; d < nd; d = d + 1u) {
        let t0 = neighbour_tets(world, dims, cp, tables[tables[1u] + d]);
        if (t0 == NO_RANK) {
            continue;
        }
        // The stencil's tetrahedra of this neighbour cell as bits; each run of adjacent
        // ones is one sorted range (a cell's tetrahedra are consecutive), walked by one
        // loop: the same sources in the same order, fewer loop entries for llvmpipe.
        var rest = taken_tets(tables[2u] + (kuhn * nd + d) * KUHN, valid);
        while (rest != 0u) {
            let t = firstTrailingBit(rest);
            let run = firstTrailingBit(~(rest >> t));
            rest = rest & ~(((1u << run) - 1u) << t);
            let e = starts[t0 + t + run];
            // Written out per target: a loop here would cost llvmpipe a loop iteration
            // (of its budget) per target and source.
            for (var s = starts[t0 + t]; s < e; s = s + 1u) {
                let sj = sorted_src[s];
                let d0 = me0 - sj.xyz;
                let i0 = pair_inv_dist(soft_r2(d0, eps2));
                a0 = select(a0, a0 + (sj.w * i0 * i0 * i0) * d0, s != first);
                let d1 = me1 - sj.xyz;
                let i1 = pair_inv_dist(soft_r2(d1, eps2));
                a1 = select(a1, a1 + (sj.w * i1 * i1 * i1) * d1, s != first + 1u);
                let d2 = me2 - sj.xyz;
                let i2 = pair_inv_dist(soft_r2(d2, eps2));
                a2 = select(a2, a2 + (sj.w * i2 * i2 * i2) * d2, s != first + 2u);
                let d3 = me3 - sj.xyz;
                let i3 = pair_inv_dist(soft_r2(d3, eps2));
                a3 = select(a3, a3 + (sj.w * i3 * i3 * i3) * d3, s != first + 3u);
            }
        }
    }
    return array<vec3<f32>, BLOCK>(a0, a1, a2, a3);
}

// The tetrahedra (bit t: Kuhn type t, KUHN = 6) of a neighbour cell whose membership row `row`
// meets the valid slots `valid`, read without a loop (a loop iteration spends llvmpipe's
// budget).
fn taken_tets(row: u32, valid: u32) -> u32 {
    return select(0u, 1u, (tables[row] & valid) != 0u)
        | select(0u, 2u, (tables[row + 1u] & valid) != 0u)
        | select(0u, 4u, (tables[row + 2u] & valid) != 0u)
        | select(0u, 8u, (tables[row + 3u] & valid) != 0u)
        | select(0u, 16u, (tables[row + 4u] & valid) != 0u)
        | select(0u, 32u, (tables[row + 5u] & valid) != 0u);
}

// Whether the path of Kuhn type `kuhn` in cell `cp` passes cell corner `corner` (bit a:
// + e_a), as its path vertex countOneBits(corner).
fn passes(cp: vec3<u32>, kuhn: u32, corner: u32) -> bool {
    let at = cp + vec3<u32>(corner & 1u, (corner >> 1u) & 1u, corner >> 2u);
    return all(ddef_vertex(cp, kuhn, countOneBits(corner)) == at);
}

// The `corrected` sums at cell corner `corner` of cell `cp`: for each Kuhn type i whose
// path passes it as vertex v, the near sources of i outside M_v, pulled at the corner's
// site. One read and one pull per source serve every such type; each sum adds its
// sources in the staged walk's order.
fn corner_sums(world: DdefWorld, dims: vec3<u32>, cp: vec3<u32>, corner: u32, eps2: f32) -> array<vec3<f32>, KUHN> {
    let v = countOneBits(corner);
    let uc = ddef_site(world, cp + vec3<u32>(corner & 1u, (corner >> 1u) & 1u, corner >> 2u));
    var on = 0u;
    var valid = array<u32, KUHN>();
    for (var i = 0u; i < KUHN; i = i + 1u) {
        valid[i] = ddef_valid_slots(dims, cp, i);
        on = on | select(0u, 1u << i, passes(cp, i, corner));
    }
    var c0 = vec3<f32>(0.0);
    var c1 = vec3<f32>(0.0);
    var c2 = vec3<f32>(0.0);
    var c3 = vec3<f32>(0.0);
    var c4 = vec3<f32>(0.0);
    var c5 = vec3<f32>(0.0);
    let nd = tables[0u];
    for (var d = 0u; d < nd; d = d + 1u) {
        let t0 = neighbour_tets(world, dims, cp, tables[tables[1u] + d]);
        if (t0 == NO_RANK) {
            continue;
        }
        for (var t = 0u; t < KUHN; t = t + 1u) {
            // Type i takes tetrahedron t's sources when they are near i and not in M_v.
            var bits = 0u;
            for (var i = 0u; i < KUHN; i = i + 1u) {
                let mc = tables[tables[2u] + (i * nd + d) * KUHN + t];
                if ((mc & valid[i]) != 0u && ((mc >> v) & 1u) == 0u) {
                    bits = bits | (1u << i);
                }
            }
            bits = bits & on;
            if (bits == 0u) {
                continue;
            }
            let e = starts[t0 + t + 1u];
            for (var s = starts[t0 + t]; s < e; s = s + 1u) {
                let sj = sorted_src[s];
                let dd = uc - sj.xyz;
                let inv = pair_inv_dist(soft_r2(dd, eps2));
                let pull = point_field(dd, sj.w, inv);
                c0 = select(c0, c0 + pull, (bits & 1u) != 0u);
                c1 = select(c1, c1 + pull, (bits & 2u) != 0u);
                c2 = select(c2, c2 + pull, (bits & 4u) != 0u);
                c3 = select(c3, c3 + pull, (bits & 8u) != 0u);
                c4 = select(c4, c4 + pull, (bits & 16u) != 0u);
                c5 = select(c5, c5 + pull, (bits & 32u) != 0u);
            }
        }
    }
    return array<vec3<f32>, KUHN>(c0, c1, c2, c3, c4, c5);
}

// Sources [base, min(base + TILE, end)) into the tile, for the whole workgroup.
fn stage_tile(base: u32, end: u32, lid: u32) {
    for (var r = 0u; r < TILE / LANES; r = r + 1u) {
        let i = lid + r * LANES;
        let s = base + i;
        if (s < end) {
            tile[i] = sorted_src[s];
        }
    }
    workgroupBarrier();
}

// PACKED: the start of entry d's part of the neighbourhood's list.
fn seg_begin(d: u32) -> u32 {
    return select(0u, seg_end[max(d, 1u) - 1u], d > 0u);
}

// PACKED: the entry whose part of the list holds position v (the first whose end is past
// it).
fn segment_of(v: u32) -> u32 {
    var lo = 0u;
    var hi = NEAR_CELLS - 1u;
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        if (seg_end[mid] > v) {
            hi = mid;
        } else {
            lo = mid + 1u;
        }
    }
    return lo;
}

// The work item's seg_st and near_mask (see their declaration), for the whole workgroup.
fn item_tables(it: NearItem, lid: u32) {
    for (var i = lid; i < 8u * NEAR_CELLS; i = i + LANES) {
        let d = i / 8u;
        var start = 0u;
        if (d < it.nd && i % 8u <= KUHN) {
            let t0 = near_tets(it, d);
            if (t0 != NO_RANK) {
                start = starts[t0 + i % 8u];
            }
        }
        seg_st[i] = start;
    }
    for (var w = lid; w < KUHN * NEAR_CELLS / 4u; w = w + LANES) {
        let k = 4u * w / NEAR_CELLS;
        let valid = ddef_valid_slots(it.dims, it.cp, k);
        var word = 0u;
        for (var b = 0u; b < 4u; b = b + 1u) {
            let d = (4u * w + b) % NEAR_CELLS;
            if (d < it.nd) {
                word = word | (taken_tets(it.moff + (k * it.nd + d) * KUHN, valid) << (8u * b));
            }
        }
        near_mask[w] = word;
    }
    workgroupBarrier();
}

// The near bits of target `tg` at entry d (its Kuhn type's byte of near_mask); 0 without
// a target.
fn entry_near(tg: NearTarget, d: u32) -> u32 {
    let i = NEAR_CELLS * tg.kuhn + d;
    return select(0u, (near_mask[i / 4u] >> (8u * (i % 4u))) & 0xffu, tg.has);
}

// tile_tet from seg_st: type t's part of entry d's staged tile [base, top), (x, y) its
// sorted positions, z whether the near sum takes it (bit t of `near`), w whether the
// correction does (bit t of `co`); empty when neither does.
fn entry_tet(near: u32, co: u32, d: u32, t: u32, base: u32, top: u32) -> vec4<u32> {
    let nt = (near >> t) & 1u;
    let ct = (co >> t) & 1u;
    if ((nt | ct) == 0u) {
        return vec4<u32>(0u);
    }
    return vec4<u32>(max(seg_st[8u * d + t], base), min(seg_st[8u * d + t + 1u], top), nt, ct);
}

// PACKED: the work item's entries into workgroup memory (item_tables, then seg_end; see
// their declaration), for the whole workgroup; returns the list's length.
fn packed_entries(it: NearItem, lid: u32) -> u32 {
    item_tables(it, lid);
    if (lid < NEAR_CELLS) {
        seg_end[lid] = seg_st[8u * lid + KUHN] - seg_st[8u * lid];
    }
    workgroupBarrier();
    // Inclusive scan of the counts (integers: exact).
    for (var o = 1u; o < NEAR_CELLS; o = o * 2u) {
        var x = 0u;
        if (lid < NEAR_CELLS) {
            x = seg_end[lid];
            if (lid >= o) {
                x = x + seg_end[lid - o];
            }
        }
        workgroupBarrier();
        if (lid < NEAR_CELLS) {
            seg_end[lid] = x;
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        seg_total = seg_end[NEAR_CELLS - 1u];
    }
    return workgroupUniformLoad(&seg_total);
}

// The tetrahedra of entry d whose sources correction `c` takes (near its Kuhn
// type and outside M_v); 0 when it is off.
fn corr_mask(it: NearItem, c: NearCorrection, d: u32) -> u32 {
    var bits = 0u;
    if (c.on) {
        let row = it.moff + (c.kuhn * it.nd + d) * KUHN;
        for (var t = 0u; t < KUHN; t = t + 1u) {
            let mc = tables[row + t];
            if ((mc & c.valid) != 0u && ((mc >> c.v) & 1u) == 0u) {
                bits = bits | (1u << t);
            }
        }
    }
    return bits;
}

// PACKED: the near and `corrected` sums of target `tg` and correction `c` over the
// neighbourhood, staged as one list (see the header): for each tile, each entry with
// sources in it, in entry order, and its taken tetrahedra's parts of the tile in order.
// An entry's sources meet a target in sorted order, as when staged per neighbour cell.
fn packed_sums(it: NearItem, tg: NearTarget, c: NearCorrection, me: vec3<f32>, lid: u32, eps2: f32, acc: ptr<function, vec3<f32>>, cacc: ptr<function, vec3<f32>>) {
    let total = packed_entries(it, lid);
    var d0 = 0u;
    for (var vb = 0u; vb < total; vb = vb + TILE) {
        for (var r = 0u; r < TILE / LANES; r = r + 1u) {
            let i = lid + r * LANES;
            let v = vb + i;
            if (v < total) {
                let d = segment_of(v);
                tile[i] = sorted_src[seg_st[8u * d] + v - seg_begin(d)];
            }
        }
        workgroupBarrier();
        let vt = min(vb + TILE, total);
        while (d0 + 1u < NEAR_CELLS && seg_end[d0] <= vb) {
            d0 = d0 + 1u;
        }
        for (var d = d0; d < it.nd; d = d + 1u) {
            let v0 = seg_begin(d);
            if (v0 >= vt) {
                break;
            }
            let near = entry_near(tg, d);
            let co = corr_mask(it, c, d);
            if ((near | co) == 0u) {
                continue;
            }
            // Entry d's sources in this tile: sorted positions [base, top), from slot lo.
            let lo = max(vb, v0) - vb;
            let base = seg_st[8u * d] + vb + lo - v0;
            let top = seg_st[8u * d] + min(vt, seg_end[d]) - v0;
            for (var t = 0u; t < KUHN; t = t + 1u) {
                let nt = (near >> t) & 1u;
                let ct = (co >> t) & 1u;
                if ((nt | ct) == 0u) {
                    continue;
                }
                let b = max(seg_st[8u * d + t], base);
                let e = min(seg_st[8u * d + t + 1u], top);
                // The near and the correction's sums in loops of their own: a warp
                // without corrections tests nothing per pair.
                if (nt != 0u) {
                    for (var j = b; j < e; j = j + 1u) {
                        *acc = near_pull(*acc, me, tile[j - base + lo], eps2, j != tg.k);
                    }
                }
                if (ct != 0u) {
                    for (var j = b; j < e; j = j + 1u) {
                        *cacc = site_pull(*cacc, c.site, tile[j - base + lo], eps2);
                    }
                }
            }
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(LANES)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // WG / span workgroups per work item (1 on the !STAGED path, whose LANES is WG).
    let per = select(1u, 2u, DUAL);
    let span = per * LANES;
    let g = group_index(wid, nwg);
    let item = near_item(g / (WG / span));
    if (!item.valid) {
        return;
    }
    let eps2 = item.world.eps2.x;
    if (!STAGED) {
        unstaged(item.world, item.dims, item.cp, item.cell, item.tb, item.te, lid, eps2, item.world.quanta.w != 0);
        return;
    }
    // This workgroup's part of the item's targets.
    var it = item;
    it.tb = it.tb + (g % (WG / span)) * span;
    if (it.tb >= it.te) {
        return;
    }
    it.te = min(it.te, it.tb + span);

    // This invocation's targets (DUAL: two, the second tg2) and its correction.
    let tg = near_target(it, per * lid);
    var me = vec4<f32>(0.0);
    var wts = vec4<f32>(0.0);
    if (tg.has) {
        me = sorted_src[tg.k];
        wts = ddef_weights(tg.kuhn, ddef_locate(it.world, me.xyz).f);
    }
    var tg2 = NearTarget();
    var me2 = vec4<f32>(0.0);
    var wts2 = vec4<f32>(0.0);
    if (DUAL) {
        tg2 = near_target(it, per * lid + 1u);
    }
    if (DUAL && tg2.has) {
        me2 = sorted_src[tg2.k];
        wts2 = ddef_weights(tg2.kuhn, ddef_locate(it.world, me2.xyz).f);
    }
    let c = near_correction(it, lid, LANES, (it.te - it.tb + per - 1u) / per);

    var acc = vec3<f32>(0.0);
    var acc2 = vec3<f32>(0.0);
    var cacc = vec3<f32>(0.0);
    if (PACKED) {
        packed_sums(it, tg, c, me.xyz, lid, eps2, &acc, &cacc);
    } else {
        item_tables(it, lid);
    }
    // The item's own cell's first tetrahedron: only there may a target meet its own source.
    let own = cell_tets(it.world, it.dims, it.cp);
    for (var d = 0u; d < it.nd && !PACKED; d = d + 1u) {
        let t0 = near_tets(it, d);
        if (t0 == NO_RANK) {
            continue;
        }
        let end = seg_st[8u * d + KUHN];
        let bits = vec2<u32>(entry_near(tg, d), corr_mask(it, c, d));
        // DUAL: the second target's near bits.
        var bits2 = 0u;
        if (DUAL) {
            bits2 = entry_near(tg2, d);
        }
        for (var base = seg_st[8u * d]; base < end; base = tile_next(base, end, TILE)) {
            stage_tile(base, end, lid);
            let top = tile_top(base, end, TILE);
            // Only the tetrahedra this invocation's sums take, each a sorted range of the
            // tile: the sources in the same order as one pass over the tile that tests
            // each source's type, without the pairs of the others (a warp whose targets
            // share a type or two walks 191-256 of a neighbourhood's 288-366
            // tetrahedra). An invocation with no target, or none of whose sums this
            // neighbour cell feeds, skips the tile: whole warps idle (a cell's last work
            // item) issue nothing.
            for (var t = 0u; t < KUHN; t = t + 1u) {
                let r = entry_tet(bits.x | bits2, bits.y, d, t, base, top);
                // The near and the correction's sums in loops of their own (as packed).
                if (DUAL) {
                    let n1 = ((bits.x >> t) & 1u) != 0u;
                    let n2 = ((bits2 >> t) & 1u) != 0u;
                    if (n1 && n2 && t0 != own) {
                        near_run4x2(&acc, &acc2, me.xyz, me2.xyz, r.x - base, max(r.x, r.y) - base, eps2);
                    } else if (n1 && n2) {
                        for (var j = r.x; j < r.y; j = j + 1u) {
                            let sj = tile[j - base];
                            acc = near_pull(acc, me.xyz, sj, eps2, j != tg.k);
                            acc2 = near_pull(acc2, me2.xyz, sj, eps2, j != tg2.k);
                        }
                    } else if (n1) {
                        acc = near_run(acc, me.xyz, tg.k, r.x, r.y, base, t0 != own, eps2);
                    } else if (n2) {
                        acc2 = near_run(acc2, me2.xyz, tg2.k, r.x, r.y, base, t0 != own, eps2);
                    }
                } else if (r.z != 0u) {
                    // One target: the walk measured before DUAL (bits2 is 0).
                    acc = near_run(acc, me.xyz, tg.k, r.x, r.y, base, t0 != own, eps2);
                }
                if (r.w != 0u) {
                    for (var j = r.x; j < r.y; j = j + 1u) {
                        cacc = site_pull(cacc, c.site, tile[j - base], eps2);
                    }
                }
            }
            workgroupBarrier();
        }
    }
    if (c.lane) {
        corr[c.slot] = vec4<f32>(cacc, 0.0);
    }
    workgroupBarrier();
    add_field(it, tg, me, wts, acc);
    add_field(it, tg2, me2, wts2, acc2);
}
