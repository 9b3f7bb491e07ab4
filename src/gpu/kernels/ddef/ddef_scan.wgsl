// An exclusive prefix sum of u32 counts (the tetrahedra's sources, the cells' target
// chunks), in levels of blocks of SCAN_BLOCK (4 per invocation), so it is exact and in a
// fixed order. Dispatch record: `iter` = the level's entry in the tables' scan levels,
// `mode` = SCAN_UP (scan each block, write its total one level up) or SCAN_DOWN (add the
// scanned totals of the level above). Level 0 reads `input` and writes `output` at the
// entry's offset; higher levels live in `scratch`. Its last element reads 0, so the total
// lands at output[len - 1].

const SCAN_UP: u32 = 0u;
const SCAN_DOWN: u32 = 1u;
const SCAN_BLOCK: u32 = 1024u;

@group(0) @binding(1) var<storage, read> input: array<u32>;
@group(0) @binding(2) var<storage, read_write> output: array<u32>;
@group(0) @binding(3) var<storage, read_write> scratch: array<u32>;
@group(0) @binding(4) var<storage, read> tables: array<u32>;

var<workgroup> part: array<u32, WG>;

fn load(level: u32, i: u32, len: u32, in_len: u32, off: u32) -> u32 {
    if (i >= len) {
        return 0u;
    }
    if (level == 0u) {
        return select(0u, input[i], i < in_len);
    }
    return scratch[off + i];
}

fn store(level: u32, i: u32, len: u32, off: u32, v: u32) {
    if (i >= len) {
        return;
    }
    if (level == 0u) {
        output[off + i] = v;
    } else {
        scratch[off + i] = v;
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // Entry: level, len, in_len (level 0), off (its data), sums (the level above's data).
    let e = tables[3u] + 5u * disp.iter;
    let level = tables[e];
    let len = tables[e + 1u];
    let in_len = tables[e + 2u];
    let off = tables[e + 3u];
    let sums = tables[e + 4u];
    let b = group_index(wid, nwg);
    let i0 = b * SCAN_BLOCK + 4u * lid;
    if (disp.mode == SCAN_DOWN) {
        // Every element of block b gets the scanned total of the blocks before it.
        if (b * SCAN_BLOCK < len) {
            let add = scratch[sums + b];
            for (var j = 0u; j < 4u; j = j + 1u) {
                let i = i0 + j;
                store(level, i, len, off, load_out(level, i, len, off) + add);
            }
        }
        return;
    }
    var v = array<u32, 4>();
    var s = 0u;
    for (var j = 0u; j < 4u; j = j + 1u) {
        v[j] = load(level, i0 + j, len, in_len, off);
        s = s + v[j];
    }
    // Inclusive scan of the invocations' sums (Hillis-Steele, fixed order).
    part[lid] = s;
    workgroupBarrier();
    for (var d = 1u; d < WG; d = d * 2u) {
        var x = part[lid];
        if (lid >= d) {
            x = x + part[lid - d];
        }
        workgroupBarrier();
        part[lid] = x;
        workgroupBarrier();
    }
    var run = part[lid] - s;
    for (var j = 0u; j < 4u; j = j + 1u) {
        store(level, i0 + j, len, off, run);
        run = run + v[j];
    }
    if (lid == WG - 1u && b * SCAN_BLOCK < len) {
        scratch[sums + b] = part[WG - 1u];
    }
}

// The level's data as written by SCAN_UP.
fn load_out(level: u32, i: u32, len: u32, off: u32) -> u32 {
    if (level == 0u) {
        return output[off + i];
    }
    return scratch[off + i];
}
