// DDEF step 8 (paper eq. 17; LatticeDdef::far_field): the far field at every site from
// the sources not in M_j, split over source chunks: workgroup (b, c) takes WG sites of
// block b and chunk c of their world's sorted sources, staged TILE at a time in workgroup
// memory; ddef_far_sum adds the chunks in a fixed order. Each site walks M_j's ranges
// with a cursor as the sources stream by and skips every source inside one (exact
// exclusion: never add-then-subtract); a tile no range meets takes a loop without the
// test, adding the same terms in the same order. Charges are scaled by sqrt(k_c):
// E / sqrt(k_c). STAGED (false on a CPU adapter): as in ddef_gather, lavapipe reads the
// sources directly, in the same order, instead of paying two barriers per tile, and
// `unstaged` gives each invocation TARGETS sites so that one read serves them all.

override STAGED: bool = true;
// Sites per invocation (`Kernel::cpu_targets`, set on a CPU adapter with STAGED off): at
// most FAR_SITES. A workgroup of WG / TARGETS invocations still takes WG sites.
override TARGETS: u32 = 1u;
const FAR_SITES: u32 = 16u;

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> sorted_src: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> far_part: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;

// `acc` plus the pull of source `sj` at site `u`. Without inv_dist_or_zero's test (7-8% of
// this kernel on an H200): a source is never at a site whose sum takes it, since a charge
// at a lattice point u_j is located in a tetrahedron with u_j as a vertex (the Kuhn path
// of a point at a cell corner passes that corner, rounding or not), so u_j is in its N_s
// (tests/gpu_ddef.rs puts charges on sites).
fn far_pull(acc: vec3<f32>, u: vec3<f32>, sj: vec4<f32>, eps2: f32) -> vec3<f32> {
    let d = u - sj.xyz;
    let inv = pair_inv_dist(soft_r2(d, eps2));
    return acc + point_field(d, sj.w, inv);
}

@compute @workgroup_size(WG / TARGETS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if (!STAGED) {
        unstaged(wid, lid);
        return;
    }
    let j = wid.x * WG + lid;
    let chunk = wid.y;
    let world = ddef_worlds[far_world(wid.x)];
    let dims = world.dims.xyz;
    // A block past the world's sites (about half of them are reserved for re-plans), or a
    // chunk past its chunks: nothing to do (uniform per workgroup).
    if (chunk >= u32(world.planned.w) || wid.x * WG - world.base.z >= dims.x * dims.y * dims.z) {
        return;
    }
    let local = j - world.base.z;
    let valid = local < dims.x * dims.y * dims.z;
    let span = far_chunk(world, chunk);
    var u = vec3<f32>(0.0);
    var p = vec3<u32>(0u);
    var r = vec3<u32>(0u);
    if (valid) {
        p = ddef_site_point(dims, local);
        u = ddef_site(world, p);
        r = far_start(world, p, span.x);
    }
    let eps2 = world.eps2.x;
    var acc = vec3<f32>(0.0);
    // Every invocation loads and syncs, valid or not (uniform control flow). (This is the
    // staged path: `unstaged` has returned when STAGED is off.)
    for (var base = span.x; base < span.y; base = base + TILE) {
        let s = base + lid;
        var src = vec4<f32>(0.0);
        if (s < span.y) {
            src = sorted_src[s];
        }
        tile[lid] = src;
        workgroupBarrier();
        let count = min(TILE, span.y - base);
        if (valid) {
            r = far_cursor(world, p, r, base);
            if (r.x >= base + count) {
                // A tile no range meets (most of them). A full one takes a constant trip
                // count, which the driver can unroll, as coulomb_tiled's; the same terms
                // in order.
                if (count == TILE) {
                    for (var k = 0u; k < TILE; k = k + 1u) {
                        acc = far_pull(acc, u, tile[k], eps2);
                    }
                } else {
                    for (var k = 0u; k < count; k = k + 1u) {
                        acc = far_pull(acc, u, tile[k], eps2);
                    }
                }
            } else {
                for (var k = 0u; k < count; k = k + 1u) {
                    r = far_cursor(world, p, r, base + k);
                    if (base + k < r.x) {
                        acc = far_pull(acc, u, tile[k], eps2);
                    }
                }
            }
        }
        workgroupBarrier();
    }
    if (valid) {
        let last = ddef_worlds[params.n_worlds - 1u];
        far_part[chunk * (last.base.z + last.cap.z) + j] = vec4<f32>(acc, 0.0);
    }
}

// One site of `unstaged`: its lattice point and position, its cursor over M_j, whether
// it is a site of the world.
struct FarSite {
    p: vec3<u32>,
    u: vec3<f32>,
    r: vec3<u32>,
    valid: bool,
}

