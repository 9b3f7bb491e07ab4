// DDEF adjoint, step 7 (the GPU adjoint's field transpose): per charged particle p its
// DDEF cotangents from ddef_source_adjoint, for the cotangent mu of the reversed step:
// x_bar added to bd[bd_b(p)] after tangent_coulomb's transposed external part (as
// ddef_gather_tangent adds the DDEF tangent), and with ADJ_DDEF_CHARGES h qs_bar to the
// all-pairs charge slot of `part` (as adjoint_charges; the host multiplies by sqrt(k_c)).
// Uncharged particles are no sources: nothing (their `out` may hold anything).

const ADJ_DDEF_CHARGES: u32 = 1u;

@group(0) @binding(1) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> out: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> bd: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> part: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let p = flat_index(wid, nwg, lid);
    if (!is_row(p) || props[p].y == 0.0) {
        return;
    }
    let o = out[p];
    let b = bd_b(p);
    bd[b] = vec4<f32>(bd[b].xyz + o.xyz, 0.0);
    if ((disp.mode & ADJ_DDEF_CHARGES) != 0u) {
        part[p] = part[p] + vec4<f32>(0.0, 0.0, 0.0, world_dt(world_of(p)) * o.w);
    }
}
