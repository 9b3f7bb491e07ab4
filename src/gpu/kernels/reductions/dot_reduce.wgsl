// Second stage of every reduction: workgroup w sums world w's part of block `disp.block`
// of the per-workgroup partials (params.n_wg vec4s a block) into its scalar `disp.slot`,
// in a fixed order (one world: all n_wg partials).

@group(0) @binding(1) var<storage, read> partials: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> scalars: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let w = group_index(wid, nwg);
    let groups = world_groups(w);
    let count = groups.y - groups.x;
    let base = disp.block * params.n_wg + groups.x;
    var acc = vec4<f32>(0.0);
    for (var k = lid; k < count; k = k + WG) {
        acc = acc + partials[base + k];
    }
    let total = wg_sum(lid, acc);
    if (lid == 0u) {
        scalars[scalar_slot(w, disp.slot)] = total;
    }
}
