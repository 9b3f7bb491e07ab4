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
// `corrected` + the tiles), the searches, the rows) stay under the 4,096 iterations
// shader::CPU_WALK_BUDGET leaves.

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
var<workgroup> tile_kuhn: array<u32, HALF>;
// The target cell's valid slots per Kuhn type.
var<workgroup> valid_t: array<u32, KUHN>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let item = ddef_work_item(group_index(wid, nwg));
    if (!item.valid) {
        return;
    }
    let cell = item.cell;
    let chunk = item.chunk;
    let world = ddef_worlds[item.world];
    let last = ddef_worlds[params.n_worlds - 1u];
    let dims = world.dims.xyz;
    let cp = ddef_cell_point(dims, cell - world.base.y);
    let tb = starts[KUHN * cell] + chunk * WG;
    let te = min(tb + WG, starts[KUHN * cell + KUHN]);
    let eps2 = world.eps2.x;
    let corrected = world.quanta.w != 0;

    // This invocation's source.
    let k = tb + lid;
    let has = k < te;
    var me = vec4<f32>(0.0);
    var ts = 0u;
    var particle = 0u;
    if (has) {
        me = adj_sorted[2u * k];
        let key = sorted_key[k];
        particle = key.x;
        ts = key.y % KUHN;
    }
    let nd = tables[0u];
    let doff = tables[1u];
    let moff = tables[2u];
    var xb = vec3<f32>(0.0);
    var qb = 0.0;
    for (var d = 0u; d < nd; d = d + 1u) {
        let nc = ddef_offset_cell(dims, cp, -ddef_entry_offset(tables[doff + d]));
        if (nc.x < 0) {
            continue;
        }
        let ct = vec3<u32>(nc);
        workgroupBarrier();
        if (lid < KUHN) {
            valid_t[lid] = ddef_valid_slots(dims, ct, lid);
        }
        workgroupBarrier();
        let t0 = world.base.x + KUHN * ddef_cell_index(dims, ct);
        if (has && corrected) {
            for (var tt = 0u; tt < KUHN; tt = tt + 1u) {
                let mc = tables[moff + (tt * nd + d) * KUHN + ts];
                if ((mc & valid_t[tt]) == 0u) {
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
        }
        let rb = starts[t0];
        let re = starts[t0 + KUHN];
        for (var base = rb; base < re; base = base + HALF) {
            let s = base + lid % HALF;
            if (s < re) {
                tile[lid] = adj_sorted[2u * s + lid / HALF];
                if (lid < HALF) {
                    tile_kuhn[lid] = sorted_key[s].y % KUHN;
                }
            }
            workgroupBarrier();
            let count = min(HALF, re - base);
            for (var i = 0u; i < count; i = i + 1u) {
                let tt = tile_kuhn[i];
                if (has && (tables[moff + (tt * nd + d) * KUHN + ts] & valid_t[tt]) != 0u && base + i != k) {
                    let r = point_field_vjp(tile[i].xyz - me.xyz, tile[HALF + i].xyz, me.w, eps2);
                    xb = xb - r.xyz;
                    qb = qb + r.w;
                }
            }
            workgroupBarrier();
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
    out[particle] = vec4<f32>(xb, qb);
}
