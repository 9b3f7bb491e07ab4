// DDEF adjoint, step 5: per charge as a target, the part of the forces' transpose that
// its own field's inputs give (LatticeDdef::forces_vjp), on the forward gather's work
// items, neighbourhood walk and membership tests (ddef_gather): the field
//   E_k = sum_{s in S(tau), s != k} qs_s phi(x_k - x_s) + sum_v w_v (far_v - corr_v),
// its own charge's cotangent w_k . E_k, and the position cotangent
//   x_bar_k = sum_s qs_s G(x_k - x_s) c_k + the weights' transpose of (c_k . (far_v - corr_v))_v,
// written to row disp.iter of adj_part (after the far chunks' rows) as (x_bar, qs_bar).
// On a CPU adapter its walk is the forward gather's: ddef_cells' flags.z covers it.

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> adj_sorted: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> far: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> cot: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> adj_part: array<vec4<f32>>;

// Sources HALF at a time: (x, qs) in the tile's first half, (c, 0) in its second.
const HALF: u32 = TILE / 2u;
var<workgroup> tile: array<vec4<f32>, TILE>;
var<workgroup> tile_kuhn: array<u32, HALF>;
var<workgroup> corr: array<vec4<f32>, 24>;

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

    // This invocation's target.
    let k = tb + lid;
    let has = k < te;
    var me = vec4<f32>(0.0);
    var ck = vec3<f32>(0.0);
    var wk = vec3<f32>(0.0);
    var kuhn = 0u;
    var valid = 0u;
    var wts = vec4<f32>(0.0);
    if (has) {
        me = adj_sorted[2u * k];
        ck = adj_sorted[2u * k + 1u].xyz;
        let key = sorted_key[k];
        wk = cot[disp.slot * 2u * params.n + key.x].xyz;
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
    var xb = vec3<f32>(0.0);
    var cacc = vec3<f32>(0.0);
    for (var d = 0u; d < nd; d = d + 1u) {
        let nc = ddef_offset_cell(dims, cp, ddef_entry_offset(tables[doff + d]));
        if (nc.x < 0) {
            continue;
        }
        let t0 = world.base.x + KUHN * ddef_cell_index(dims, vec3<u32>(nc));
        let rb = starts[t0];
        let re = starts[t0 + KUHN];
        let row = moff + (kuhn * nd + d) * KUHN;
        let row_c = moff + (kc * nd + d) * KUHN;
        for (var base = rb; base < re; base = base + HALF) {
            let s = base + lid % HALF;
            if (s < re && lid < HALF) {
                tile[lid] = adj_sorted[2u * s];
                tile_kuhn[lid] = sorted_key[s].y % KUHN;
            }
            workgroupBarrier();
            let count = min(HALF, re - base);
            for (var i = 0u; i < count; i = i + 1u) {
                let t2 = tile_kuhn[i];
                let sj = tile[i];
                if (has && (tables[row + t2] & valid) != 0u && base + i != k) {
                    let dd = me.xyz - sj.xyz;
                    let inv = inv_dist(dot(dd, dd) + eps2);
                    acc = acc + (sj.w * inv * inv * inv) * dd;
                    xb = xb + point_field_vjp(dd, ck, sj.w, eps2).xyz;
                }
                let mc = tables[row_c + t2];
                if (corr_on && (mc & valid_c) != 0u && ((mc >> v) & 1u) == 0u) {
                    let dd = uc - sj.xyz;
                    let inv = inv_dist_or_zero(dot(dd, dd) + eps2);
                    cacc = cacc + (sj.w * inv * inv * inv) * dd;
                }
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
    var gw = vec4<f32>(0.0);
    for (var x = 0u; x < 4u; x = x + 1u) {
        let site = world.base.z + ddef_site_index(dims, ddef_vertex(cp, kuhn, x));
        let fv = far[site].xyz - corr[kuhn * 4u + x].xyz;
        field = field + wts[x] * fv;
        gw[x] = dot(ck, fv);
    }
    xb = xb + ddef_weights_vjp(kuhn, gw) * world.inv_h.xyz;
    adj_part[disp.iter * last.cap.w + k] = vec4<f32>(xb, dot(wk, field));
}
