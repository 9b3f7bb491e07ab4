// The DDEF near gathers' walk over a work item's neighbour cells (ddef_gather and, on the
// same work items, ddef_gather_tangent, ddef_gather_adjoint, ddef_source_adjoint;
// LatticeDdef::evaluate_tet): the item's cell and targets, each neighbour cell's first
// tetrahedron, the Kuhn types of its tetrahedra that a target's near sum and a
// `corrected` sum take (membership bits, read once per neighbour cell), and the sorted
// range of one tetrahedron inside a staged tile. A neighbour cell's sources are sorted by
// (tetrahedron, particle), so walking the taken tetrahedra's ranges in increasing order
// meets the sources in the same order as a pass over the cell that tests each type.
// Each kernel keeps its own pair loop over those ranges (its own formula of physics.wgsl).
// Reads its kernel's `ddef_worlds`, `tables`, `starts`, `sorted_key` and its `STAGED`
// override (false on a CPU adapter: no tiles, each neighbour cell's range in one pass).

// A work item's cell `cell` (point `cp`) and its targets, positions [tb, te) of the
// cell's range (laid out in KUHN_ORDER by `near_target`; in sorted order by a CPU
// adapter's direct walks);
// the neighbourhood's entries (nd of them, the tables' near stencil at `doff`) and the
// membership table (at `moff`).
struct NearItem {
    valid: bool,
    world: DdefWorld,
    dims: vec3<u32>,
    cell: u32,
    cp: vec3<u32>,
    tb: u32,
    te: u32,
    nd: u32,
    doff: u32,
    moff: u32,
}

// Work item `g` of the list; `valid` false past it.
fn near_item(g: u32) -> NearItem {
    let item = ddef_work_item(g);
    if (!item.valid) {
        return NearItem(false, DdefWorld(), vec3<u32>(0u), 0u, vec3<u32>(0u), 0u, 0u, 0u, 0u, 0u);
    }
    let world = ddef_worlds[item.world];
    let dims = world.dims.xyz;
    let cp = ddef_cell_point(dims, item.cell - world.base.y);
    let tb = starts[KUHN * item.cell] + item.chunk * WG;
    let te = min(tb + WG, starts[KUHN * item.cell + KUHN]);
    return NearItem(true, world, dims, item.cell, cp, tb, te, tables[0u], tables[1u], tables[2u]);
}

// Invocation `lid`'s target, position tb + lid of the item's cell laid out in KUHN_ORDER
// (`ordered_target`): `has` when it is one of the item's; its sorted position k, particle,
// Kuhn type and the valid slots of its tetrahedron's stencil.
struct NearTarget {
    has: bool,
    k: u32,
    particle: u32,
    kuhn: u32,
    valid: u32,
}

fn near_target(it: NearItem, lid: u32) -> NearTarget {
    let p = it.tb + lid;
    var t = NearTarget(p < it.te, 0u, 0u, 0u, 0u);
    if (t.has) {
        let k = ordered_target(it.cell, p);
        t.k = k;
        let key = sorted_key[k];
        t.particle = key.x;
        t.kuhn = key.y % KUHN;
        t.valid = ddef_valid_slots(it.dims, it.cp, t.kuhn);
    }
    return t;
}

// The Kuhn types in the order a cell's targets are laid out over the invocations, not
// 0..5: a warp spans one to three types and walks every tetrahedron any of its lanes
// takes, and neighbours in this order share more of their stencils (3.5% fewer pair slots
// walked at 1M charges in the cube; `examples/gather_warps.rs N M 3,2,0,1,4,5`). Each
// target's sums are unchanged, so are the bits.
const KUHN_ORDER = array<u32, 6>(3u, 2u, 0u, 1u, 4u, 5u);

// The sorted position of the target at position p of cell `cell`'s range [starts[KUHN
// cell], starts[KUHN cell + KUHN]) with its Kuhn types laid out in KUHN_ORDER.
fn ordered_target(cell: u32, p: u32) -> u32 {
    var q = p - starts[KUHN * cell];
    for (var i = 0u; i < KUHN - 1u; i = i + 1u) {
        let b = starts[KUHN * cell + KUHN_ORDER[i]];
        let n = starts[KUHN * cell + KUHN_ORDER[i] + 1u] - b;
        if (q < n) {
            return b + q;
        }
        q = q - n;
    }
    return starts[KUHN * cell + KUHN_ORDER[KUHN - 1u]] + q;
}

