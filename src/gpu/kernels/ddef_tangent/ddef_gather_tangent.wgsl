// DDEF tangents, step 3: the derivative of ddef_gather with the structure frozen
// (LatticeDdef::fields_at_sources_jvp, forces_jvp): the same work items, neighbourhood
// walk and membership tests, each target summing both the field E and its tangent
//   dE = sum_{s in S(tau), s != i} dqs_s phi + qs_s G (dx_i - dx_s)        (near, exact)
//      + sum_v dw_v (far_v - corr_v) + w_v (dfar_v - dcorr_v)            (interpolated),
// dw from the weights' affine dependence on the target's position, dcorr_v the tangent
// of the `corrected` terms; then d(q_i E_i) = dqs_i E + qs_i dE is added to
// bd[bd_b(particle)], where tangent_coulomb left the external part. Sources and tangents
// come from ddef_tangent_sources, the far field and its tangent from ddef_far_sum.

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> tan_sorted: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> far: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> tan_far: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> bd: array<vec4<f32>>;

// Sources HALF at a time: (x, qs) in the tile's first half, (dx, dqs) in its second.
const HALF: u32 = TILE / 2u;
var<workgroup> tile: array<vec4<f32>, TILE>;
var<workgroup> tile_kuhn: array<u32, HALF>;
var<workgroup> corr: array<vec4<f32>, 24>;
var<workgroup> dcorr: array<vec4<f32>, 24>;

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
    var dme = vec4<f32>(0.0);
    var kuhn = 0u;
    var valid = 0u;
    var wts = vec4<f32>(0.0);
    var particle = 0u;
    if (has) {
        me = tan_sorted[2u * k];
        dme = tan_sorted[2u * k + 1u];
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
    var dacc = vec3<f32>(0.0);
    var cacc = vec3<f32>(0.0);
    var dcacc = vec3<f32>(0.0);
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
            if (s < re) {
                tile[lid] = tan_sorted[2u * s + lid / HALF];
                if (lid < HALF) {
                    tile_kuhn[lid] = sorted_key[s].y % KUHN;
                }
            }
            workgroupBarrier();
            let count = min(HALF, re - base);
            for (var i = 0u; i < count; i = i + 1u) {
                let t2 = tile_kuhn[i];
                let sj = tile[i];
                let tj = tile[HALF + i];
                if (has && (tables[row + t2] & valid) != 0u && base + i != k) {
                    let dd = me.xyz - sj.xyz;
                    let inv = inv_dist(dot(dd, dd) + eps2);
                    acc = acc + (sj.w * inv * inv * inv) * dd;
                    dacc = dacc + point_field_jvp(dd, dme.xyz - tj.xyz, sj.w, tj.w, eps2);
                }
                let mc = tables[row_c + t2];
                if (corr_on && (mc & valid_c) != 0u && ((mc >> v) & 1u) == 0u) {
                    let dd = uc - sj.xyz;
                    let inv = inv_dist_or_zero(dot(dd, dd) + eps2);
                    cacc = cacc + (sj.w * inv * inv * inv) * dd;
                    dcacc = dcacc + point_field_jvp(dd, -tj.xyz, sj.w, tj.w, eps2);
                }
            }
            workgroupBarrier();
        }
    }
    if (lid < 24u) {
        corr[lid] = vec4<f32>(cacc, 0.0);
        dcorr[lid] = vec4<f32>(dcacc, 0.0);
    }
    workgroupBarrier();
    if (!has) {
        return;
    }
    let dw = ddef_weights_jvp(kuhn, dme.xyz * world.inv_h.xyz);
    var field = acc;
    var dfield = dacc;
    for (var x = 0u; x < 4u; x = x + 1u) {
        let site = world.base.z + ddef_site_index(dims, ddef_vertex(cp, kuhn, x));
        let fv = far[site].xyz - corr[kuhn * 4u + x].xyz;
        field = field + wts[x] * fv;
        dfield = dfield + dw[x] * fv + wts[x] * (tan_far[site].xyz - dcorr[kuhn * 4u + x].xyz);
    }
    let b = bd_b(particle);
    bd[b] = vec4<f32>(bd[b].xyz + dme.w * field + me.w * dfield, 0.0);
}
