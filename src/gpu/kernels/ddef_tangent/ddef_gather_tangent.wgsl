// DDEF tangents, step 3: the derivative of ddef_gather with the structure frozen
// (LatticeDdef::fields_at_sources_jvp, forces_jvp): the same work items, neighbourhood
// walk and membership tests, each target summing both the field E and its tangent
//   dE = sum_{s in S(tau), s != i} dqs_s phi + qs_s G (dx_i - dx_s)        (near, exact)
//      + sum_v dw_v (far_v - corr_v) + w_v (dfar_v - dcorr_v)            (interpolated),
// dw from the weights' affine dependence on the target's position, dcorr_v the tangent
// of the `corrected` terms; then d(q_i E_i) = dqs_i E + qs_i dE is added to
// bd[bd_b(particle)], where tangent_coulomb left the external part. Sources and tangents
// come from ddef_tangent_sources, the far field and its tangent from ddef_far_sum.
//
// The walk is near_walk's: per neighbour cell, the ranges of the tetrahedra a sum takes.
// STAGED (false on a CPU adapter, as ddef_gather's): the sources come through workgroup
// memory, HALF at a time; !STAGED reads them directly, one pass per neighbour cell
// without barriers. Both add the same terms in the same order: the same bits.

override STAGED: bool = true;

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
var<workgroup> corr: array<vec4<f32>, 24>;
var<workgroup> dcorr: array<vec4<f32>, 24>;

// Sorted source j, (x, qs) when `tan` is 0 and (dx, dqs) when 1: from the tile that
// starts at `base`, or directly !STAGED.
fn source(j: u32, base: u32, tan: u32) -> vec4<f32> {
    if (STAGED) {
        return tile[tan * HALF + j - base];
    }
    return tan_sorted[2u * j + tan];
}

// STAGED: sources [base, min(base + HALF, end)) and their tangents into the tile, for
// the whole workgroup.
fn stage_tile(base: u32, end: u32, lid: u32) {
    if (STAGED) {
        let s = base + lid % HALF;
        if (s < end) {
            tile[lid] = tan_sorted[2u * s + lid / HALF];
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
    let eps2 = it.world.eps2.x;

    // This invocation's target and its correction.
    let tg = near_target(it, lid);
    var me = vec4<f32>(0.0);
    var dme = vec4<f32>(0.0);
    var wts = vec4<f32>(0.0);
    if (tg.has) {
        me = tan_sorted[2u * tg.k];
        dme = tan_sorted[2u * tg.k + 1u];
        wts = ddef_weights(tg.kuhn, ddef_locate(it.world, me.xyz).f);
    }
    let c = near_correction(it, lid, WG, it.te - it.tb);

    var acc = vec3<f32>(0.0);
    var dacc = vec3<f32>(0.0);
    var cacc = vec3<f32>(0.0);
    var dcacc = vec3<f32>(0.0);
    for (var d = 0u; d < it.nd; d = d + 1u) {
        let t0 = near_tets(it, d);
        if (t0 == NO_RANK) {
            continue;
        }
        let re = starts[t0 + KUHN];
        let bits = near_bits(it, d, tg, c);
        for (var base = starts[t0]; base < re; base = tile_next(base, re, HALF)) {
            stage_tile(base, re, lid);
            let top = tile_top(base, re, HALF);
            for (var t = 0u; t < KUHN; t = t + 1u) {
                let r = tile_tet(bits, t0, t, base, top);
                for (var j = r.x; j < r.y; j = j + 1u) {
                    let sj = source(j, base, 0u);
                    let tj = source(j, base, 1u);
                    if (r.z != 0u && j != tg.k) {
                        let dd = me.xyz - sj.xyz;
                        let inv = inv_dist(dot(dd, dd) + eps2);
                        acc = acc + point_field(dd, sj.w, inv);
                        dacc = dacc + point_field_jvp(dd, dme.xyz - tj.xyz, sj.w, tj.w, eps2);
                    }
                    if (r.w != 0u) {
                        let dd = c.site - sj.xyz;
                        let inv = inv_dist_or_zero(dot(dd, dd) + eps2);
                        cacc = cacc + point_field(dd, sj.w, inv);
                        dcacc = dcacc + point_field_jvp(dd, -tj.xyz, sj.w, tj.w, eps2);
                    }
                }
            }
            if (STAGED) {
                workgroupBarrier();
            }
        }
    }
    if (c.lane) {
        corr[c.slot] = vec4<f32>(cacc, 0.0);
        dcorr[c.slot] = vec4<f32>(dcacc, 0.0);
    }
    workgroupBarrier();
    if (!tg.has) {
        return;
    }
    let dw = ddef_weights_jvp(tg.kuhn, dme.xyz * it.world.inv_h.xyz);
    var field = acc;
    var dfield = dacc;
    for (var x = 0u; x < 4u; x = x + 1u) {
        let site = it.world.base.z + ddef_site_index(it.dims, ddef_vertex(it.cp, tg.kuhn, x));
        let fv = far[site].xyz - corr[tg.kuhn * 4u + x].xyz;
        field = field + wts[x] * fv;
        dfield = dfield + dw[x] * fv + wts[x] * (tan_far[site].xyz - dcorr[tg.kuhn * 4u + x].xyz);
    }
    let b = bd_b(tg.particle);
    bd[b] = vec4<f32>(bd[b].xyz + dme.w * field + me.w * dfield, 0.0);
}
