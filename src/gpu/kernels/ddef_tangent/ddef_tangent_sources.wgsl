// DDEF tangents, step 1 (crate::ddef::lattice_tangent): beside each sorted source k of the
// forward's evaluation (its structure frozen), direction disp.iter's tangents, read
// through the particle of sorted_key[k]: tan_sorted[2k] = (x, qs), tan_sorted[2k + 1] =
// (dx, dqs), charges scaled by sqrt(k_c). Bank layouts as in tangent_coulomb.wgsl.

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> starts: array<u32>;
@group(0) @binding(3) var<storage, read> sorted_src: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> tstate: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> tdir: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> tan_sorted: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let k = flat_index(wid, nwg, lid);
    let last = ddef_worlds[params.n_worlds - 1u];
    if (k >= starts[last.base.x + last.cap.x]) {
        return;
    }
    let p = sorted_key[k].x;
    let sbase = disp.iter * 2u * params.n;
    let dbase = disp.iter * (params.n + params.n_springs + params.world.n_ext);
    tan_sorted[2u * k] = sorted_src[k];
    tan_sorted[2u * k + 1u] = vec4<f32>(tstate[sbase + p].xyz, tdir[dbase + p].x);
}
