// A target frame's share of the loss (grad::loss: scale |x_i - xhat_i|^2 summed, scale =
// 1/(F n)) and its cotangent seeded into the adjoint: lx_i += 2 scale (x_i - xhat_i),
// disp.weight = 2 scale. Each workgroup's share of the loss goes to
// loss[disp.iter n_wg + g] (frame disp.iter), summed on the host in a fixed order.

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> xhat: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> lx: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> loss: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    var share = vec4<f32>(0.0);
    if (is_row(i)) {
        let d = x[i].xyz - xhat[i].xyz;
        lx[i] = vec4<f32>(lx[i].xyz + disp.weight * d, 0.0);
        share = vec4<f32>(0.5 * disp.weight * dot(d, d), 0.0, 0.0, 0.0);
    }
    let total = wg_sum(lid, share);
    if (lid == 0u) {
        loss[disp.iter * params.n_wg + group_index(wid, nwg)] = total;
    }
}
