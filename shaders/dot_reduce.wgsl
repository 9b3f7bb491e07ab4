// Second stage of every reduction: one workgroup sums block `disp.block` of the
// per-workgroup partials (params.n_wg vec4s) into scalars[disp.slot], in a fixed order.

@group(0) @binding(1) var<storage, read> partials: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> scalars: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let count = params.n_wg;
    let base = disp.block * count;
    var acc = vec4<f32>(0.0);
    for (var k = lid; k < count; k = k + WG) {
        acc = acc + partials[base + k];
    }
    let total = wg_sum(lid, acc);
    if (lid == 0u) {
        scalars[disp.slot] = total;
    }
}
