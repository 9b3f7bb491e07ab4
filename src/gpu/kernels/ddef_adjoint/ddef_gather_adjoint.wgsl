// DDEF adjoint, step 5: per charge as a target, the part of the forces' transpose that
// its own field's inputs give (LatticeDdef::forces_vjp), on the forward gather's work
// items, neighbourhood walk and membership tests (ddef_gather): the field
//   E_k = sum_{s in S(tau), s != k} qs_s phi(x_k - x_s) + sum_v w_v (far_v - corr_v),
// its own charge's cotangent w_k . E_k, and the position cotangent
//   x_bar_k = sum_s qs_s G(x_k - x_s) c_k + the weights' transpose of (c_k . (far_v - corr_v))_v,
// written to row disp.iter of adj_part (after the far chunks' rows) as (x_bar, qs_bar).
// On a CPU adapter its walk is the forward gather's: ddef_cells' flags.z covers it.
//
// The walk is near_walk's (see ddef_gather_tangent): STAGED (false on a CPU adapter)
// through workgroup memory HALF sources at a time, !STAGED read directly; the same bits.

override STAGED: bool = true;

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> adj_sorted: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> far: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> cot: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> adj_part: array<vec4<f32>>;

// Sources HALF at a time: (x, qs) in the tile's first half.
const HALF: u32 = TILE / 2u;
var<workgroup> tile: array<vec4<f32>, TILE>;
var<workgroup> corr: array<vec4<f32>, 24>;

// Sorted source j's (x, qs): from the tile that starts at `base`, or directly !STAGED.
fn source(j: u32, base: u32) -> vec4<f32> {
    if (STAGED) {
        return tile[j - base];
    }
    return adj_sorted[2u * j];
}

// STAGED: sources [base, min(base + HALF, end)) into the tile's first half, for the
// whole workgroup.
fn stage_tile(base: u32, end: u32, lid: u32) {
    if (STAGED) {
        let s = base + lid;
        if (s < end && lid < HALF) {
            tile[lid] = adj_sorted[2u * s];
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
    let last = ddef_worlds[params.n_worlds - 1u];
    let eps2 = it.world.eps2.x;

    // This invocation's target and its correction.
    let tg = near_target(it, lid);
    var me = vec4<f32>(0.0);
    var ck = vec3<f32>(0.0);
    var wk = vec3<f32>(0.0);
    var wts = vec4<f32>(0.0);
    if (tg.has) {
        me = adj_sorted[2u * tg.k];
        ck = adj_sorted[2u * tg.k + 1u].xyz;
        wk = cot[disp.slot * 2u * params.n + tg.particle].xyz;
        wts = ddef_weights(tg.kuhn, ddef_locate(it.world, me.xyz).f);
    }
    let c = near_correction(it, lid, WG, it.te - it.tb);

    var acc = vec3<f32>(0.0);
    var xb = vec3<f32>(0.0);
    var cacc = vec3<f32>(0.0);
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
                    let sj = source(j, base);
                    if (r.z != 0u && j != tg.k) {
                        let dd = me.xyz - sj.xyz;
                        let inv = inv_dist(dot(dd, dd) + eps2);
                        acc = acc + point_field(dd, sj.w, inv);
                        xb = xb + point_field_vjp(dd, ck, sj.w, eps2).xyz;
                    }
                    if (r.w != 0u) {
                        let dd = c.site - sj.xyz;
                        let inv = inv_dist_or_zero(dot(dd, dd) + eps2);
                        cacc = cacc + point_field(dd, sj.w, inv);
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
    }
    workgroupBarrier();
    if (!tg.has) {
        return;
    }
    var field = acc;
    var gw = vec4<f32>(0.0);
    for (var x = 0u; x < 4u; x = x + 1u) {
        let site = it.world.base.z + ddef_site_index(it.dims, ddef_vertex(it.cp, tg.kuhn, x));
        let fv = far[site].xyz - corr[tg.kuhn * 4u + x].xyz;
        field = field + wts[x] * fv;
        gw[x] = dot(ck, fv);
    }
    xb = xb + ddef_weights_vjp(tg.kuhn, gw) * it.world.inv_h.xyz;
    adj_part[disp.iter * last.cap.w + tg.k] = vec4<f32>(xb, dot(wk, field));
}
