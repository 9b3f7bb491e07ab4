// All-pairs Coulomb force on each charged particle (paper eq. 8; the GPU Gems 3 ch. 31
// n-body scheme): a workgroup owns TILE consecutive charged targets, TARGETS per invocation
// (register blocking: each source read from workgroup memory serves TARGETS targets), and
// stages TILE sources at a time in workgroup memory. Only charged particles are sources or
// targets (uncharged ones feel no Coulomb force), so the work is (charged count)^2. Adds to
// the force from external_forces and stores sum_j k_c q_i q_j / sqrt(r^2 + eps^2) in w (for
// the energy). The host dispatches one workgroup per TILE (= WG) charged particles.

@group(0) @binding(1) var<storage, read> sources: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> charged: array<u32>;
@group(0) @binding(3) var<storage, read_write> force: array<vec4<f32>>;

// Targets per invocation, set by the host at pipeline creation (`Kernel::cpu_targets`):
// a divisor of TILE, at most MAX_TARGETS. The workgroup has TILE / TARGETS invocations.
override TARGETS: u32 = 1u;
const MAX_TARGETS: u32 = 16u;

var<workgroup> tile: array<vec4<f32>, TILE>;

// acc += (q_j d / (r^2 + eps^2)^(3/2), q_j / sqrt(r^2 + eps^2)), charges scaled by
// sqrt(k_c); `on` = false adds an exact zero (the self pair, skipped by index; a coincident
// pair without softening gives a non-finite pull, pair_inv_dist, so the run diverges
// instead of dropping it).
fn add_pair(acc: vec4<f32>, me: vec3<f32>, sj: vec4<f32>, eps2: f32, on: bool) -> vec4<f32> {
    let d = me - sj.xyz;
    let inv = select(0.0, pair_inv_dist(soft_r2(d, eps2)), on);
    let w = sj.w * inv;
    return vec4<f32>(acc.xyz + (w * inv * inv) * d, acc.w + w);
}

@compute @workgroup_size(TILE / TARGETS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lanes = TILE / TARGETS;
    // Target r of this invocation: first + lid + r lanes (neighbouring lanes, neighbouring
    // targets). Each target sums its sources in index order, whatever TARGETS is.
    let first = group_index(wid, nwg) * TILE;
    // The world of this workgroup's targets (a batch: worlds are whole tiles apart) and
    // its sources [cb, nc).
    var w = 0u;
    if (first < params.n_charged) {
        w = world_of(charged[first]);
    }
    let range = world_charged(w);
    let cb = range.x;
    let nc = range.y;
    let eps2 = world_eps2(w);
    var me: array<vec3<f32>, MAX_TARGETS>;
    var acc: array<vec4<f32>, MAX_TARGETS>;
    for (var r = 0u; r < TARGETS; r = r + 1u) {
        let c = first + lid + r * lanes;
        me[r] = vec3<f32>(0.0);
        if (c < nc) {
            me[r] = sources[c].xyz;
        }
        acc[r] = vec4<f32>(0.0);
    }
    // Every invocation loads and syncs, valid or not (uniform control flow).
    for (var base = cb; base < nc; base = base + TILE) {
        for (var r = 0u; r < TARGETS; r = r + 1u) {
            let s = base + lid + r * lanes;
            var src = vec4<f32>(0.0);
            if (s < nc) {
                src = sources[s];
            }
            tile[lid + r * lanes] = src;
        }
        workgroupBarrier();
        if (base == first || base + TILE > nc) {
            // The diagonal tile (this workgroup's own targets) and the last, partial one:
            // the self pair is tested and the loop stops at the last source.
            let count = min(TILE, nc - base);
            for (var k = 0u; k < count; k = k + 1u) {
                let sj = tile[k];
                for (var r = 0u; r < TARGETS; r = r + 1u) {
                    acc[r] = add_pair(acc[r], me[r], sj, eps2, base + k != first + lid + r * lanes);
                }
            }
        } else {
            // A full tile of other targets' sources: a constant trip count, no pair test.
            for (var k = 0u; k < TILE; k = k + 1u) {
                let sj = tile[k];
                for (var r = 0u; r < TARGETS; r = r + 1u) {
                    acc[r] = add_pair(acc[r], me[r], sj, eps2, true);
                }
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < TARGETS; r = r + 1u) {
        let c = first + lid + r * lanes;
        if (c < nc) {
            let i = charged[c];
            let q = sources[c].w;
            force[i] = vec4<f32>(force[i].xyz + q * acc[r].xyz, q * acc[r].w);
        }
    }
}
