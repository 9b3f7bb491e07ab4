// DDEF step 5: the counting sort's scatter. Each located source takes a slot in its
// tetrahedron's range start[t]..start[t + 1] by an atomic decrement of the count, which
// leaves every count at 0 for the next evaluation; the order inside a range is the
// atomics' (ddef_rank fixes it).

@group(0) @binding(1) var<storage, read> src_tet: array<u32>;
@group(0) @binding(2) var<storage, read> starts: array<u32>;
@group(0) @binding(3) var<storage, read_write> tet_count: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> scattered: array<u32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let c = flat_index(wid, nwg, lid);
    if (c >= params.n_charged) {
        return;
    }
    let t = src_tet[c];
    if (t == NO_RANK) {
        return;
    }
    let slot = starts[t] + atomicSub(&tet_count[t], 1u) - 1u;
    scattered[slot] = c;
}
