// DDEF step 1 (crate::ddef::plan::bounds): per workgroup of Coulomb source slots, the
// bounding box of its charged sources (min and max: order-free, so deterministic);
// ddef_frame reduces them per world. A batch's worlds are whole tiles (= workgroups)
// apart, so a workgroup never mixes worlds. Empty: (+inf, -inf).

@group(0) @binding(1) var<storage, read> sources: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> charged: array<u32>;
// Per workgroup: its min, then its max (xyz).
@group(0) @binding(3) var<storage, read_write> bounds: array<vec4<f32>>;

var<workgroup> lo: array<vec4<f32>, WG>;
var<workgroup> hi: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let c = flat_index(wid, nwg, lid);
    let inf = bitcast<f32>(0x7f800000u);
    var a = vec4<f32>(inf);
    var b = vec4<f32>(-inf);
    if (c < params.n_charged && charged[c] != NO_RANK) {
        a = vec4<f32>(sources[c].xyz, 0.0);
        b = a;
    }
    lo[lid] = a;
    hi[lid] = b;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            lo[lid] = min(lo[lid], lo[lid + s]);
            hi[lid] = max(hi[lid], hi[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let g = group_index(wid, nwg);
        bounds[2u * g] = lo[0];
        bounds[2u * g + 1u] = hi[0];
    }
}