// Site i of invocation `lid` in site block `block`: TARGETS consecutive sites per
// invocation.
fn far_site(world: DdefWorld, block: u32, lid: u32, i: u32, first: u32) -> FarSite {
    let dims = world.dims.xyz;
    let local = block * WG + lid * TARGETS + i - world.base.z;
    var s = FarSite(vec3<u32>(0u), vec3<f32>(0.0), vec3<u32>(NO_RANK, NO_RANK, SITE_ENTRIES), false);
    if (i < TARGETS && local < dims.x * dims.y * dims.z) {
        s.p = ddef_site_point(dims, local);
        s.u = ddef_site(world, s.p);
        s.r = far_start(world, s.p, first);
        s.valid = true;
    }
    return s;
}

// The sources of [b, b + 32) in M_j as bits (bit k: source b + k), the site's cursor
// moved past them: M_j's ranges come in increasing order, so this walks each range once.
fn far_mask(world: DdefWorld, s: ptr<function, FarSite>, b: u32) -> u32 {
    var m = 0u;
    var r = (*s).r;
    loop {
        if (r.x >= b + 32u) {
            break;
        }
        let lo = max(r.x, b) - b;
        let hi = min(r.y, b + 32u) - b;
        m = m | (select((1u << hi) - 1u, 0xffffffffu, hi == 32u) & ~((1u << lo) - 1u));
        if (r.y > b + 32u) {
            break;
        }
        r = far_next_range(world, (*s).p, r.z);
    }
    (*s).r = r;
    return m;
}

// `acc` plus source sj's pull at u unless bit k of the mask `m` excludes it (the term is
// never added: the same bits as skipping it).
fn far_take(acc: vec3<f32>, u: vec3<f32>, sj: vec4<f32>, eps2: f32, m: u32, k: u32) -> vec3<f32> {
    return select(far_pull(acc, u, sj, eps2), acc, ((m >> k) & 1u) != 0u);
}

