// DDEF adjoint, step 6: per charge s as a source, the rest of the forces' transpose
// (LatticeDdef::forces_vjp), then its particle's cotangents. On the forward gather's work
// items, the workgroup walks the cells whose near stencils can hold its cell's sources
// (cell - D, the same offsets reversed: the stencils are symmetric), and each source
// takes from the targets k whose tetrahedron's near set holds it (the forward's
// membership test, with the target cell's valid slots), r = point_field_vjp(x_k - x_s, c_k),
//   x_bar_s -= r.xyz, qs_bar_s += r.w,
// and, `corrected`, from each (tau, v) of that cell whose correction at u_v holds it,
// r = point_field_vjp(u_v - x_s, cv_v(tau)): x_bar_s += r.xyz, qs_bar_s -= r.w. The far
// chunks' rows and the target side's row of adj_part are added in order, and
// out[particle] = (x_bar, qs_bar): one writer per particle, 0 elsewhere untouched.
// On a CPU adapter the walk is the forward gather's (the same work items and cells), so
// ddef_cells' flags.z covers it; its short loops (63 offsets x (8 valid slots + 30
// membership and `corrected` + 6 tetrahedra + one pass), the searches, the rows) stay
// under the 4,096 iterations shader::CPU_WALK_BUDGET leaves.
//
// The walk is near_walk's, reversed: per neighbour cell, the ranges of the target
// tetrahedra whose near set holds this source's type. STAGED (false on a CPU adapter)
// through workgroup memory HALF targets at a time, !STAGED read directly (without the
// tiles' barriers; the target cell's valid slots still come through `valid_t`, as a loop
// per type would cost llvmpipe's loop budget more); the same bits.

override STAGED: bool = true;

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> adj_sorted: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> tet_bar: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> adj_part: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> out: array<vec4<f32>>;

// Targets HALF at a time: (x, qs) in the tile's first half, (c, 0) in its second.
const HALF: u32 = TILE / 2u;
var<workgroup> tile: array<vec4<f32>, TILE>;
// The target cell's valid slots per Kuhn type.
var<workgroup> valid_t: array<u32, KUHN>;

// Sorted target j, (x, qs) when `half` is 0 and (c, 0) when 1: from the tile that starts
// at `base`, or directly !STAGED.
fn target_of(j: u32, base: u32, half: u32) -> vec4<f32> {
    if (STAGED) {
        return tile[half * HALF + j - base];
    }
    return adj_sorted[2u * j + half];
}

// STAGED: targets [base, min(base + HALF, end)) and their cotangents into the tile, for
// the whole workgroup.
fn stage_tile(base: u32, end: u32, lid: u32) {
    if (STAGED) {
        let s = base + lid % HALF;
        if (s < end) {
            tile[lid] = adj_sorted[2u * s + lid / HALF];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let it = near_item(group_index(wid, nwg));
    if (!it.valid) {
        return;
    }
    let world = it.world;
    let dims = it.dims;
    let last = ddef_worlds[params.n_worlds - 1u];
    let eps2 = world.eps2.x;
    let corrected = world.quanta.w != 0;

    // This invocation's source (near_target: the same per-invocation charge).
    let sc = near_target(it, lid);
    let has = sc.has;
    let k = sc.k;
    let ts = sc.kuhn;
    var me = vec4<f32>(0.0);
    if (has) {
        me = adj_sorted[2u * k];
    }
    let nd = it.nd;
    let moff = it.moff;
    var xb = vec3<f32>(0.0);
    var qb = 0.0;
    for (var d = 0u; d < nd; d = d + 1u) {
        let nc = ddef_offset_cell(dims, it.cp, -ddef_entry_offset(tables[it.doff + d]));
        if (nc.x < 0) {
            continue;
        }
        let ct = vec3<u32>(nc);
        workgroupBarrier();
        if (lid < KUHN) {
            valid_t[lid] = ddef_valid_slots(dims, ct, lid);
        }
        workgroupBarrier();
        let t0 = cell_tets(world, dims, ct);
        // The target types whose near set holds this source (bit tt).
        var bits = 0u;
        for (var tt = 0u; has && tt < KUHN; tt = tt + 1u) {
            let mc = tables[moff + (tt * nd + d) * KUHN + ts];
            if ((mc & valid_t[tt]) == 0u) {
                continue;
            }
            bits = bits | (1u << tt);
            if (!corrected) {
                continue;
            }
            for (var v = 0u; v < 4u; v = v + 1u) {
                if (((mc >> v) & 1u) == 0u) {
                    let u = ddef_site(world, ddef_vertex(ct, tt, v));
                    let r = point_field_vjp(u - me.xyz, tet_bar[4u * (t0 + tt) + v].xyz, me.w, eps2);
                    xb = xb + r.xyz;
                    qb = qb - r.w;
                }
            }
        }
        let re = starts[t0 + KUHN];
        for (var base = starts[t0]; base < re; base = tile_next(base, re, HALF)) {
            stage_tile(base, re, lid);
            let top = tile_top(base, re, HALF);
            for (var tt = 0u; tt < KUHN; tt = tt + 1u) {
                let r = tile_tet(vec2<u32>(bits, 0u), t0, tt, base, top);
                for (var j = r.x; j < r.y; j = j + 1u) {
                    if (j != k) {
                        let p = point_field_vjp(target_of(j, base, 0u).xyz - me.xyz, target_of(j, base, 1u).xyz, me.w, eps2);
                        xb = xb - p.xyz;
                        qb = qb + p.w;
                    }
                }
            }
            if (STAGED) {
                workgroupBarrier();
            }
        }
    }
    if (!has) {
        return;
    }
    for (var row = 0u; row <= disp.iter; row = row + 1u) {
        let a = adj_part[row * last.cap.w + k];
        xb = xb + a.xyz;
        qb = qb + a.w;
    }
    out[sc.particle] = vec4<f32>(xb, qb);
}
