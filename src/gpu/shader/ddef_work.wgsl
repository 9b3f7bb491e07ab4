// The DDEF gather's work items, for the kernels that walk a cell's neighbourhood per item
// (ddef_gather, its tangent and its adjoints): the list ddef_cells writes after the
// tetrahedra's starts, one item per WG of a cell's sorted sources. Reads `ddef_worlds`
// and `starts`, which every kernel composing this library declares.

struct DdefItem {
    cell: u32,
    chunk: u32,
    world: u32,
    valid: bool,
}

// Work item g: its cell (the last one starting at or before it), the chunk of that
// cell's sources, and its world; `valid` false past the list.
fn ddef_work_item(g: u32) -> DdefItem {
    let last = ddef_worlds[params.n_worlds - 1u];
    let tets = last.base.x + last.cap.x;
    let cells = last.base.y + last.cap.y;
    let cs = tets + 1u;
    if (g >= starts[cs + cells]) {
        return DdefItem(0u, 0u, 0u, false);
    }
    var cell = 0u;
    var top = cells;
    while (top - cell > 1u) {
        let mid = (cell + top) / 2u;
        if (starts[cs + mid] <= g) {
            cell = mid;
        } else {
            top = mid;
        }
    }
    var w = 0u;
    top = params.n_worlds;
    while (top - w > 1u) {
        let mid = (w + top) / 2u;
        if (ddef_worlds[mid].base.y <= cell) {
            w = mid;
        } else {
            top = mid;
        }
    }
    return DdefItem(cell, g - starts[cs + cell], w, true);
}
