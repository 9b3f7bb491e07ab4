// DDEF step 7: per cell, the workgroups its targets need in ddef_gather (one per WG
// targets; 0 for an empty cell), scanned next into the gather's work list. Cells and
// tetrahedra are reserved together (6 per cell), so cell c's sources are the sorted
// range start[6 c]..start[6 c + 6] in every world.

@group(0) @binding(1) var<storage, read> starts: array<u32>;
@group(0) @binding(2) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(3) var<storage, read_write> cell_count: array<u32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let c = flat_index(wid, nwg, lid);
    let last = ddef_worlds[params.n_worlds - 1u];
    if (c >= last.base.y + last.cap.y) {
        return;
    }
    let n = starts[KUHN * c + KUHN] - starts[KUHN * c];
    cell_count[c] = (n + WG - 1u) / WG;
}
