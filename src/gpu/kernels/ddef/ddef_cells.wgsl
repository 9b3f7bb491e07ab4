// DDEF step 7: per cell, the workgroups its targets need in ddef_gather (one per WG
// targets; 0 for an empty cell), scanned next into the gather's work list. Cells and
// tetrahedra are reserved together (6 per cell), so cell c's sources are the sorted
// range start[6 c]..start[6 c + 6] in every world.
// LOOP_BUDGET (on a CPU adapter, shader::CPU_GATHER_SOURCES): a ddef_gather invocation
// walks the sources of its cell's neighbourhood (the stencils' cell offsets) at most
// once, within llvmpipe's loop budget while they are at most LOOP_BUDGET; a cell with
// more gets no work, and the count goes to its world's flags.z, an error on the host.

override LOOP_BUDGET: u32 = 0xffffffffu;

@group(0) @binding(1) var<storage, read> starts: array<u32>;
@group(0) @binding(2) var<storage, read_write> ddef_worlds: array<DdefWorld>;
@group(0) @binding(3) var<storage, read_write> cell_count: array<u32>;
@group(0) @binding(4) var<storage, read> tables: array<u32>;

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
    if (LOOP_BUDGET != 0xffffffffu && n > 0u) {
        var w = 0u;
        var top = params.n_worlds;
        while (top - w > 1u) {
            let mid = (w + top) / 2u;
            if (ddef_worlds[mid].base.y <= c) {
                w = mid;
            } else {
                top = mid;
            }
        }
        let world = ddef_worlds[w];
        let dims = world.dims.xyz;
        let cp = ddef_cell_point(dims, c - world.base.y);
        var around = 0u;
        for (var d = 0u; d < tables[0u]; d = d + 1u) {
            let nc = ddef_offset_cell(dims, cp, ddef_entry_offset(tables[tables[1u] + d]));
            if (nc.x >= 0) {
                let t0 = world.base.x + KUHN * ddef_cell_index(dims, vec3<u32>(nc));
                around = around + starts[t0 + KUHN] - starts[t0];
            }
        }
        if (around > LOOP_BUDGET) {
            ddef_worlds[w].flags.z = around;
            cell_count[c] = 0u;
            return;
        }
    }
    cell_count[c] = (n + WG - 1u) / WG;
}