// The !STAGED far field: TARGETS (<= FAR_SITES) consecutive sites per invocation, each
// source read once for all of them (a read costs lavapipe more than a pair), in blocks
// of 32 whose M_j membership is a bit mask per site. Per site the same terms in the same
// order as `main`'s walk (eq. 17, exact exclusion: docs/physics.md §8). Written out per
// site: a loop over the sites would cost llvmpipe a loop iteration (of its budget) per
// source and site; the sites past TARGETS behind a constant test, so a GPU running fewer
// (`DdefFar::Direct*`) computes none of theirs.
fn unstaged(wid: vec3<u32>, lid: u32) {
    let chunk = wid.y;
    let world = ddef_worlds[far_world(wid.x)];
    let dims = world.dims.xyz;
    if (chunk >= u32(world.planned.w) || wid.x * WG - world.base.z >= dims.x * dims.y * dims.z) {
        return;
    }
    let span = far_chunk(world, chunk);
    let eps2 = world.eps2.x;
    var s0 = far_site(world, wid.x, lid, 0u, span.x);
    var s1 = far_site(world, wid.x, lid, 1u, span.x);
    var s2 = far_site(world, wid.x, lid, 2u, span.x);
    var s3 = far_site(world, wid.x, lid, 3u, span.x);
    var s4 = far_site(world, wid.x, lid, 4u, span.x);
    var s5 = far_site(world, wid.x, lid, 5u, span.x);
    var s6 = far_site(world, wid.x, lid, 6u, span.x);
    var s7 = far_site(world, wid.x, lid, 7u, span.x);
    var s8 = far_site(world, wid.x, lid, 8u, span.x);
    var s9 = far_site(world, wid.x, lid, 9u, span.x);
    var s10 = far_site(world, wid.x, lid, 10u, span.x);
    var s11 = far_site(world, wid.x, lid, 11u, span.x);
    var s12 = far_site(world, wid.x, lid, 12u, span.x);
    var s13 = far_site(world, wid.x, lid, 13u, span.x);
    var s14 = far_site(world, wid.x, lid, 14u, span.x);
    var s15 = far_site(world, wid.x, lid, 15u, span.x);
    var a0 = vec3<f32>(0.0);
    var a1 = vec3<f32>(0.0);
    var a2 = vec3<f32>(0.0);
    var a3 = vec3<f32>(0.0);
    var a4 = vec3<f32>(0.0);
    var a5 = vec3<f32>(0.0);
    var a6 = vec3<f32>(0.0);
    var a7 = vec3<f32>(0.0);
    var a8 = vec3<f32>(0.0);
    var a9 = vec3<f32>(0.0);
    var a10 = vec3<f32>(0.0);
    var a11 = vec3<f32>(0.0);
    var a12 = vec3<f32>(0.0);
    var a13 = vec3<f32>(0.0);
    var a14 = vec3<f32>(0.0);
    var a15 = vec3<f32>(0.0);
    for (var b = span.x; b < span.y; b = b + 32u) {
        let m0 = far_mask(world, &s0, b);
        var m1 = 0u;
        if (TARGETS > 1u) {
            m1 = far_mask(world, &s1, b);
        }
        var m2 = 0u;
        if (TARGETS > 2u) {
            m2 = far_mask(world, &s2, b);
        }
        var m3 = 0u;
        if (TARGETS > 3u) {
            m3 = far_mask(world, &s3, b);
        }
        var m4 = 0u;
        if (TARGETS > 4u) {
            m4 = far_mask(world, &s4, b);
        }
        var m5 = 0u;
        if (TARGETS > 5u) {
            m5 = far_mask(world, &s5, b);
        }
        var m6 = 0u;
        if (TARGETS > 6u) {
            m6 = far_mask(world, &s6, b);
        }
        var m7 = 0u;
        if (TARGETS > 7u) {
            m7 = far_mask(world, &s7, b);
        }
        var m8 = 0u;
        if (TARGETS > 8u) {
            m8 = far_mask(world, &s8, b);
        }
        var m9 = 0u;
        if (TARGETS > 9u) {
            m9 = far_mask(world, &s9, b);
        }
        var m10 = 0u;
        if (TARGETS > 10u) {
            m10 = far_mask(world, &s10, b);
        }
        var m11 = 0u;
        if (TARGETS > 11u) {
            m11 = far_mask(world, &s11, b);
        }
        var m12 = 0u;
        if (TARGETS > 12u) {
            m12 = far_mask(world, &s12, b);
        }
        var m13 = 0u;
        if (TARGETS > 13u) {
            m13 = far_mask(world, &s13, b);
        }
        var m14 = 0u;
        if (TARGETS > 14u) {
            m14 = far_mask(world, &s14, b);
        }
        var m15 = 0u;
        if (TARGETS > 15u) {
            m15 = far_mask(world, &s15, b);
        }
        let n = min(32u, span.y - b);
        for (var k = 0u; k < n; k = k + 1u) {
            let sj = sorted_src[b + k];
            a0 = far_take(a0, s0.u, sj, eps2, m0, k);
            if (TARGETS > 1u) {
                a1 = far_take(a1, s1.u, sj, eps2, m1, k);
            }
            if (TARGETS > 2u) {
                a2 = far_take(a2, s2.u, sj, eps2, m2, k);
            }
            if (TARGETS > 3u) {
                a3 = far_take(a3, s3.u, sj, eps2, m3, k);
            }
            if (TARGETS > 4u) {
                a4 = far_take(a4, s4.u, sj, eps2, m4, k);
            }
            if (TARGETS > 5u) {
                a5 = far_take(a5, s5.u, sj, eps2, m5, k);
            }
            if (TARGETS > 6u) {
                a6 = far_take(a6, s6.u, sj, eps2, m6, k);
            }
            if (TARGETS > 7u) {
                a7 = far_take(a7, s7.u, sj, eps2, m7, k);
            }
            if (TARGETS > 8u) {
                a8 = far_take(a8, s8.u, sj, eps2, m8, k);
            }
            if (TARGETS > 9u) {
                a9 = far_take(a9, s9.u, sj, eps2, m9, k);
            }
            if (TARGETS > 10u) {
                a10 = far_take(a10, s10.u, sj, eps2, m10, k);
            }
            if (TARGETS > 11u) {
                a11 = far_take(a11, s11.u, sj, eps2, m11, k);
            }
            if (TARGETS > 12u) {
                a12 = far_take(a12, s12.u, sj, eps2, m12, k);
            }
            if (TARGETS > 13u) {
                a13 = far_take(a13, s13.u, sj, eps2, m13, k);
            }
            if (TARGETS > 14u) {
                a14 = far_take(a14, s14.u, sj, eps2, m14, k);
            }
            if (TARGETS > 15u) {
                a15 = far_take(a15, s15.u, sj, eps2, m15, k);
            }
        }
    }
    let last = ddef_worlds[params.n_worlds - 1u];
    let out = chunk * (last.base.z + last.cap.z) + wid.x * WG + lid * TARGETS;
    let acc = array<vec3<f32>, FAR_SITES>(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
    let on = array<bool, FAR_SITES>(s0.valid, s1.valid, s2.valid, s3.valid, s4.valid, s5.valid, s6.valid, s7.valid, s8.valid, s9.valid, s10.valid, s11.valid, s12.valid, s13.valid, s14.valid, s15.valid);
    for (var i = 0u; i < FAR_SITES; i = i + 1u) {
        if (on[i]) {
            far_part[out + i] = vec4<f32>(acc[i], 0.0);
        }
    }
}
