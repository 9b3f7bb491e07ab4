// DDEF step 3 (Frame::locate): each charged source's tetrahedron in closed form (the
// world's tetrahedron base plus 6 cell + Kuhn type), and its count per tetrahedron
// (integer atomics: order-free). A batch's padding slots get NO_RANK.

@group(0) @binding(1) var<storage, read> sources: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> charged: array<u32>;
@group(0) @binding(3) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(4) var<storage, read_write> src_tet: array<u32>;
@group(0) @binding(5) var<storage, read_write> tet_count: array<atomic<u32>>;

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
    if (charged[c] == NO_RANK) {
        src_tet[c] = NO_RANK;
        return;
    }
    // The world whose source slots hold c.
    var w = 0u;
    var top = params.n_worlds;
    while (top - w > 1u) {
        let mid = (w + top) / 2u;
        if (ddef_worlds[mid].base.w <= c) {
            w = mid;
        } else {
            top = mid;
        }
    }
    let world = ddef_worlds[w];
    let loc = ddef_locate(world, sources[c].xyz);
    let t = world.base.x + KUHN * ddef_cell_index(world.dims.xyz, loc.cell) + loc.kuhn;
    src_tet[c] = t;
    atomicAdd(&tet_count[t], 1u);
}
