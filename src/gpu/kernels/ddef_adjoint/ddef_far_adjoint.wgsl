// DDEF adjoint, step 4: the far field's transpose (paper eq. 17, LatticeDdef's
// far_field_vjp), per sorted source s and chunk of its world's sites (wid.y of
// disp.iter chunks): over the sites j whose far set holds s (j not a slot of N(T), T the
// tetrahedron of s: then s is not in M_j), with r = point_field_vjp(u_j - x_s, e_bar_j),
// x_bar_s -= r.xyz and qs_bar_s += r.w, in site order; the chunk's sums go to row
// wid.y of adj_part (one writer each). The chunks keep an invocation's loops inside a
// CPU adapter's budget (`CPU_CHUNK_SITES`).

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> starts: array<u32>;
@group(0) @binding(3) var<storage, read> adj_sorted: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> site_bar: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> adj_part: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let k = wid.x * WG + lid;
    let chunk = wid.y;
    let last = ddef_worlds[params.n_worlds - 1u];
    if (k >= starts[last.base.x + last.cap.x]) {
        return;
    }
    // The world of source k: the last whose sources start at or before it.
    var w = 0u;
    var top = params.n_worlds;
    while (top - w > 1u) {
        let mid = (w + top) / 2u;
        if (starts[ddef_worlds[mid].base.x] <= k) {
            w = mid;
        } else {
            top = mid;
        }
    }
    let world = ddef_worlds[w];
    let dims = world.dims.xyz;
    let sites = dims.x * dims.y * dims.z;
    let per = (sites + disp.iter - 1u) / disp.iter;
    let jb = min(chunk * per, sites);
    let je = min(jb + per, sites);
    let tl = sorted_key[k].y - world.base.x;
    let kuhn = tl % KUHN;
    let cell = vec3<i32>(ddef_cell_point(dims, tl / KUHN));
    let src = adj_sorted[2u * k];
    let eps2 = world.eps2.x;
    var xb = vec3<f32>(0.0);
    var qb = 0.0;
    for (var j = jb; j < je; j = j + 1u) {
        let p = ddef_site_point(dims, j);
        let dl = vec3<i32>(p) - cell;
        var held = false;
        if (all(dl >= vec3<i32>(-1)) && all(dl <= vec3<i32>(2))) {
            for (var s = 0u; s < 8u; s = s + 1u) {
                held = held || all(ddef_slot(kuhn, s) == dl);
            }
        }
        if (!held) {
            let r = point_field_vjp(ddef_site(world, p) - src.xyz, site_bar[world.base.z + j].xyz, src.w, eps2);
            xb = xb - r.xyz;
            qb = qb + r.w;
        }
    }
    adj_part[chunk * last.cap.w + k] = vec4<f32>(xb, qb);
}
