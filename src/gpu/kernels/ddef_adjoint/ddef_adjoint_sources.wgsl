// DDEF adjoint, step 1 (LatticeDdef::forces_vjp): beside each sorted source k of the
// forward's evaluation (its structure frozen), adj_sorted[2k] = (x, qs) and
// adj_sorted[2k + 1] = (c, 0), c = qs w the cotangent of the field at k from the force
// cotangent w of its particle (direction disp.slot's dx bank of `cot`).

@group(0) @binding(1) var<storage, read> ddef_worlds: array<DdefWorld>;
@group(0) @binding(2) var<storage, read> starts: array<u32>;
@group(0) @binding(3) var<storage, read> sorted_src: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> sorted_key: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> cot: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> adj_sorted: array<vec4<f32>>;

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
    let src = sorted_src[k];
    let w = cot[disp.slot * 2u * params.n + sorted_key[k].x].xyz;
    adj_sorted[2u * k] = src;
    adj_sorted[2u * k + 1u] = vec4<f32>(src.w * w, 0.0);
}
