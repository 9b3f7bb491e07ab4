// dst[slot n + i] = src[i] per particle, slot = disp.iter: keeps the local-global iterate z
// a tangent alternation needs after the forward's solve has overwritten it (tangent_lg_rhs,
// slot 0), or the adjoint's recomputed iterates (one slot each; adjoint_lg_springs).

@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    if (i >= params.n) {
        return;
    }
    dst[disp.iter * params.n + i] = src[i];
}
