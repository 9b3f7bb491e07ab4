// DDEF far field at every grid site u_j (paper eq. 17): the sum over the sources NOT in
// M_j, one invocation per site, sources staged TILE at a time in workgroup memory as in
// coulomb_tiled. The exclusion is exact, source by source: M_j is sorted by source, so
// each site walks its list with a cursor while the sources stream by in order, and skips
// a source when it is the next one of M_j (never add-then-subtract, which would cancel
// catastrophically in f32 for a source next to u_j). Mirrors `far_field` in
// src/ddef/field.rs. Charges are scaled by sqrt(k_c): far holds E_far / sqrt(k_c).

@group(0) @binding(1) var<storage, read> counts: DdefCounts;
@group(0) @binding(2) var<storage, read> sites: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> sources: array<vec4<f32>>;
// CSR M_j: words 0..=n_sites are row offsets, entry e is word n_sites + 1 + e.
@group(0) @binding(4) var<storage, read> site_sources: array<u32>;
@group(0) @binding(5) var<storage, read_write> far: array<vec4<f32>>;

var<workgroup> tile: array<vec4<f32>, TILE>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let j = flat_index(wid, nwg, lid);
    let m = counts.n_sites;
    let ns = counts.n_sources;
    let eps2 = counts.eps2;
    let valid = j < m;
    var u = vec3<f32>(0.0);
    var cursor = 0u;
    var end = 0u;
    // The next excluded source; NO_RANK (never a source index) when M_j is used up.
    var next = NO_RANK;
    if (valid) {
        u = sites[j].xyz;
        cursor = site_sources[j];
        end = site_sources[j + 1u];
        if (cursor < end) {
            next = site_sources[m + 1u + cursor];
        }
    }
    var acc = vec3<f32>(0.0);
    // Every invocation loads and syncs, valid or not.
    for (var base = 0u; base < ns; base = base + TILE) {
        let s = base + lid;
        var src = vec4<f32>(0.0);
        if (s < ns) {
            src = sources[s];
        }
        tile[lid] = src;
        workgroupBarrier();
        let count = min(TILE, ns - base);
        for (var k = 0u; k < count; k = k + 1u) {
            if (base + k == next) {
                cursor = cursor + 1u;
                next = NO_RANK;
                if (cursor < end) {
                    next = site_sources[m + 1u + cursor];
                }
            } else {
                let sj = tile[k];
                let d = u - sj.xyz;
                let inv = inv_dist_or_zero(dot(d, d) + eps2);
                acc = acc + (sj.w * inv * inv * inv) * d;
            }
        }
        workgroupBarrier();
    }
    if (valid) {
        far[j] = vec4<f32>(acc, 0.0);
    }
}
