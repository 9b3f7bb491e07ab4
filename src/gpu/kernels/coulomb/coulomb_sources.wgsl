// Compacts the charged particles into (position, charge * sqrt(k_c)): the Coulomb sources.

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> charged: array<u32>;
@group(0) @binding(4) var<storage, read_write> sources: array<vec4<f32>>;

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
    let i = charged[c];
    // A batch's padding slot between two worlds' sources.
    if (i == NO_RANK) {
        return;
    }
    sources[c] = vec4<f32>(x[i].xyz, props[i].y);
}