// Invocation `lid`'s `corrected` sum (on in a `corrected` world): Kuhn type `kuhn`, path
// vertex `v`, at `site`, over the near sources of that type outside M_v; `slot` = 4 kuhn
// + v, `lane` whether this invocation holds one (`on` or not). The 24 sums sit on the
// last 24 of the workgroup's `lanes` invocations when the `busy` first ones, which hold
// its targets, leave them free (a
// warp of their own: a warp that also held targets would pay both walks, and hold up the
// workgroup at each tile's barrier), else on the first 24. Either way each sum adds the
// same terms in the same order.
struct NearCorrection {
    on: bool,
    lane: bool,
    slot: u32,
    kuhn: u32,
    v: u32,
    valid: u32,
    site: vec3<f32>,
}

fn near_correction(it: NearItem, lid: u32, lanes: u32, busy: u32) -> NearCorrection {
    let first = select(0u, lanes - 24u, busy <= lanes - 24u);
    let lane = lid >= first && lid - first < 24u;
    let slot = select(0u, lid - first, lane);
    let kc = slot / 4u;
    let v = slot % 4u;
    let valid = ddef_valid_slots(it.dims, it.cp, kc);
    let site = ddef_site(it.world, ddef_vertex(it.cp, kc, v));
    return NearCorrection(it.world.quanta.w != 0 && lane, lane, slot, kc, v, valid, site);
}

// The first tetrahedron of the cell `c` of `world`.
fn cell_tets(world: DdefWorld, dims: vec3<u32>, c: vec3<u32>) -> u32 {
    return world.base.x + KUHN * ddef_cell_index(dims, c);
}

// The first tetrahedron of the neighbour cell at stencil entry `entry` of cell `cp`;
// NO_RANK outside the lattice.
fn neighbour_tets(world: DdefWorld, dims: vec3<u32>, cp: vec3<u32>, entry: u32) -> u32 {
    let nc = ddef_offset_cell(dims, cp, ddef_entry_offset(entry));
    if (nc.x < 0) {
        return NO_RANK;
    }
    return cell_tets(world, dims, vec3<u32>(nc));
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

// The first tetrahedron of the neighbour cell at the item's neighbourhood entry d;
// NO_RANK outside the lattice.
fn near_tets(it: NearItem, d: u32) -> u32 {
    return neighbour_tets(it.world, it.dims, it.cp, tables[it.doff + d]);
}

// member_bits of target `tg` and correction `c` at the item's neighbourhood entry d.
fn near_bits(it: NearItem, d: u32, tg: NearTarget, c: NearCorrection) -> vec2<u32> {
    let row = it.moff + (tg.kuhn * it.nd + d) * KUHN;
    let row_c = it.moff + (c.kuhn * it.nd + d) * KUHN;
    return member_bits(row, row_c, tg.valid, c.valid, c.v, tg.has, c.on);
}

// Type t's part of the staged tile [base, top) of the neighbour cell whose first
// tetrahedron is t0: (x, y) the sorted positions of tetrahedron t0 + t's sources inside
// the tile, z whether the near sum (bits.x) takes them, w whether the correction
// (bits.y) does; empty, without a read, when neither does.
fn tile_tet(bits: vec2<u32>, t0: u32, t: u32, base: u32, top: u32) -> vec4<u32> {
    let near = (bits.x >> t) & 1u;
    let co = (bits.y >> t) & 1u;
    if ((near | co) == 0u) {
        return vec4<u32>(0u);
    }
    return vec4<u32>(max(starts[t0 + t], base), min(starts[t0 + t + 1u], top), near, co);
}

// The tile after the one at `base` of a neighbour cell's sources [.., end), `step` a tile;
// !STAGED the range is one pass (sources read directly), so `end`.
fn tile_next(base: u32, end: u32, step: u32) -> u32 {
    return select(end, base + step, STAGED);
}

// The end of the tile at `base`: !STAGED, the range's.
fn tile_top(base: u32, end: u32, step: u32) -> u32 {
    return select(end, min(base + step, end), STAGED);
}
