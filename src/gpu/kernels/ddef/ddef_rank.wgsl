// DDEF step 6: the counting sort's order. The source at scattered position k goes to
// start[t] + (the sources of its tetrahedron with a smaller slot), so each range holds
// its sources in particle order whatever order the atomics took, and the sorted arrays
// are the same bits on every run: (position, scaled charge) and (particle, tetrahedron).
// LOOP_BUDGET (on a CPU adapter, shader::CPU_WALK_BUDGET): a tetrahedron holding more
// charges is not ranked; its count goes to its world's flags.y, an error on the host.

override LOOP_BUDGET: u32 = 0xffffffffu;

@group(0) @binding(1) var<storage, read> scattered: array<u32>;
@group(0) @binding(2) var<storage, read> src_tet: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read> sources: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> charged: array<u32>;
@group(0) @binding(6) var<storage, read_write> ddef_worlds: array<DdefWorld>;
@group(0) @binding(7) var<storage, read_write> sorted_src: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> sorted_key: array<vec2<u32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let k = flat_index(wid, nwg, lid);
    let last = ddef_worlds[params.n_worlds - 1u];
    if (k >= starts[last.base.x + last.cap.x]) {
        return;
    }
    let s = scattered[k];
    let t = src_tet[s];
    let b = starts[t];
    let e = starts[t + 1u];
    if (e - b > LOOP_BUDGET) {
        var w = 0u;
        var top = params.n_worlds;
        while (top - w > 1u) {
            let mid = (w + top) / 2u;
            if (ddef_worlds[mid].base.x <= t) {
                w = mid;
            } else {
                top = mid;
            }
        }
        ddef_worlds[w].flags.y = e - b;
        return;
    }
    var r = 0u;
    for (var j = b; j < e; j = j + 1u) {
        r = r + select(0u, 1u, scattered[j] < s);
    }
    sorted_src[b + r] = sources[s];
    sorted_key[b + r] = vec2<u32>(charged[s], t);
}
